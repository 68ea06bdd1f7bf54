"""The group APIs on the wire (our own codec, exact versions): MEMBER_ID_REQUIRED for JoinGroup
v4+, fencing codes, DescribeGroups / ListGroups / DeleteGroups (NON_EMPTY_GROUP), reload after an unload."""

from __future__ import annotations

import dataclasses

import pytest

from log.common.errors import ErrorCode
from log.coordinator.group_coordinator import OffsetAndMetadata, partition_for
from log.protocol.coordinator import FIND_COORDINATOR_REQUEST
from log.protocol.groups import (
    DELETE_GROUPS_REQUEST,
    DESCRIBE_GROUPS_REQUEST,
    HEARTBEAT_REQUEST,
    JOIN_GROUP_REQUEST,
    LEAVE_GROUP_REQUEST,
    LIST_GROUPS_REQUEST,
    OFFSET_COMMIT_REQUEST,
    OFFSET_FETCH_REQUEST,
    SYNC_GROUP_REQUEST,
)
from tests.broker.conftest import WireClient, start_broker

PARTITIONS = 4


@pytest.fixture
async def gbroker(nursery, tmp_path):
    return await start_broker(
        nursery,
        tmp_path,
        **{"offsets.topic.num.partitions": PARTITIONS, "group.initial.rebalance.delay.ms": 0},
    )


async def find(client, key: str, key_type: int = 0):
    return await client.call(10, 2, FIND_COORDINATOR_REQUEST.cls(key=key, key_type=key_type))


async def test_group_lifecycle_on_the_wire(gbroker):
    await gbroker.create_topic("w", partitions=1)
    client = await WireClient.connect(gbroker.port)
    body = await find(client, "wg")
    for _ in range(50):  # the first FindCoordinator creates __consumer_offsets
        if body.error_code == 0:
            break
        assert body.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        body = await find(client, "wg")
    assert (body.error_code, body.node_id, body.port) == (0, 1, gbroker.port)
    offsets_configs = gbroker.quorum.image.topic_configs("__consumer_offsets")  # Kafka's
    assert offsets_configs["cleanup.policy"] == "compact"
    assert offsets_configs["segment.bytes"] == str(100 * 1024 * 1024)
    assert (await find(client, "wg", key_type=1)).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE

    J = JOIN_GROUP_REQUEST.cls
    join = J(group_id="wg", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
             protocol_type="consumer", protocols=[J.JoinGroupRequestProtocol(name="range",
                                                                              metadata=b"m")])  # fmt: skip
    first = await client.call(11, 5, join)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.member_id
    join = dataclasses.replace(join, member_id=first.member_id)
    joined = await client.call(11, 5, join)
    assert (joined.error_code, joined.generation_id, joined.leader) == (0, 1, first.member_id)
    assert [m.metadata for m in joined.members] == [b"m"]
    member = joined.member_id

    S = SYNC_GROUP_REQUEST.cls
    synced = await client.call(14, 3, S(group_id="wg", generation_id=1, member_id=member,
        assignments=[S.SyncGroupRequestAssignment(member_id=member, assignment=b"A")]))  # fmt: skip
    assert (synced.error_code, synced.assignment) == (0, b"A")
    H = HEARTBEAT_REQUEST.cls
    assert (
        await client.call(12, 3, H(group_id="wg", generation_id=1, member_id=member))
    ).error_code == 0
    stale = await client.call(12, 3, H(group_id="wg", generation_id=0, member_id=member))
    assert stale.error_code == ErrorCode.ILLEGAL_GENERATION
    unknown = await client.call(12, 3, H(group_id="wg", generation_id=1, member_id="x"))
    assert unknown.error_code == ErrorCode.UNKNOWN_MEMBER_ID

    C = OFFSET_COMMIT_REQUEST.cls
    commit = C(group_id="wg", generation_id_or_member_epoch=1, member_id=member, topics=[
        C.OffsetCommitRequestTopic(name="w", partitions=[C.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=5, committed_metadata="meta")]),
        C.OffsetCommitRequestTopic(name="nope", partitions=[C.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=1, committed_metadata=None)]),
    ])  # fmt: skip
    committed = await client.call(8, 7, commit)
    assert [[p.error_code for p in t.partitions] for t in committed.topics] == [
        [0],
        [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION],
    ]
    fetched = await client.call(9, 5, OFFSET_FETCH_REQUEST.cls(group_id="wg", topics=None))
    [topic] = fetched.topics
    assert (topic.name, topic.partitions[0].committed_offset, topic.partitions[0].metadata) == (
        "w",
        5,
        "meta",
    )

    described = await client.call(15, 4, DESCRIBE_GROUPS_REQUEST.cls(groups=["wg"]))
    [g] = described.groups
    assert (g.group_state, g.protocol_data, [m.member_id for m in g.members]) == (
        "Stable",
        "range",
        [member],
    )
    listed = await client.call(16, 2, LIST_GROUPS_REQUEST.cls())
    assert [(x.group_id, x.protocol_type) for x in listed.groups] == [("wg", "consumer")]
    D = DELETE_GROUPS_REQUEST.cls
    refused = await client.call(42, 1, D(groups_names=["wg"]))
    assert refused.results[0].error_code == ErrorCode.NON_EMPTY_GROUP

    L = LEAVE_GROUP_REQUEST.cls
    left = await client.call(13, 3, L(group_id="wg", members=[L.MemberIdentity(member_id=member)]))
    assert left.error_code == 0 and left.members[0].error_code == 0
    deleted = await client.call(42, 1, D(groups_names=["wg"]))
    assert deleted.results[0].error_code == 0
    fetched = await client.call(9, 5, OFFSET_FETCH_REQUEST.cls(group_id="wg", topics=None))
    assert fetched.topics == []

    # unloaded, then reloaded on the next request (we still lead the partition): the replayed
    # tombstones keep the deleted group and its offsets gone
    driver = gbroker.server.group_coordinator
    driver.core.unload(partition_for("wg", PARTITIONS))
    assert (
        await client.call(12, 3, H(group_id="wg", generation_id=1, member_id=member))
    ).error_code == (ErrorCode.UNKNOWN_MEMBER_ID)
    assert driver.core.fetch_offsets("wg", None) == {}
    await client.aclose()


