"""Real consumers read a partition holding committed, aborted and open transactions.

The partition is written over the wire as a transactional producer and the transaction
coordinator would (Produce with transactional batches, WriteTxnMarkers); then confluent-kafka's
Consumer and kcat read it: with isolation.level=read_committed exactly the committed records
(and the plain ones) up to the last stable offset, with read_uncommitted everything.
"""

from __future__ import annotations

import shutil
import time

import pytest
import trio

from log.common.errors import ErrorCode
from log.records.builder import Record, build_batch
from tests.broker.conftest import WireClient, produce_body
from tests.broker.test_txn_markers import codes, markers_body

pytestmark = pytest.mark.interop

COMMITTED, ABORTED, OPEN = 11, 12, 13  # producer ids


def batch(values: list[str], producer_id: int = -1, sequence: int = -1) -> bytes:
    now_ms = int(time.time() * 1000)
    return build_batch(
        [Record(v.encode(), timestamp_ms=now_ms) for v in values],
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=sequence,
        is_transactional=producer_id >= 0,
    )


async def write_partition(port: int, topic: str) -> tuple[list[str], list[str]]:
    """(what read_committed must see, what read_uncommitted must see), in offset order."""
    client = await WireClient.connect(port)
    committed: list[str] = []
    everything: list[str] = []

    async def produce(values: list[str], producer_id: int = -1, sequence: int = -1) -> None:
        body = await client.call(
            0, 8, produce_body(topic, 0, batch(values, producer_id, sequence), acks=-1)
        )
        assert body.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        everything.extend(values)

    async def end(producer_id: int, commit: bool) -> None:
        body = await client.call(27, 1, markers_body((producer_id, 0, commit, 0, {topic: [0]})))
        assert set(codes(body).values()) == {ErrorCode.NONE}

    await produce(["c1-0", "c1-1", "c1-2"], COMMITTED, 0)
    await end(COMMITTED, True)
    committed += ["c1-0", "c1-1", "c1-2"]
    await produce(["a2-0", "a2-1"], ABORTED, 0)  # interleaved with a committed transaction
    await produce(["c3-0"], COMMITTED, 3)
    await produce(["a2-2"], ABORTED, 2)
    await produce(["c3-1"], COMMITTED, 4)
    await end(ABORTED, False)
    await produce(["plain-0", "plain-1"])
    await end(COMMITTED, True)
    committed += ["c3-0", "c3-1", "plain-0", "plain-1"]
    await produce(["open-0", "open-1"], OPEN, 0)  # never ended: bounds the LSO
    await produce(["plain-2"])  # above the LSO: read_committed must not see it yet
    await client.aclose()
    return committed, everything


def confluent_read(bootstrap: str, topic: str, isolation_level: str, polls: int = 200) -> list[str]:
    """Every value a confluent-kafka consumer at `isolation_level` sees in partition 0 up to its
    end (read_committed: the last stable offset), in at most `polls` polls of 0.2 s."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation_level,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[str] = []
    try:
        for _ in range(polls):
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                return values
            values.append(msg.value().decode())
        raise AssertionError(f"no end of partition after {values}")
    finally:
        consumer.close()


async def test_confluent_consumer_read_committed_skips_aborted_and_open(broker):
    await broker.create_topic("txn", 1)
    committed, everything = await write_partition(broker.port, "txn")
    with trio.fail_after(60):
        seen = await trio.to_thread.run_sync(
            confluent_read, broker.bootstrap, "txn", "read_committed"
        )
        assert seen == committed
        seen = await trio.to_thread.run_sync(
            confluent_read, broker.bootstrap, "txn", "read_uncommitted"
        )
        assert seen == everything


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
async def test_kcat_read_committed(broker):
    await broker.create_topic("txn", 1)
    committed, everything = await write_partition(broker.port, "txn")
    for isolation_level, expected in (("read_committed", committed),
                                      ("read_uncommitted", everything)):  # fmt: skip
        with trio.fail_after(30):
            consumed = await trio.run_process(
                ["kcat", "-C", "-b", broker.bootstrap, "-t", "txn", "-o", "beginning", "-e",
                 "-q", "-X", f"isolation.level={isolation_level}", "-f", "%s\n"],
                capture_stdout=True,
            )  # fmt: skip
        assert consumed.stdout.decode().splitlines() == expected, isolation_level
