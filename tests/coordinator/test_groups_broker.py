"""Real clients' consumer groups against an in-process 1-node KafkaServer.

The broker runs in the test's trio loop; clients run in worker threads (as tests/broker does).
__consumer_offsets gets 4 partitions here (offsets.topic.num.partitions) to keep the node light.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import trio

from tests.broker.conftest import start_broker

pytestmark = pytest.mark.interop

PROPS = {"offsets.topic.num.partitions": 4, "group.initial.rebalance.delay.ms": 0}
TIMEOUT_S = 40


@pytest.fixture
async def gbroker(nursery, tmp_path):
    return await start_broker(nursery, tmp_path, **PROPS)


def _produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=i % partitions)
    assert producer.flush(15) == 0


def _consumer(bootstrap: str, group: str, **extra):
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 100,
            "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
            **extra,
        }
    )


def _assigned(consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def _confluent_takeover(
    bootstrap: str, topic: str, group: str = "takeover", **extra
) -> tuple[list, list]:
    consumers = [_consumer(bootstrap, group, **extra) for _ in range(3)]
    for c in consumers:
        c.subscribe([topic])
    deadline = time.monotonic() + TIMEOUT_S
    shares: list = []
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.05)
        shares = [_assigned(c) for c in consumers]
        if all(shares) and sorted(p for s in shares for p in s) == list(range(6)):
            break
    before = shares
    consumers.pop().close()  # LeaveGroup: the other two take over its partitions
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.05)
        shares = [_assigned(c) for c in consumers]
        if all(shares) and sorted(p for s in shares for p in s) == list(range(6)):
            break
    for c in consumers:
        c.close()
    return before, shares


async def test_confluent_group_shares_partitions_and_takes_over(gbroker):
    await gbroker.create_topic("shared", partitions=6)
    before, after = await trio.to_thread.run_sync(_confluent_takeover, gbroker.bootstrap, "shared")
    assert len(before) == 3 and all(before), before
    assert sorted(p for s in before for p in s) == list(range(6))
    assert len(after) == 2 and all(after), after
    assert sorted(p for s in after for p in s) == list(range(6))


async def test_confluent_cooperative_sticky_group_takes_over(gbroker):
    """KIP-429's incremental protocol runs on the classic group APIs: the clients revoke only
    what moves and rejoin again; the broker sees ordinary joins (protocol "cooperative-sticky")."""
    await gbroker.create_topic("coop", partitions=6)
    before, after = await trio.to_thread.run_sync(
        lambda: _confluent_takeover(
            gbroker.bootstrap,
            "coop",
            "coop-group",
            **{"partition.assignment.strategy": "cooperative-sticky"},
        )  # fmt: skip
    )
    assert len(before) == 3 and all(before), before
    assert sorted(p for s in before for p in s) == list(range(6))
    assert len(after) == 2 and all(after), after
    assert sorted(p for s in after for p in s) == list(range(6))
    # sticky: each survivor kept what it had and only took over the leaver's partitions
    assert all(old <= new for old, new in zip(before, after, strict=False)), (before, after)


def _static_members_share(bootstrap: str, topic: str) -> tuple[object, set, set]:
    consumers = [
        _consumer(bootstrap, "static", **{"group.instance.id": f"instance-{i}"}) for i in (1, 2)
    ]
    for c in consumers:
        c.subscribe([topic])
    deadline = time.monotonic() + TIMEOUT_S
    shares: list = [set(), set()]
    while time.monotonic() < deadline and not (all(shares) and len(shares[0] | shares[1]) == 4):
        for c in consumers:
            c.poll(0.05)
        shares = [_assigned(c) for c in consumers]
    consumers[1].close()  # a static member leaves no LeaveGroup behind: it may come back
    return consumers[0], shares[0], shares[1]


def _static_member_returns(bootstrap: str, topic: str, first) -> tuple[set, set]:
    second = _consumer(bootstrap, "static", **{"group.instance.id": "instance-2"})
    second.subscribe([topic])
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline and not _assigned(second):
        first.poll(0.05)
        second.poll(0.05)
    shares = _assigned(first), _assigned(second)
    second.close()
    first.close()
    return shares


async def test_confluent_static_member_restart_keeps_its_partitions_without_rebalance(gbroker):
    """KIP-345: a restarted consumer with the same group.instance.id replaces its old member
    id and gets its old assignment back; the group's generation does not move."""
    await gbroker.create_topic("static-topic", partitions=4)
    first, share1, share2 = await trio.to_thread.run_sync(
        _static_members_share, gbroker.bootstrap, "static-topic"
    )
    assert share1 and share2 and share1 | share2 == {0, 1, 2, 3}
    group = gbroker.server.group_coordinator.core.groups["static"]
    generation = group.generation_id
    assert group.state.value == "Stable" and len(group.members) == 2  # no leave, no rebalance
    after1, after2 = await trio.to_thread.run_sync(
        _static_member_returns, gbroker.bootstrap, "static-topic", first
    )
    assert (after1, after2) == (share1, share2)
    assert group.generation_id == generation


