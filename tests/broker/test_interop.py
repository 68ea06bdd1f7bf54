"""Real clients (confluent-kafka/librdkafka, kafka-python, aiokafka) against a real KafkaServer.

The broker runs in the test's trio loop; each client runs in a worker thread
(`trio.to_thread.run_sync`), the asyncio client in its own event loop there.
"""

from __future__ import annotations

import asyncio

import pytest
import trio

pytestmark = pytest.mark.interop

N = 200


def _confluent_produce(bootstrap: str, topic: str, conf: dict) -> list:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    reports: list = []

    def on_delivery(err, msg):
        reports.append((err, msg.partition(), msg.offset()))

    for i in range(N):
        producer.produce(topic, value=b"value-%d" % i, key=b"key-%d" % i, on_delivery=on_delivery)
    assert producer.flush(15) == 0
    return reports


def _confluent_consume(bootstrap: str, topic: str, partitions: int, count: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "check.crcs": True,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    try:
        for _ in range(100):
            for msg in consumer.consume(1000, 0.2):
                assert msg.error() is None, msg.error()
                values.append(msg.value())
            if len(values) >= count:
                break
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize(
    "conf",
    [
        {"acks": "0"},
        {"acks": "1"},
        {"acks": "all"},
        {"enable.idempotence": True},
        {"compression.type": "gzip"},
        {"compression.type": "snappy"},
        {"compression.type": "lz4"},
        {"compression.type": "zstd"},
    ],
    ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()),
)
async def test_confluent_produce_consume(broker, conf):
    await broker.create_topic("t", 2)
    reports = await trio.to_thread.run_sync(_confluent_produce, broker.bootstrap, "t", conf)
    assert len(reports) == N and all(err is None for err, _, _ in reports)
    if conf.get("acks") != "0":
        for p in (0, 1):
            offsets = sorted(o for _, part, o in reports if part == p)
            assert offsets == list(range(len(offsets)))
    values = await trio.to_thread.run_sync(_confluent_consume, broker.bootstrap, "t", 2, N)
    assert sorted(values) == sorted(b"value-%d" % i for i in range(N))


def _confluent_admin(bootstrap: str) -> dict:
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic("admin-topic", 3, 1, config={"retention.ms": "1000"})])
    futures["admin-topic"].result(10)
    metadata = admin.list_topics(timeout=10)
    partitions = len(metadata.topics["admin-topic"].partitions)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "admin-topic")
    configs = admin.describe_configs([resource])[resource].result(10)
    cluster = admin.describe_cluster().result(10) if hasattr(admin, "describe_cluster") else None
    admin.create_partitions(
        [__import__("confluent_kafka.admin", fromlist=["NewPartitions"]).NewPartitions(
            "admin-topic", 5)]
    )["admin-topic"].result(10)  # fmt: skip
    grown = len(admin.list_topics(timeout=10).topics["admin-topic"].partitions)
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    entry = ConfigEntry("retention.ms", "2000", incremental_operation=AlterConfigOpType.SET)
    altered = ConfigResource(ConfigResource.Type.TOPIC, "admin-topic", incremental_configs=[entry])
    admin.incremental_alter_configs([altered])[altered].result(10)
    after = admin.describe_configs([resource])[resource].result(10)["retention.ms"].value
    admin.delete_topics(["admin-topic"])["admin-topic"].result(10)
    remaining = admin.list_topics(timeout=10).topics
    return {
        "partitions": partitions,
        "retention": configs["retention.ms"].value,
        "segment_default": configs["segment.bytes"].is_default,
        "cluster_nodes": None if cluster is None else len(cluster.nodes),
        "grown": grown,
        "altered": after,
        "deleted": "admin-topic" not in remaining,
    }


async def test_confluent_admin(broker):
    result = await trio.to_thread.run_sync(_confluent_admin, broker.bootstrap)
    assert result["partitions"] == 3
    assert result["retention"] == "1000"
    assert result["segment_default"] is True
    assert result["cluster_nodes"] in (None, 1)
    assert result["grown"] == 5
    assert result["altered"] == "2000"
    assert result["deleted"]


