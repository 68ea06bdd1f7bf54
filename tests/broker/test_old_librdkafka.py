"""An old librdkafka (confluent-kafka 2.3.0, librdkafka 2.3.0) against a real KafkaServer.

librdkafka before 2.11.1 checks features against exact API versions, not ranges: compression
needs Produce v0 inside the broker's advertised range, MsgVer2 needs Produce v3 and Fetch v4,
idempotence needs InitProducerId v0, zstd Produce v7 and Fetch v10. A broker that gets this
wrong still "works", but librdkafka then silently sends uncompressed batches, so besides the
round trip this test reads the stored batches back and checks their codec.

The client runs in its own interpreter: `make setup` builds `.venv-ck23` (only confluent-kafka
2.3.0 in it) beside the main venv; `QUORUMLOG_CK23_PYTHON` may point elsewhere. Without it the
test skips (plain `pytest` outside make); `make test` always has it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import trio

from log.records.batch_header import iter_batches
from log.records.compression import CompressionType
from tests.broker.conftest import WireClient, fetch_body

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("old_librdkafka_client.py")
CK23_PYTHON = Path(os.environ.get("QUORUMLOG_CK23_PYTHON", ROOT / ".venv-ck23" / "bin" / "python"))
COUNT = 120

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(
        not CK23_PYTHON.exists(),
        reason=f"no old-librdkafka venv at {CK23_PYTHON}: `make setup` creates it "
        "(python -m venv .venv-ck23 && .venv-ck23/bin/pip install confluent-kafka==2.3.0)",
    ),
]


async def stored_compression_types(port: int, topic: str, partitions: int) -> set[int]:
    client = await WireClient.connect(port)
    codecs: set[int] = set()
    try:
        for partition in range(partitions):
            body = await client.call(1, 11, fetch_body(topic, partition, 0))
            data = body.responses[0].partitions[0]
            assert data.error_code == 0, data
            codecs |= {h.compression_type for _, h in iter_batches(bytes(data.records))}
    finally:
        await client.aclose()
    return codecs


async def test_old_librdkafka_idempotent_produce_consume_admin(broker):
    with trio.fail_after(240):
        done = await trio.run_process(
            [str(CK23_PYTHON), str(SCRIPT), broker.bootstrap, "old-rdk", str(COUNT)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
    result = json.loads(done.stdout)
    assert result["version"].startswith("2.3."), result["version"]
    assert result["libversion"].startswith("2.3."), result["libversion"]
    assert all(error is None for error in result["create_errors"].values()), result
    for codec, outcome in result["codecs"].items():
        reports = outcome["reports"]
        assert [r for r in reports if r[0] is not None] == [], codec
        assert sorted(r[1] for r in reports) == sorted(f"key-{i}" for i in range(COUNT)), codec
        for partition in (0, 1):
            offsets = sorted(r[3] for r in reports if r[2] == partition)
            assert offsets == list(range(len(offsets))), (codec, partition)
        consumed = outcome["consumed"]
        assert sorted(c[:2] for c in consumed) == sorted(
            [f"key-{i}", f"value-{i} " * 20] for i in range(COUNT)
        ), codec
        # Each record came back where the broker acknowledged it.
        assert {(c[0], c[2], c[3]) for c in consumed} == {(r[1], r[2], r[3]) for r in reports}
        stored = await stored_compression_types(broker.port, outcome["topic"], 2)
        assert stored == {CompressionType.from_name(codec)}, (codec, stored)
