"""KIP-848 consumer groups with a real client: confluent-kafka (librdkafka) consumers with
`group.protocol=consumer` against one shared 3-node cluster. Two consumers share a topic and
rebalance when one leaves and when the topic grows; committed offsets carry over to a new
consumer; the group's coordinator is killed (SIGKILL) and the running member keeps its member
id, its partitions and its commits at the new coordinator (which replayed the group's records).
The fail-over test kills a node, so it runs last."""

from __future__ import annotations

import time

import pytest
import trio
from cluster_harness import Cluster, wait_until

from log.coordinator.group_coordinator import OFFSETS_TOPIC, partition_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

# members heartbeat every 300 ms (Kafka's default is 5 s), so rebalances take a fraction of a
# second; the session timeout stays long enough for a busy machine
CLUSTER_PROPS = {
    "group.consumer.heartbeat.interval.ms": 300,
    "group.consumer.session.timeout.ms": 15000,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = Cluster(tmp_path_factory.mktemp("kip848"), 3, extra_props=CLUSTER_PROPS, shared=True)
    try:
        cluster.start_all()
        yield cluster
    finally:
        cluster.stop_all()


def _consumer(bootstrap: str, group: str, **extra):
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 500,
            **extra,
        }
    )


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3)])[
        topic
    ].result(timeout=30)


def _produce(bootstrap: str, topic: str, partitions: int, count: int, start: int = 0) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(start, start + count):
        producer.produce(topic, value=b"v%d" % i, partition=i % partitions)
    assert producer.flush(30) == 0


def _poll_until(consumers, done, timeout_s: float, got=None):
    """Poll every consumer in turn until `done()`; messages go to got[consumer index]."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, [c.assignment() for c in consumers]
        for index, consumer in enumerate(consumers):
            msg = consumer.poll(0.05)
            if msg is not None and msg.error() is None and got is not None:
                got[index].append((msg.partition(), msg.offset()))


def _partitions(consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def test_two_members_share_rebalance_on_leave_and_on_partition_increase(cluster):
    from confluent_kafka.admin import AdminClient, NewPartitions

    bootstrap = cluster.layout.bootstrap_servers
    topic, group = "kip848-share", "kip848-share-group"

    def run():
        _create_topic(bootstrap, topic, 4)
        _produce(bootstrap, topic, 4, 40)
        a, b = _consumer(bootstrap, group), _consumer(bootstrap, group)
        got: list[list] = [[], []]
        a.subscribe([topic])
        _poll_until([a], lambda: len(_partitions(a)) == 4, 60, got)
        b.subscribe([topic])

        # b joins: a revokes half before b gets them; never a partition in both at once
        def shared() -> bool:
            pa, pb = _partitions(a), _partitions(b)
            assert not pa & pb, (pa, pb)
            return len(pa) == 2 and len(pb) == 2

        _poll_until([a, b], shared, 60, got)
        # (a partition a read from before handing it over is read again by b: nothing was
        # committed yet, at-least-once)
        everything = {(i % 4, i // 4) for i in range(40)}
        _poll_until([a, b], lambda: set(got[0]) | set(got[1]) == everything, 60, got)
        a.commit(asynchronous=False)
        b.commit(asynchronous=False)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        listed = admin.list_consumer_groups().result(timeout=20)
        [ours] = [g for g in listed.valid if g.group_id == group]
        described = admin.describe_consumer_groups([group])[group].result(timeout=20)
        b.close()  # b leaves: a gets everything
        _poll_until([a], lambda: len(_partitions(a)) == 4, 60)
        admin.create_partitions([NewPartitions(topic, 6)])[topic].result(timeout=30)
        _poll_until([a], lambda: len(_partitions(a)) == 6, 60)  # the topic grew: a gets more
        a.close()
        return ours, described

    ours, described = run()
    assert str(ours.type).endswith("CONSUMER") and "STABLE" in str(ours.state).upper()
    assert len(described.members) == 2
    assert sorted(len(m.assignment.topic_partitions) for m in described.members) == [2, 2]


def test_committed_offsets_carry_over_to_a_new_member(cluster):
    bootstrap = cluster.layout.bootstrap_servers
    topic, group = "kip848-resume", "kip848-resume-group"
    _create_topic(bootstrap, topic, 2)
    _produce(bootstrap, topic, 2, 20)
    first = _consumer(bootstrap, group)
    first.subscribe([topic])
    got: list[list] = [[]]
    _poll_until([first], lambda: len(got[0]) >= 10, 60, got)
    first.commit(asynchronous=False)
    committed = {
        (tp.partition, tp.offset) for tp in first.committed(first.assignment(), timeout=20)
    }
    first.close()
    consumed = set(got[0])
    # the commit is the next offset of each partition consumed from (-1001: none)
    next_offsets = {p: 1 + max(o for q, o in consumed if q == p) for p, _ in consumed}
    assert dict(committed) == {p: next_offsets.get(p, -1001) for p in (0, 1)}
    second = _consumer(bootstrap, group)
    second.subscribe([topic])
    rest: list[list] = [[]]
    expected_rest = {(i % 2, i // 2) for i in range(20) if i // 2 >= next_offsets.get(i % 2, 0)}
    _poll_until([second], lambda: set(rest[0]) >= expected_rest, 60, rest)
    second.close()
    assert set(rest[0]) == expected_rest  # resumed where the first member committed


def test_a_static_member_comes_back_to_its_partitions_without_a_rebalance(cluster):
    """group.instance.id: the member leaves (epoch -2) and a new consumer with the same
    instance id gets exactly its partitions; the other member's assignment never changes."""
    from confluent_kafka.admin import AdminClient

    bootstrap = cluster.layout.bootstrap_servers
    topic, group = "kip848-static", "kip848-static-group"
    _create_topic(bootstrap, topic, 4)
    a = _consumer(bootstrap, group, **{"group.instance.id": "static-a"})
    b = _consumer(bootstrap, group)
    a.subscribe([topic])
    b.subscribe([topic])
    _poll_until([a, b], lambda: len(_partitions(a)) == 2 and len(_partitions(b)) == 2, 60)
    mine, theirs = _partitions(a), _partitions(b)
    a.close()  # waits for the answer to its leave heartbeat (epoch -2)
    # the static member stays in the group with its partitions (a plain leave would drop it)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(timeout=20)
    [static] = [m for m in described.members if m.group_instance_id == "static-a"]
    assert {tp.partition for tp in static.assignment.topic_partitions} == mine
    again = _consumer(bootstrap, group, **{"group.instance.id": "static-a"})
    again.subscribe([topic])

    def back() -> bool:
        assert _partitions(b) == theirs  # b keeps its partitions and gets none of a's
        return _partitions(again) == mine

    try:
        _poll_until([again, b], back, 60)
    finally:
        again.close()
        b.close()


