"""kcat (Debian's 1.7.1 on librdkafka 2.0.2) produces and consumes through a real KafkaServer.

librdkafka before 2.11 checks features against exact versions, so this proves the broker
advertises Produce and Fetch from version 0 and that old clients still get v2 batches and
compression. `make setup` installs kcat where it can (root with apt-get); elsewhere this skips.
"""

from __future__ import annotations

import shutil

import pytest
import trio

from log.records.compression import CompressionType
from tests.broker.test_old_librdkafka import stored_compression_types

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed"),
]


@pytest.mark.parametrize("codec", ["none", "snappy", "lz4", "gzip"])
async def test_kcat_produce_then_consume(broker, codec):
    topic = f"kcat-{codec}"
    await broker.create_topic(topic, partitions=2)
    bootstrap = f"127.0.0.1:{broker.port}"
    # Values that compress even alone: librdkafka sends a batch plain when compressing does not
    # make it smaller (a batch of one short record, when kcat's stdin arrives in pieces).
    lines = [f"key{i}:value-{i}-{'x' * 200}" for i in range(50)]
    with trio.fail_after(30):
        await trio.run_process(
            ["kcat", "-P", "-b", bootstrap, "-t", topic, "-K", ":", "-z", codec],
            stdin="\n".join(lines).encode() + b"\n",
        )
        consumed = await trio.run_process(
            [
                "kcat",
                "-C",
                "-b",
                bootstrap,
                "-t",
                topic,
                "-o",
                "beginning",
                "-e",
                "-q",
                "-f",
                "%k:%s\n",
            ],
            capture_stdout=True,
        )
    assert sorted(consumed.stdout.decode().splitlines()) == sorted(lines)
    # Compressed as asked, not silently sent plain (librdkafka < 2.11.1's exact-version checks).
    stored = await stored_compression_types(broker.port, topic, 2)
    assert stored == {CompressionType.from_name(codec)}, stored
