"""kafka-python's and aiokafka's transactional producers against a real KafkaServer: a
committed transaction with send_offsets_to_transaction, then an aborted one. Checked where
they land: COMMIT then ABORT markers on the partition, the group's offsets visible after the
commit only, the transactional id CompleteAbort at the coordinator."""

from __future__ import annotations

import asyncio

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