def _confluent_consume_commit(bootstrap: str, topic: str, count: int) -> list[int]:
    consumer = _consumer(bootstrap, "resume")
    consumer.subscribe([topic])
    offsets: list[int] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(offsets) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.1)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        offsets.append(msg.offset())
        if len(offsets) == count:
            consumer.commit(message=msg, asynchronous=False)
    consumer.close()
    return offsets


async def test_confluent_commit_then_new_consumer_resumes(gbroker):
    await gbroker.create_topic("resumed", partitions=1)
    await trio.to_thread.run_sync(_produce, gbroker.bootstrap, "resumed", 20, 1)
    first = await trio.to_thread.run_sync(
        _confluent_consume_commit, gbroker.bootstrap, "resumed", 8
    )
    assert first == list(range(8))
    second = await trio.to_thread.run_sync(
        _confluent_consume_commit, gbroker.bootstrap, "resumed", 4
    )
    assert second == [8, 9, 10, 11]
    groups = gbroker.server.group_coordinator.core
    assert groups.fetch_offsets("resume", [("resumed", 0)])[("resumed", 0)].offset == 12
    # ListGroups v4+ with a state filter (KIP-518), as confluent-kafka's admin client asks.
    listed = await trio.to_thread.run_sync(_confluent_groups_by_state, gbroker.bootstrap)
    assert ("resume", "EMPTY") in listed["empty"] and not listed["stable"]
    # OffsetDelete (47) from kafka-python's admin client (confluent-kafka's has none): the
    # group is Empty now, so its offsets go.
    deleted = await trio.to_thread.run_sync(
        _kafka_python_delete_offsets, gbroker.bootstrap, "resume", "resumed"
    )
    assert deleted == {("resumed", 0): "NoError"}
    assert groups.fetch_offsets("resume", [("resumed", 0)]) == {("resumed", 0): None}


def _confluent_groups_by_state(bootstrap: str) -> dict[str, set]:
    from confluent_kafka import ConsumerGroupState
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = {}
    for name, state in (("empty", ConsumerGroupState.EMPTY), ("stable", ConsumerGroupState.STABLE)):
        result = admin.list_consumer_groups(states={state}, request_timeout=15).result(15)
        assert not result.errors, result.errors
        listed[name] = {(g.group_id, g.state.name) for g in result.valid}
    return listed


def _kafka_python_delete_offsets(bootstrap: str, group: str, topic: str) -> dict:
    from kafka import KafkaAdminClient, TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        results = admin.delete_group_offsets(group, [TopicPartition(topic, 0)])
    finally:
        admin.close()
    return {(tp.topic, tp.partition): error.__name__ for tp, error in results.items()}


