"""KIP-848 consumer groups on the wire (our own codec, exact versions, one in-process broker):
ConsumerGroupHeartbeat join/leave with topic ids, ConsumerGroupDescribe, ListGroups v5 types,
OffsetCommit v8/v9 epoch checks, and the classic/consumer conflicts Kafka answers."""

from __future__ import annotations

import pytest

from log.common.errors import ErrorCode
from log.protocol.consumer_group import (
    CONSUMER_GROUP_DESCRIBE_REQUEST,
    CONSUMER_GROUP_HEARTBEAT_REQUEST,
)
from log.protocol.coordinator import FIND_COORDINATOR_REQUEST
from log.protocol.groups import (
    JOIN_GROUP_REQUEST,
    LIST_GROUPS_REQUEST,
    OFFSET_COMMIT_REQUEST,
    OFFSET_FETCH_REQUEST,
)
from tests.broker.conftest import WireClient, start_broker

HB = CONSUMER_GROUP_HEARTBEAT_REQUEST.cls
CD = CONSUMER_GROUP_DESCRIBE_REQUEST.cls
OC = OFFSET_COMMIT_REQUEST.cls


@pytest.fixture
async def gbroker(nursery, tmp_path):
    return await start_broker(
        nursery,
        tmp_path,
        **{"offsets.topic.num.partitions": 2, "group.initial.rebalance.delay.ms": 0},
    )


async def _coordinator_ready(client, group: str) -> None:
    for _ in range(100):  # the first FindCoordinator creates __consumer_offsets
        body = await client.call(10, 2, FIND_COORDINATOR_REQUEST.cls(key=group, key_type=0))
        if body.error_code == 0:
            return
    raise AssertionError("no coordinator")


def _commit(group: str, member: str, epoch: int, offset: int):
    return OC(group_id=group, generation_id_or_member_epoch=epoch, member_id=member,
              topics=[OC.OffsetCommitRequestTopic(name="t", partitions=[
                  OC.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                      partition_index=0, committed_offset=offset, committed_metadata="")])])  # fmt: skip


