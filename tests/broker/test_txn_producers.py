"""kafka-python's, aiokafka's and the old confluent-kafka 2.3's transactional producers against
a real KafkaServer. kafka-python and aiokafka: a
committed transaction with send_offsets_to_transaction, then an aborted one. Checked where
they land: COMMIT then ABORT markers on the partition, the group's offsets visible after the
commit only, the transactional id CompleteAbort at the coordinator."""

from __future__ import annotations

import asyncio
import json

import pytest
import trio

from log.records.batch_header import iter_batches
from log.records.control import ControlRecordType, read_end_txn_marker
from tests.broker.conftest import WireClient, start_broker
from tests.broker.test_txn_coordinator import PROPS, fetch_offset, find_coordinator

TOPIC = "txn-clients"


def _kafka_python(bootstrap: str) -> None:
    from kafka import KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-txn")
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(3):
        producer.send(TOPIC, value=b"c%d" % i, partition=0)
    producer.send_offsets_to_transaction(
        {TopicPartition("source", 0): OffsetAndMetadata(11, "", -1)}, "kp-group"
    )
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send(TOPIC, value=b"a0", partition=0)
    producer.send_offsets_to_transaction(
        {TopicPartition("source", 0): OffsetAndMetadata(99, "", -1)}, "kp-group"
    )
    producer.flush()
    producer.abort_transaction()
    producer.close()


def _aiokafka(bootstrap: str) -> None:
    from aiokafka import AIOKafkaProducer, TopicPartition

    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-txn")
        await producer.start()
        try:
            async with asyncio.timeout(60):
                async with producer.transaction():
                    for i in range(3):
                        await producer.send_and_wait(TOPIC, b"c%d" % i, partition=0)
                    await producer.send_offsets_to_transaction(
                        {TopicPartition("source", 0): 11}, "aio-group"
                    )
                await producer.begin_transaction()
                await producer.send_and_wait(TOPIC, b"a0", partition=0)
                await producer.send_offsets_to_transaction(
                    {TopicPartition("source", 0): 99}, "aio-group"
                )
                await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(main())


def _markers(broker) -> list[bool]:
    log = broker.server.ctx.replica_manager.get(TOPIC, 0).log
    data = bytes(log.read(0, 1 << 20).records)
    found = []
    for position, header in iter_batches(data):
        if header.is_control:
            marker = read_end_txn_marker(data, position)
            assert marker is not None
            found.append(marker.control_type == ControlRecordType.COMMIT)
    return found


async def _check(broker, transactional_id: str, group: str) -> None:
    state = broker.server.ctx.transaction_coordinator.core.transaction(transactional_id)
    assert state is not None
    # The abort's markers are written after the client's answer: wait for the Complete record
    # (written once every marker is durable).
    while state.state.kafka_name != "CompleteAbort":
        await trio.sleep(0.02)
    assert _markers(broker) == [True, False]
    client = await WireClient.connect(broker.port)
    assert (await find_coordinator(client, group, key_type=0)).error_code == 0
    assert await fetch_offset(client, group, "source", 0) == 11  # not 99: that one aborted
    await client.aclose()


async def test_kafka_python_transactions(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **PROPS)
    await broker.create_topic(TOPIC)
    await broker.create_topic("source")
    await trio.to_thread.run_sync(_kafka_python, broker.bootstrap)
    await _check(broker, "kp-txn", "kp-group")


async def test_aiokafka_transactions(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **PROPS)
    await broker.create_topic(TOPIC)
    await broker.create_topic("source")
    await trio.to_thread.run_sync(_aiokafka, broker.bootstrap)
    await _check(broker, "aio-txn", "aio-group")


OLD_CONFLUENT_SCRIPT = """
import json, sys, time
import confluent_kafka
from confluent_kafka import Consumer, Producer
bootstrap, topic = sys.argv[1], sys.argv[2]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ck23-txn"})
p.init_transactions(30)
p.begin_transaction()
for i in range(3):
    p.produce(topic, value=b"c%d" % i, partition=0)
p.commit_transaction(30)
p.begin_transaction()
p.produce(topic, value=b"a0", partition=0)
p.flush(30)
p.abort_transaction(30)
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ck23-reader",
              "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
c.subscribe([topic])
values, deadline = [], time.monotonic() + 30
while len(values) < 3 and time.monotonic() < deadline:
    m = c.poll(0.2)
    if m is not None and m.error() is None:
        values.append(m.value().decode())
end = time.monotonic() + 1
while time.monotonic() < end:  # anything aborted would show up here
    m = c.poll(0.2)
    if m is not None and m.error() is None:
        values.append(m.value().decode())
c.close()
print(json.dumps({"version": confluent_kafka.libversion()[0], "values": values}))
"""


async def test_old_confluent_kafka_transactions(nursery, tmp_path):
    """confluent-kafka 2.3.0 (librdkafka 2.3.0, the old venv): commit, abort, read_committed."""
    from tests.broker.test_old_librdkafka import CK23_PYTHON

    if not CK23_PYTHON.exists():
        pytest.skip(f"no old-librdkafka venv at {CK23_PYTHON}")
    broker = await start_broker(nursery, tmp_path, **PROPS)
    await broker.create_topic(TOPIC)
    with trio.fail_after(120):
        done = await trio.run_process(
            [str(CK23_PYTHON), "-c", OLD_CONFLUENT_SCRIPT, broker.bootstrap, TOPIC],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
    result = json.loads(done.stdout)
    assert result["version"].startswith("2.3."), result
    assert result["values"] == ["c0", "c1", "c2"]
