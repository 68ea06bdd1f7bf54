"""The group APIs on the wire (our own codec, exact versions): MEMBER_ID_REQUIRED for JoinGroup
v4+, fencing codes, DescribeGroups / ListGroups / DeleteGroups (NON_EMPTY_GROUP), reload after an unload."""

from __future__ import annotations

import dataclasses

import pytest

from log.coordinator.group_coordinator import partition_for
from log.protocol.coordinator import FIND_COORDINATOR_REQUEST
from log.protocol.errors import ErrorCode
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