async def test_consumer_group_on_the_wire(gbroker):
    await gbroker.create_topic("t", partitions=3)
    topic_id = gbroker.quorum.image.topic("t").topic_id
    client = await WireClient.connect(gbroker.port)
    await _coordinator_ready(client, "cg")

    joined = await client.call(68, 1, HB(group_id="cg", member_id="m1", member_epoch=0,
                                         rebalance_timeout_ms=30_000,
                                         subscribed_topic_names=["t"], topic_partitions=[]))  # fmt: skip
    assert (joined.error_code, joined.member_id, joined.member_epoch) == (0, "m1", 1)
    assert joined.heartbeat_interval_ms == 5_000  # Kafka's group.consumer.heartbeat.interval.ms
    [tp] = joined.assignment.topic_partitions
    assert (tp.topic_id, tp.partitions) == (topic_id, [0, 1, 2])
    steady = await client.call(68, 1, HB(group_id="cg", member_id="m1", member_epoch=1))
    assert (steady.error_code, steady.member_epoch, steady.assignment) == (0, 1, None)
    fenced = await client.call(68, 1, HB(group_id="cg", member_id="m1", member_epoch=7))
    assert fenced.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    bad = await client.call(68, 1, HB(group_id="cg", member_id="m2", member_epoch=0,
                                      rebalance_timeout_ms=1, subscribed_topic_names=["t"],
                                      server_assignor="sticky"))  # fmt: skip
    assert bad.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR

    described = await client.call(69, 0, CD(group_ids=["cg", "nope"]))
    group, missing = described.groups
    assert (group.error_code, group.group_state, group.group_epoch, group.assignor_name) == (
        0, "Stable", 1, "uniform",
    )  # fmt: skip
    [member] = group.members
    assert (member.member_id, member.member_epoch, member.subscribed_topic_names) == (
        "m1",
        1,
        ["t"],
    )
    assert [(p.topic_name, p.partitions) for p in member.assignment.topic_partitions] == [
        ("t", [0, 1, 2])
    ]
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND

    L = LIST_GROUPS_REQUEST.cls
    listed = await client.call(16, 5, L(types_filter=["consumer"]))
    assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [
        ("cg", "consumer", "Stable")
    ]
    assert (await client.call(16, 5, L(types_filter=["classic"]))).groups == []

    # members of this protocol commit with v9 and their epoch (Kafka's validateOffsetCommit)
    codes = []
    for version, epoch in ((8, 1), (9, 0), (9, 1)):
        body = await client.call(8, version, _commit("cg", "m1", epoch, 42))
        codes.append(body.topics[0].partitions[0].error_code)
    assert codes == [ErrorCode.UNSUPPORTED_VERSION, ErrorCode.STALE_MEMBER_EPOCH, 0]
    F = OFFSET_FETCH_REQUEST.cls
    fetched = await client.call(9, 7, F(group_id="cg", topics=None))
    assert [(t.name, p.committed_offset) for t in fetched.topics for p in t.partitions] == [
        ("t", 42)
    ]
    # OffsetFetch v8 batches groups; v9 checks a member's id and epoch
    G = F.OffsetFetchRequestGroup
    wanted = [G.OffsetFetchRequestTopics(name="t", partition_indexes=[0])]
    answers = []
    for version, member, epoch in ((8, None, -1), (9, "m1", 1), (9, "m1", 0), (9, "zz", 1)):
        body = await client.call(9, version, F(groups=[
            G(group_id="cg", member_id=member, member_epoch=epoch, topics=wanted),
            G(group_id="other", topics=None)]))  # fmt: skip
        cg, other = body.groups
        offsets = [p.committed_offset for t in cg.topics for p in t.partitions]
        answers.append((cg.error_code, offsets, other.error_code, other.topics))
    assert answers == [
        (0, [42], 0, []),
        (0, [42], 0, []),
        (ErrorCode.STALE_MEMBER_EPOCH, [], 0, []),
        (ErrorCode.UNKNOWN_MEMBER_ID, [], 0, []),
    ]

    # a classic member may not join a consumer group with members
    J = JOIN_GROUP_REQUEST.cls
    join = J(group_id="cg", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
             member_id="", protocol_type="consumer",
             protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"m")])  # fmt: skip
    assert (await client.call(11, 3, join)).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL

    left = await client.call(68, 1, HB(group_id="cg", member_id="m1", member_epoch=-1))
    assert (left.error_code, left.member_epoch) == (0, -1)
    described = await client.call(69, 0, CD(group_ids=["cg"]))
    assert (described.groups[0].group_state, described.groups[0].group_epoch) == ("Empty", 2)
    # an empty consumer group turns classic when a classic member joins (as in Kafka)
    assert (await client.call(11, 3, join)).error_code == 0
    listed = await client.call(16, 5, L())
    assert [(g.group_id, g.group_type) for g in listed.groups] == [("cg", "classic")]
    assert (await client.call(69, 0, CD(group_ids=["cg"]))).groups[0].error_code == (
        ErrorCode.GROUP_ID_NOT_FOUND
    )
    await client.aclose()


async def test_a_classic_group_with_members_is_not_a_consumer_group(gbroker):
    await gbroker.create_topic("t", partitions=1)
    client = await WireClient.connect(gbroker.port)
    await _coordinator_ready(client, "classic")
    J = JOIN_GROUP_REQUEST.cls
    join = J(group_id="classic", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
             member_id="", protocol_type="consumer",
             protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"m")])  # fmt: skip
    assert (await client.call(11, 3, join)).error_code == 0
    refused = await client.call(68, 1, HB(group_id="classic", member_id="m1", member_epoch=0,
                                          rebalance_timeout_ms=1, subscribed_topic_names=["t"]))  # fmt: skip
    assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    described = await client.call(69, 0, CD(group_ids=["classic"]))
    assert described.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    await client.aclose()