def _kafka_python_group(bootstrap: str, topic: str, count: int) -> list[int]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id="kp-group", auto_offset_reset="earliest",
        enable_auto_commit=False, consumer_timeout_ms=5000, fetch_max_wait_ms=100,
        heartbeat_interval_ms=200, session_timeout_ms=6000,
    )  # fmt: skip
    offsets = []
    for message in consumer:
        offsets.append(message.offset)
        if len(offsets) == count:
            break
    consumer.commit()
    consumer.close()
    return offsets


async def test_kafka_python_group_commits_and_resumes(gbroker):
    await gbroker.create_topic("kp-topic", partitions=1)
    await trio.to_thread.run_sync(_produce, gbroker.bootstrap, "kp-topic", 10, 1)
    first = await trio.to_thread.run_sync(_kafka_python_group, gbroker.bootstrap, "kp-topic", 6)
    assert first == list(range(6))
    second = await trio.to_thread.run_sync(_kafka_python_group, gbroker.bootstrap, "kp-topic", 4)
    assert second == [6, 7, 8, 9]


def _aiokafka_group(bootstrap: str, topic: str, count: int) -> list[int]:
    from aiokafka import AIOKafkaConsumer

    async def run() -> list[int]:
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id="aio-group",
            auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=100,
            heartbeat_interval_ms=200, session_timeout_ms=6000,
        )  # fmt: skip
        await consumer.start()
        offsets: list[int] = []
        try:
            async with asyncio.timeout(TIMEOUT_S):
                while len(offsets) < count:
                    batches = await consumer.getmany(timeout_ms=200)
                    for messages in batches.values():
                        offsets.extend(m.offset for m in messages)
                offsets = offsets[:count]
                tp = next(iter(consumer.assignment()))
                await consumer.commit({tp: offsets[-1] + 1})
        finally:
            await consumer.stop()
        return offsets

    return asyncio.run(run())


async def test_aiokafka_group_commits_and_resumes(gbroker):
    await gbroker.create_topic("aio-topic", partitions=1)
    await trio.to_thread.run_sync(_produce, gbroker.bootstrap, "aio-topic", 10, 1)
    first = await trio.to_thread.run_sync(_aiokafka_group, gbroker.bootstrap, "aio-topic", 10)
    assert first == list(range(10))
    await trio.to_thread.run_sync(_produce, gbroker.bootstrap, "aio-topic", 3, 1)
    second = await trio.to_thread.run_sync(_aiokafka_group, gbroker.bootstrap, "aio-topic", 3)
    assert second == [10, 11, 12]


async def test_offsets_and_groups_reload_from_consumer_offsets(gbroker):
    """Commits are records in __consumer_offsets: unloading the partition forgets them,
    becoming its leader again replays them (also tombstones from DeleteGroups)."""
    from log.coordinator.group_coordinator import OffsetAndMetadata, partition_for

    await gbroker.create_topic("durable", partitions=2)
    await trio.to_thread.run_sync(_produce, gbroker.bootstrap, "durable", 10, 2)
    await trio.to_thread.run_sync(_confluent_consume_commit, gbroker.bootstrap, "durable", 6)
    groups = gbroker.server.group_coordinator
    committed = groups.core.fetch_offsets("resume", None)
    assert committed and all(o.offset > 0 for o in committed.values())
    driver_offsets = {
        ("gone", "durable", 0): OffsetAndMetadata(3, -1, "meta", 1),
    }
    assert await groups.commit_offsets("gone", "", -1, {("durable", 0): driver_offsets[
        ("gone", "durable", 0)]}) == 0  # fmt: skip
    assert await groups.delete_group("gone") == 0
    partitions = {partition_for(g, 4) for g in ("resume", "gone")}
    for p in partitions:
        groups.core.unload(p)
    assert groups.core.fetch_offsets("resume", None) == {}
    groups.sync_ownership()  # still the leader: loads by replaying the log
    assert groups.core.fetch_offsets("resume", None) == committed
    assert groups.core.fetch_offsets("gone", None) == {}
    assert groups.core.groups["resume"].generation_id >= 1