def _kafka_python(bootstrap: str) -> tuple[list, list[bytes]]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    futures = [producer.send("kp", value=b"kp-%d" % i, partition=i % 2) for i in range(N)]
    producer.flush(15)
    metadata = [f.get(10) for f in futures]
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=3000, fetch_max_wait_ms=100)  # fmt: skip
    consumer.assign([TopicPartition("kp", 0), TopicPartition("kp", 1)])
    consumer.seek_to_beginning()
    values = []
    for message in consumer:
        values.append(message.value)
        if len(values) == N:
            break
    consumer.close()
    return [(m.partition, m.offset) for m in metadata], values


async def test_kafka_python(broker):
    await broker.create_topic("kp", 2)
    metadata, values = await trio.to_thread.run_sync(_kafka_python, broker.bootstrap)
    assert sorted(o for p, o in metadata if p == 0) == list(range(N // 2))
    assert sorted(values) == sorted(b"kp-%d" % i for i in range(N))


def _kafka_python_admin(bootstrap: str) -> list[str]:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("kpa", 2, 1)])
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kpa")])
    admin.delete_topics(["kpa"])
    topics = admin.list_topics()
    admin.close()
    assert configs
    return topics


async def test_kafka_python_admin(broker):
    topics = await trio.to_thread.run_sync(_kafka_python_admin, broker.bootstrap)
    assert "kpa" not in topics


def _aiokafka(bootstrap: str) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def main() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            for i in range(N):
                await producer.send("aio", b"aio-%d" % i, partition=i % 2)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                    auto_offset_reset="earliest", fetch_max_wait_ms=100)  # fmt: skip
        await consumer.start()
        values = []
        try:
            consumer.assign([TopicPartition("aio", 0), TopicPartition("aio", 1)])
            await consumer.seek_to_beginning()
            async with asyncio.timeout(10):
                while len(values) < N:
                    batches = await consumer.getmany(timeout_ms=200)
                    for messages in batches.values():
                        values.extend(m.value for m in messages)
        finally:
            await consumer.stop()
        return values

    return asyncio.run(main())


async def test_aiokafka(broker):
    await broker.create_topic("aio", 2)
    values = await trio.to_thread.run_sync(_aiokafka, broker.bootstrap)
    assert sorted(values) == sorted(b"aio-%d" % i for i in range(N))


def _confluent_replica_assignments(bootstrap: str) -> dict:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    out: dict = {}
    admin.create_topics([NewTopic("assigned", 2, replica_assignment=[[1], [1]])])[
        "assigned"
    ].result(15)
    grown = admin.create_partitions([NewPartitions("assigned", 3, replica_assignment=[[1]])])
    grown["assigned"].result(15)
    metadata = admin.list_topics("assigned", timeout=15).topics["assigned"]
    out["replicas"] = {p: m.replicas for p, m in metadata.partitions.items()}
    for name, assignment in (("unknown-broker", [[1, 7]]), ("uneven", [[1], [1, 2]])):
        try:
            admin.create_topics([NewTopic(name, len(assignment), replica_assignment=assignment)])[
                name
            ].result(15)
        except KafkaException as exc:
            out[name] = exc.args[0].name()
    return out


async def test_confluent_replica_assignments(broker):
    result = await trio.to_thread.run_sync(_confluent_replica_assignments, broker.bootstrap)
    assert result == {
        "replicas": {0: [1], 1: [1], 2: [1]},
        "unknown-broker": "INVALID_REPLICA_ASSIGNMENT",
        "uneven": "INVALID_REPLICA_ASSIGNMENT",
    }


def _kafka_python_describe_producers(bootstrap: str) -> tuple[list, str]:
    from kafka import KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient

    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    for i in range(5):
        producer.send("described", b"%d" % i, partition=0)
    producer.flush(15)
    producer.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    states = admin.describe_producers([TopicPartition("described", 0)])
    try:
        admin.describe_producers([TopicPartition("described", 9)], broker_id=1)
        missing = "answered"
    except Exception as exc:  # noqa: BLE001 - the error class is the answer
        missing = type(exc).__name__
    admin.close()
    [state] = states.values()
    return [
        (p.producer_epoch, p.last_sequence, p.current_transaction_start_offset)
        for p in state.active_producers
    ], missing


async def test_kafka_python_describe_producers(broker):
    await broker.create_topic("described", partitions=1)
    producers, missing = await trio.to_thread.run_sync(
        _kafka_python_describe_producers, broker.bootstrap
    )
    assert producers == [(0, 4, -1)]  # one idempotent producer, sequences 0..4, no transaction
    assert missing == "UnknownTopicOrPartitionError"
