"""KIP-848 regex subscriptions with a real client: a confluent-kafka (librdkafka) consumer with
`group.protocol=consumer` subscribes to `^rx-.*` against an in-process broker. librdkafka sends
the pattern to the coordinator (ConsumerGroupHeartbeat v1 SubscribedTopicRegex) instead of
matching topics itself: it is assigned the matching topics only, a matching topic created later
joins its assignment (once the coordinator's refresh interval passed: Kafka's 10 s constant,
which the in-process broker here lowers to REGEX_REFRESH_MS rather than wait it out; the
interval itself is tested in tests/coordinator/test_consumer_group_regex.py) and is read, and a
pattern librdkafka accepts but RE2 refuses (a backreference) is a fatal
INVALID_REGULAR_EXPRESSION for the consumer."""

from __future__ import annotations

import dataclasses
import time

import pytest
import trio

from tests.broker.conftest import start_broker

pytestmark = pytest.mark.timeout(180)

PROPS = {"group.consumer.heartbeat.interval.ms": 300}
REGEX_REFRESH_MS = 500


def _consumer(bootstrap: str, group: str):
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )


def _produce(bootstrap: str, topics: dict[str, int]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for topic, partitions in topics.items():
        for partition in range(partitions):
            producer.produce(topic, value=f"{topic}/{partition}".encode(), partition=partition)
    assert producer.flush(30) == 0


def _read_until(consumer, wanted: set[str], timeout_s: float = 90) -> set[tuple[str, int]]:
    """Poll until every message in `wanted` was read: the assignment then."""
    got: set[str] = set()
    deadline = time.monotonic() + timeout_s
    while not wanted <= got:
        assert time.monotonic() < deadline, (sorted(got), consumer.assignment())
        msg = consumer.poll(0.1)
        if msg is not None:
            assert msg.error() is None, msg.error()
            got.add(msg.value().decode())
    return {(tp.topic, tp.partition) for tp in consumer.assignment()}


def _fatal_error(consumer, timeout_s: float = 60):
    from confluent_kafka import KafkaError

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        msg = consumer.poll(0.1)
        if msg is not None and msg.error() is not None and msg.error().code() == KafkaError._FATAL:
            return msg.error()
    raise AssertionError("no fatal error")


async def test_regex_subscription_follows_the_matching_topics(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **PROPS)
    groups = broker.server.ctx.group_coordinator.core  # its groups take this config when created
    groups.consumer_config = dataclasses.replace(
        groups.consumer_config, regex_refresh_interval_ms=REGEX_REFRESH_MS
    )
    for name, partitions in (("rx-a", 2), ("rx-b", 1), ("other", 1)):
        await broker.create_topic(name, partitions)
    await trio.to_thread.run_sync(_produce, broker.bootstrap, {"rx-a": 2, "rx-b": 1, "other": 1})
    consumer = _consumer(broker.bootstrap, "regex-group")
    try:
        consumer.subscribe(["^rx-.*"])
        first = {"rx-a/0", "rx-a/1", "rx-b/0"}
        assigned = await trio.to_thread.run_sync(_read_until, consumer, first)
        assert assigned == {("rx-a", 0), ("rx-a", 1), ("rx-b", 0)}

        await broker.create_topic("rx-c", 2)
        await trio.to_thread.run_sync(_produce, broker.bootstrap, {"rx-c": 2})
        assigned = await trio.to_thread.run_sync(_read_until, consumer, {"rx-c/0", "rx-c/1"})
        assert assigned == {("rx-a", 0), ("rx-a", 1), ("rx-b", 0), ("rx-c", 0), ("rx-c", 1)}
        group = broker.server.ctx.group_coordinator.core.consumer_groups["regex-group"]
        [member] = group.members.values()
        assert member.subscribed_topic_regex == "(^rx-.*)"  # librdkafka's form of ^rx-.*
    finally:
        await trio.to_thread.run_sync(consumer.close)


async def test_a_bad_regex_is_a_fatal_invalid_regular_expression(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **PROPS)
    consumer = _consumer(broker.bootstrap, "bad-regex-group")
    try:
        consumer.subscribe(["^(rx)\\1"])  # librdkafka's own regex engine takes it
        error = await trio.to_thread.run_sync(_fatal_error, consumer)
        # librdkafka's text of error 128, INVALID_REGULAR_EXPRESSION, from the heartbeat
        assert "Broker: The regular expression is not valid" in error.str(), error.str()
        assert "bad-regex-group" not in broker.server.ctx.group_coordinator.core.consumer_groups
    finally:
        await trio.to_thread.run_sync(consumer.close)