async def test_coordinator_fail_over_keeps_the_member_and_its_commits(cluster):
    """SIGKILL the group's coordinator: the new one replayed the group's records, so the
    running member keeps its member id and partitions, and commits with its epoch there."""
    bootstrap = cluster.layout.bootstrap_servers
    topic, group = "kip848-failover", "kip848-failover-group"
    num_partitions = cluster.config(1).props["offsets.topic.num.partitions"]

    def stable_member():
        _create_topic(bootstrap, topic, 2)
        _produce(bootstrap, topic, 2, 10)
        consumer = _consumer(bootstrap, group)
        consumer.subscribe([topic])
        got: list[list] = [[]]
        _poll_until([consumer], lambda: len(got[0]) >= 10, 60, got)
        consumer.commit(asynchronous=False)
        # a second member joins and leaves: group epoch 3 (a group made anew would be at 1)
        other = _consumer(bootstrap, group)
        other.subscribe([topic])
        _poll_until([consumer, other], lambda: len(_partitions(other)) == 1, 60)
        other.close()
        _poll_until([consumer], lambda: len(_partitions(consumer)) == 2, 60)
        return consumer, consumer.memberid()

    consumer, member_id = await trio.to_thread.run_sync(stable_member)
    try:
        partition = partition_for(group, num_partitions)
        image = await cluster.image_from(1)
        coordinator = image.topic(OFFSETS_TOPIC).partitions[partition].leader  # type: ignore[union-attr]
        cluster.kill9(coordinator)
        survivor = next(n for n in (1, 2, 3) if n != coordinator)

        async def moved() -> bool:
            image = await cluster.image_from(survivor)
            leader = image.topic(OFFSETS_TOPIC).partitions[partition].leader  # type: ignore[union-attr]
            return leader not in (coordinator, -1)

        assert await wait_until(moved, 60)

        def consume_more_and_commit():
            _produce(bootstrap, topic, 2, 10, start=10)
            got: list[list] = [[]]
            _poll_until([consumer], lambda: len(got[0]) >= 10, 90, got)
            consumer.commit(asynchronous=False)
            committed = consumer.committed(consumer.assignment(), timeout=30)
            return got[0], sorted((tp.partition, tp.offset) for tp in committed)

        more, committed = await trio.to_thread.run_sync(consume_more_and_commit)
        assert sorted(more) == [(p, o) for p in (0, 1) for o in range(5, 10)]
        assert committed == [(0, 10), (1, 10)]
        assert consumer.memberid() == member_id
        assert _partitions(consumer) == {0, 1}
        # the new coordinator restored the group from its records, not made it anew
        new_coordinator = (await cluster.image_from(survivor)).topic(OFFSETS_TOPIC)
        leader = new_coordinator.partitions[partition].leader  # type: ignore[union-attr]
        loaded = cluster.log_matches(
            leader, rf"consumer group {group} loaded: group epoch (\d+), (\d+) members"
        )
        assert loaded and int(loaded[-1][1]) >= 3 and loaded[-1][2] == "1", loaded
    finally:
        await trio.to_thread.run_sync(consumer.close)
