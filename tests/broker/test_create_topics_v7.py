"""CreateTopics v5-v7 (KIP-525, KIP-516), which Kafka 3.x/4.x clients pinned to their broker
version send (kafka-python's own integration tests create every topic with v7): the answer
carries the new topic's partition count, replication factor, configs with their sources, and
(v7) its topic id; an error leaves them at -1 / none. An in-process broker, over the wire and
through kafka-python's admin client pinned to Kafka 3.7's versions."""

from __future__ import annotations

import pytest
import trio

from log.protocol.admin import CREATE_TOPICS_REQUEST
from tests.broker.conftest import WireClient, start_broker

pytestmark = pytest.mark.timeout(60)

R = CREATE_TOPICS_REQUEST.cls
DYNAMIC_TOPIC, DEFAULT = 1, 5


def _topic(name: str, partitions: int, **configs: str):
    return R.CreatableTopic(name=name, num_partitions=partitions, replication_factor=-1,
                            assignments=[], configs=[R.CreatableTopic.CreatableTopicConfig(
                                name=k, value=v) for k, v in configs.items()])  # fmt: skip


async def test_v7_answers_the_created_topic(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path)
    client = await WireClient.connect(broker.port)
    try:
        body = R(topics=[_topic("t7", 3, **{"retention.ms": "60000"})], timeout_ms=10_000)
        (created,) = (await client.call(19, 7, body)).topics
        assert (created.error_code, created.num_partitions, created.replication_factor) == (
            0, 3, 1)  # fmt: skip
        assert created.topic_id == broker.quorum.image.topic("t7").topic_id
        configs = {c.name: c for c in created.configs}
        retention, segment = configs["retention.ms"], configs["segment.bytes"]
        assert (retention.value, retention.config_source, retention.read_only) == (
            "60000", DYNAMIC_TOPIC, False)  # fmt: skip
        # As Kafka's controller and DescribeConfigs: no topic config is read-only.
        assert (segment.config_source, segment.read_only) == (DEFAULT, False)

        (again,) = (await client.call(19, 7, body)).topics
        assert again.error_code == 36  # TOPIC_ALREADY_EXISTS
        assert (again.num_partitions, again.replication_factor, again.configs) == (-1, -1, [])
        (old,) = (await client.call(19, 4, R(topics=[_topic("t4", 1)], timeout_ms=10_000))).topics
        assert old.error_code == 0
    finally:
        await client.aclose()


def _kafka_python_create(bootstrap: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, api_version=(3, 7))
    try:
        admin.create_topics([NewTopic("kp", 2, 1)])  # raises on an error answer
    finally:
        admin.close()


async def test_kafka_python_pinned_to_kafka_3_7_creates_a_topic(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path)
    await trio.to_thread.run_sync(_kafka_python_create, broker.bootstrap)
    assert broker.quorum.image.topic("kp") is not None
    assert len(broker.quorum.image.topic("kp").partitions) == 2