async def _coordinator_ready(client, group: str) -> None:
    for _ in range(50):  # the first FindCoordinator creates __consumer_offsets
        if (await find(client, group)).error_code == 0:
            return
    raise AssertionError("no coordinator")


async def test_retention_time_and_expiry_write_tombstones(gbroker):
    """OffsetCommit v2's retention_time_ms and offsets.retention.ms decide expiry; expired
    offsets leave tombstones that a reload replays. (v1's commit_timestamp is honoured by the
    handler too, but we serve OffsetCommit 2-7.)"""
    await gbroker.create_topic("x", partitions=2)
    client = await WireClient.connect(gbroker.port)
    await _coordinator_ready(client, "solo")
    driver = gbroker.server.group_coordinator
    C = OFFSET_COMMIT_REQUEST.cls

    def commit(partition: int, **fields):
        return C(group_id="solo", generation_id_or_member_epoch=-1, member_id="", topics=[
            C.OffsetCommitRequestTopic(name="x", partitions=[C.OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=3, committed_metadata=None,
                **fields)])])  # fmt: skip

    eight_days_ago_ms = driver.clock_ms() - 8 * 86_400_000
    old = OffsetAndMetadata(3, -1, "", eight_days_ago_ms)
    assert await driver.commit_offsets("solo", "", -1, {("x", 0): old}) == 0
    v2 = await client.call(8, 2, dataclasses.replace(commit(1), retention_time_ms=60_000))
    assert v2.topics[0].partitions[0].error_code == 0
    stored = driver.core.fetch_offsets("solo", None)
    assert stored[("x", 0)].commit_timestamp_ms == eight_days_ago_ms
    assert stored[("x", 0)].expire_timestamp_ms == -1
    assert stored[("x", 1)].expire_timestamp_ms - stored[("x", 1)].commit_timestamp_ms == 60_000

    [cleanup] = await driver.expire_offsets()  # 7 days of retention: partition 0 is expired
    assert (cleanup.expired, cleanup.group_removed) == ((("x", 0),), False)
    driver.core.unload(partition_for("solo", PARTITIONS))
    driver.sync_ownership()  # replays the log: the tombstone, and v1's expire timestamp
    assert list(driver.core.fetch_offsets("solo", None)) == [("x", 1)]
    assert driver.core.fetch_offsets("solo", None)[("x", 1)] == stored[("x", 1)]
    await client.aclose()


def _records_of(driver, group: str) -> list:
    """(key, value) of every __consumer_offsets record of `group`, decoded, in log order."""
    from log.coordinator.group_coordinator import OFFSETS_TOPIC
    from log.coordinator.records import decode_group_value, decode_key, decode_offset_value
    from log.records.batch_header import iter_batches
    from log.records.reader import iter_records

    partition = partition_for(group, PARTITIONS)
    [hosted] = [
        h for h in driver.replica_manager.leaders()
        if (h.topic, h.partition) == (OFFSETS_TOPIC, partition)
    ]  # fmt: skip
    buf = bytes(hosted.log.read(hosted.log.log_start_offset, 1 << 20).records)
    out = []
    for position, _header in iter_batches(buf):
        for record in iter_records(buf, position):
            key = decode_key(record.key)
            if getattr(key, "group", None) != group:
                continue
            value = record.value
            if value is not None:
                decode = decode_group_value if type(key).__name__ == "GroupMetadataKey" else None
                value = (decode or decode_offset_value)(value)
            out.append((key, value))
    return out


