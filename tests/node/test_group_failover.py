"""Consumer groups on 3 real nodes: kill -9 the group's coordinator; a member finds the new
coordinator (the new leader of the group's __consumer_offsets partition, which replayed it),
joins there, and the committed offsets are intact."""

from __future__ import annotations

import time

import pytest
import trio
from cluster_harness import Cluster, wait_until

from log.coordinator.group_coordinator import OFFSETS_TOPIC, partition_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

GROUP = "failover-group"
TOPIC = "fo"
RECORDS = 40


def _consumer(bootstrap: str):
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200,
            "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )


def _consume(consumer, count: int, timeout_s: float) -> list[tuple[int, int]]:
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.1)
        if msg is not None and msg.error() is None:
            got.append((msg.partition(), msg.offset()))
    return got


async def test_kill_coordinator_members_rejoin_offsets_intact(tmp_path):
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = Cluster(tmp_path, 3)
    cluster.start_all()
    bootstrap = cluster.layout.bootstrap_servers
    num_partitions = cluster.config(1).props["offsets.topic.num.partitions"]

    def setup_and_commit() -> list:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=3)])[
            TOPIC
        ].result(timeout=30)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(RECORDS):
            producer.produce(TOPIC, value=b"v%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        consumer = _consumer(bootstrap)
        consumer.subscribe([TOPIC])
        got = _consume(consumer, RECORDS // 2, 60)
        consumer.commit(asynchronous=False)
        consumer.close()
        return got

    first = await trio.to_thread.run_sync(setup_and_commit)
    assert len(first) == RECORDS // 2

    image = await cluster.image_from(1)
    topic = image.topic(OFFSETS_TOPIC)
    assert topic is not None
    coordinator = topic.partitions[partition_for(GROUP, num_partitions)].leader
    cluster.kill9(coordinator)

    def resume() -> tuple[list, list]:
        # a new member finds the new coordinator (which replayed the partition), joins there
        # and starts from the offsets committed before the kill
        consumer = _consumer(bootstrap)
        consumer.subscribe([TOPIC])
        rest = _consume(consumer, RECORDS - len(first), 90)
        consumer.commit(asynchronous=False)
        committed = consumer.committed(
            [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], timeout=30
        )
        consumer.close()
        return rest, [tp.offset for tp in committed]

    rest, committed = await trio.to_thread.run_sync(resume)
    # nothing consumed twice: the new coordinator had the committed offsets
    assert not set(first) & set(rest), sorted(set(first) & set(rest))
    assert sorted(first + rest) == sorted((i % 2, i // 2) for i in range(RECORDS))
    assert committed == [RECORDS // 2, RECORDS // 2]

    async def new_leader() -> bool:
        survivor = next(n for n in (1, 2, 3) if n != coordinator)
        image = await cluster.image_from(survivor)
        return image.topic(OFFSETS_TOPIC).partitions[  # type: ignore[union-attr]
            partition_for(GROUP, num_partitions)
        ].leader not in (coordinator, -1)

    assert await wait_until(new_leader, 10)


async def test_kill_coordinator_stable_member_is_restored_with_its_member_id(tmp_path):
    """The group record (members, assignments) written after SyncGroup lets the new coordinator
    restore the Stable group: the running member keeps its member id (no UNKNOWN_MEMBER_ID, so
    librdkafka never had to join anew) and DescribeGroups there shows it."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = Cluster(tmp_path, 3)
    cluster.start_all()
    bootstrap = cluster.layout.bootstrap_servers
    num_partitions = cluster.config(1).props["offsets.topic.num.partitions"]
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def stable_member():
        admin.create_topics([NewTopic("rs", num_partitions=2, replication_factor=3)])["rs"].result(
            timeout=30
        )
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(10):
            producer.produce("rs", value=b"v%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        consumer = _consumer(bootstrap)
        consumer.subscribe(["rs"])
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            consumer.poll(0.1)
        assert len(consumer.assignment()) == 2
        return consumer, consumer.memberid()

    def described(group_id: str):
        result = admin.describe_consumer_groups([group_id])[group_id].result(timeout=20)
        return str(result.state), [m.member_id for m in result.members]

    consumer, member_id = await trio.to_thread.run_sync(stable_member)
    try:
        image = await cluster.image_from(1)
        partition = partition_for(GROUP, num_partitions)
        coordinator = image.topic(OFFSETS_TOPIC).partitions[partition].leader  # type: ignore[union-attr]
        cluster.kill9(coordinator)
        survivor = next(n for n in (1, 2, 3) if n != coordinator)

        async def moved() -> bool:
            image = await cluster.image_from(survivor)
            leader = image.topic(OFFSETS_TOPIC).partitions[partition].leader  # type: ignore[union-attr]
            return leader not in (coordinator, -1)

        assert await wait_until(moved, 30)

        def keep_polling_then_describe():
            deadline = time.monotonic() + 8  # several heartbeats at the new coordinator
            while time.monotonic() < deadline:
                consumer.poll(0.1)
            return described(GROUP), consumer.memberid(), len(consumer.assignment())

        (state, members), member_after, assigned = await trio.to_thread.run_sync(
            keep_polling_then_describe
        )
        assert member_after == member_id
        assert members == [member_id] and "STABLE" in state.upper()
        assert assigned == 2
    finally:
        await trio.to_thread.run_sync(consumer.close)
