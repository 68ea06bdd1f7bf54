"""Transactions with every client we support, against a real KafkaServer (single node, its
__transaction_state and __consumer_offsets on it): kafka-python's and aiokafka's transactional
producers, confluent-kafka's consume-transform-produce with send_offsets_to_transaction, and the
readers: confluent-kafka and kcat with isolation.level=read_committed see the committed
transactions only, read_uncommitted sees the aborted records too.

Each transaction writes values tagged with its outcome (b"commit-..." / b"abort-...") so a
reader's result says at once what it should not have seen."""

from __future__ import annotations

import asyncio
import shutil
import subprocess

import pytest
import trio

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

N = 20


def _read(bootstrap: str, topic: str, partitions: int, isolation: str, count: int) -> list[bytes]:
    """Values of `topic` from the beginning, until `count` arrived and 1 s passed quietly."""
    import time

    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values: list[bytes] = []
    quiet_since = time.monotonic()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        batch = consumer.consume(500, 0.1)
        for msg in batch:
            assert msg.error() is None, msg.error()
            values.append(msg.value())
        if batch:
            quiet_since = time.monotonic()
        elif len(values) >= count and time.monotonic() - quiet_since > 1:
            break
    consumer.close()
    return values


def _check_isolation(bootstrap: str, topic: str, partitions: int) -> None:
    committed = _read(bootstrap, topic, partitions, "read_committed", N)
    assert sorted(committed) == sorted(b"commit-%d" % i for i in range(N)), committed
    everything = _read(bootstrap, topic, partitions, "read_uncommitted", 2 * N)
    assert sorted(everything) == sorted(
        [b"commit-%d" % i for i in range(N)] + [b"abort-%d" % i for i in range(N)]
    )


def _kafka_python_transactions(bootstrap: str, topic: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-txn")
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(N):
        producer.send(topic, b"abort-%d" % i, partition=i % 2)
    producer.flush()  # on the broker before the abort (else the client just drops them)
    producer.abort_transaction()
    producer.begin_transaction()
    for i in range(N):
        producer.send(topic, b"commit-%d" % i, partition=i % 2)
    producer.commit_transaction()
    producer.close()


async def _aiokafka_transactions(bootstrap: str, topic: str) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-txn")
    await producer.start()
    try:
        await producer.begin_transaction()
        for i in range(N):  # on the broker before the abort
            await producer.send_and_wait(topic, b"abort-%d" % i, partition=i % 2)
        await producer.abort_transaction()
        async with producer.transaction():
            for i in range(N):
                await producer.send(topic, b"commit-%d" % i, partition=i % 2)
    finally:
        await producer.stop()


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
async def test_transactional_producers_and_read_committed(broker, client):
    topic = f"txn-{client}"
    await broker.create_topic(topic, partitions=2)
    if client == "kafka-python":
        await trio.to_thread.run_sync(_kafka_python_transactions, broker.bootstrap, topic)
    else:
        await trio.to_thread.run_sync(
            lambda: asyncio.run(_aiokafka_transactions(broker.bootstrap, topic))
        )
    await trio.to_thread.run_sync(_check_isolation, broker.bootstrap, topic, 2)


def _confluent_copy(bootstrap: str, source: str, sink: str) -> dict[str, int]:
    """Consume-transform-produce: one committed transaction copies the first half with its
    offsets, an aborted one copies the second half; the group's committed offset moves only with
    the committed transaction."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ck-copier"})
    producer.init_transactions(30)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "ck-copier-group",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(source, 0, 0)])
    seen: list = []
    while len(seen) < 2 * N:
        seen.extend(m for m in consumer.consume(100, 1) if m.error() is None)
    result = {}
    for outcome, part in (("commit", seen[:N]), ("abort", seen[N:])):
        producer.begin_transaction()
        for msg in part:
            producer.produce(sink, b"%s-%s" % (outcome.encode(), msg.value()), partition=0)
        offsets = [TopicPartition(source, 0, part[-1].offset() + 1)]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        [committed] = consumer.committed([TopicPartition(source, 0)], timeout=30)
        result[outcome] = committed.offset
    consumer.close()
    return result


def _kcat_read_committed(bootstrap: str, topic: str) -> list[bytes]:
    out = subprocess.run(
        ["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e",
         "-X", "isolation.level=read_committed", "-f", "%s\\n"],
        capture_output=True, timeout=60, check=True,
    )  # fmt: skip
    return out.stdout.split()


async def test_confluent_send_offsets_to_transaction_and_kcat_read_committed(broker):
    await broker.create_topic("copy-src", partitions=1)
    await broker.create_topic("copy-dst", partitions=1)

    def seed() -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(2 * N):
            producer.produce("copy-src", b"%d" % i, partition=0)
        assert producer.flush(15) == 0

    await trio.to_thread.run_sync(seed)
    committed = await trio.to_thread.run_sync(
        _confluent_copy, broker.bootstrap, "copy-src", "copy-dst"
    )
    # the aborted transaction's offsets never became the group's
    assert committed == {"commit": N, "abort": N}
    values = await trio.to_thread.run_sync(
        _read, broker.bootstrap, "copy-dst", 1, "read_committed", N
    )
    assert values == [b"commit-%d" % i for i in range(N)]
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (make setup installs it as root)")
    kcat_values = await trio.to_thread.run_sync(_kcat_read_committed, broker.bootstrap, "copy-dst")
    assert kcat_values == [b"commit-%d" % i for i in range(N)]