async def test_members_survive_a_reload_and_delete_writes_tombstones(gbroker):
    """The group record written after SyncGroup restores the member on reload: it heartbeats
    and commits with its generation, DescribeGroups shows it. DeleteGroups then writes the
    group tombstone and one per offset."""
    from log.coordinator.records import GroupMetadataKey, OffsetCommitKey

    await gbroker.create_topic("r", partitions=1)
    client = await WireClient.connect(gbroker.port)
    await _coordinator_ready(client, "rg")
    J = JOIN_GROUP_REQUEST.cls
    joined = await client.call(11, 3, J(group_id="rg", session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000, member_id="", protocol_type="consumer",
        protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"m")]))  # fmt: skip
    member = joined.member_id
    S = SYNC_GROUP_REQUEST.cls
    synced = await client.call(14, 3, S(group_id="rg", generation_id=1, member_id=member,
        assignments=[S.SyncGroupRequestAssignment(member_id=member, assignment=b"A")]))  # fmt: skip
    assert synced.error_code == 0
    driver = gbroker.server.group_coordinator
    [(key, value)] = _records_of(driver, "rg")
    assert key == GroupMetadataKey("rg") and value.generation == 1
    assert [(m.member_id, m.subscription, m.assignment) for m in value.members] == [
        (member, b"m", b"A")
    ]

    driver.core.unload(partition_for("rg", PARTITIONS))  # the coordinator moves away and back
    H = HEARTBEAT_REQUEST.cls
    beat = await client.call(12, 3, H(group_id="rg", generation_id=1, member_id=member))
    assert beat.error_code == 0  # the reload restored the member with its generation
    described = await client.call(15, 4, DESCRIBE_GROUPS_REQUEST.cls(groups=["rg"]))
    [g] = described.groups
    assert (g.group_state, [(m.member_id, m.member_assignment) for m in g.members]) == (
        "Stable", [(member, b"A")],
    )  # fmt: skip
    C = OFFSET_COMMIT_REQUEST.cls
    commit = C(group_id="rg", generation_id_or_member_epoch=1, member_id=member, topics=[
        C.OffsetCommitRequestTopic(name="r", partitions=[C.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=9, committed_metadata=None)])])  # fmt: skip
    assert (await client.call(8, 5, commit)).topics[0].partitions[0].error_code == 0

    L = LEAVE_GROUP_REQUEST.cls
    await client.call(13, 3, L(group_id="rg", members=[L.MemberIdentity(member_id=member)]))
    D = DELETE_GROUPS_REQUEST.cls
    assert (await client.call(42, 1, D(groups_names=["rg"]))).results[0].error_code == 0
    assert (await client.call(42, 1, D(groups_names=["rg"]))).results[
        0
    ].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    records = _records_of(driver, "rg")
    empty = records[-3]  # the leave made it Empty: written without members, generation 2
    assert empty[0] == GroupMetadataKey("rg") and (empty[1].generation, empty[1].members) == (2, ())
    assert records[-2:] == [(GroupMetadataKey("rg"), None), (OffsetCommitKey("rg", "r", 0), None)]
    await client.aclose()


async def test_sync_group_fails_when_the_group_record_cannot_be_stored(nursery, tmp_path):
    """As Kafka: no member hears an assignment the log does not hold (min.insync.replicas 2
    on one node: the append is refused) -- SyncGroup answers COORDINATOR_NOT_AVAILABLE."""
    broker = await start_broker(
        nursery, tmp_path, **{"offsets.topic.num.partitions": 1,
                              "group.initial.rebalance.delay.ms": 0, "min.insync.replicas": 2},
    )  # fmt: skip
    client = await WireClient.connect(broker.port)
    await _coordinator_ready(client, "sg")
    J = JOIN_GROUP_REQUEST.cls
    joined = await client.call(11, 3, J(group_id="sg", session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000, member_id="", protocol_type="consumer",
        protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"m")]))  # fmt: skip
    S = SYNC_GROUP_REQUEST.cls
    synced = await client.call(14, 3, S(group_id="sg", generation_id=1, member_id=joined.member_id,
        assignments=[S.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"A")]))  # fmt: skip
    assert synced.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    await client.aclose()
