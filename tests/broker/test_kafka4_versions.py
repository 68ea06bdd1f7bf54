"""The request versions Kafka 4.x clients send (issue 19), each on the wire at its top version
against a real in-process broker, its new fields exercised.

ListOffsets v10 (v7 max timestamp, v8 earliest local, v9 latest tiered, v10 timeout_ms),
OffsetForLeaderEpoch v4 (flexible), JoinGroup v9 / SyncGroup v5 / Heartbeat v4 / LeaveGroup v5
(protocol type and name, reasons, KIP-814's skip_assignment for a static leader's rejoin),
Metadata v13 (top-level error_code), DescribeConfigs v4 (config types, documentation),
DeleteTopics v6 (topics by id, error messages), CreatePartitions v3, and the versions that are
only flexible: DescribeGroups v5, DeleteGroups v2, AlterConfigs v2; FindCoordinator v6.
"""

from __future__ import annotations

import uuid

from log.common.errors import ErrorCode
from log.protocol.admin import (
    ALTER_CONFIGS_REQUEST,
    CREATE_PARTITIONS_REQUEST,
    DELETE_TOPICS_REQUEST,
    DESCRIBE_CONFIGS_REQUEST,
)
from log.protocol.apis import APIS
from log.protocol.coordinator import FIND_COORDINATOR_REQUEST
from log.protocol.groups import (
    DELETE_GROUPS_REQUEST,
    DESCRIBE_GROUPS_REQUEST,
    HEARTBEAT_REQUEST,
    JOIN_GROUP_REQUEST,
    LEAVE_GROUP_REQUEST,
    SYNC_GROUP_REQUEST,
)
from log.protocol.metadata import METADATA_REQUEST
from log.protocol.offsets import LIST_OFFSETS_REQUEST, OFFSET_FOR_LEADER_EPOCH_REQUEST
from log.records.builder import Record, build_batch
from tests.broker.conftest import WireClient, produce_body, start_broker

TOPIC = "versions"


def _advertised(api_key: int) -> tuple[int, int]:
    return APIS[api_key].advertised_versions()


async def test_list_offsets_v10_special_timestamps(broker):
    """v10 with every special timestamp: -1 latest, -2 earliest, -3 max timestamp, -4 earliest
    local (= earliest: nothing is tiered), -5 latest tiered (offset -1, epoch -1, as Kafka answers
    without remote storage); the same -4 at v7 is UNSUPPORTED_VERSION for its partition."""
    assert _advertised(2) == (1, 11)  # v11: test_kafka41_versions.py
    L = LIST_OFFSETS_REQUEST.cls
    await broker.create_topic(TOPIC)
    client = await WireClient.connect(broker.port)
    batch = build_batch([Record(b"a", timestamp_ms=300), Record(b"b", timestamp_ms=900),
                         Record(b"c", timestamp_ms=500)])  # fmt: skip
    produced = await client.call(0, 9, produce_body(TOPIC, 0, batch))
    assert produced.responses[0].partition_responses[0].error_code == 0

    async def ask(version: int, *timestamps: int) -> list:
        partitions = [L.ListOffsetsPartition(partition_index=0, timestamp=t) for t in timestamps]
        body = L(replica_id=-1, isolation_level=0, timeout_ms=1000,
                 topics=[L.ListOffsetsTopic(name=TOPIC, partitions=partitions)])  # fmt: skip
        response = await client.call(2, version, body)
        return [(p.error_code, p.offset, p.timestamp, p.leader_epoch)
                for p in response.topics[0].partitions]  # fmt: skip

    latest, earliest, max_ts, earliest_local, latest_tiered = await ask(10, -1, -2, -3, -4, -5)
    assert latest[:3] == (0, 3, -1) and latest[3] >= 0
    assert earliest[:3] == (0, 0, -1)
    assert max_ts[:3] == (0, 1, 900)
    assert earliest_local == earliest
    assert latest_tiered == (0, -1, -1, -1)
    assert await ask(7, -4, -3) == [(ErrorCode.UNSUPPORTED_VERSION, -1, -1, -1), max_ts]
    assert (await ask(8, -5, -4))[0][0] == ErrorCode.UNSUPPORTED_VERSION
    assert (await ask(10, -6))[0][0] == ErrorCode.UNSUPPORTED_VERSION
    await client.aclose()


async def test_offset_for_leader_epoch_v4(broker):
    """v4 (flexible): a client asks for the end offset of the current epoch."""
    assert _advertised(23) == (2, 4)
    E = OFFSET_FOR_LEADER_EPOCH_REQUEST.cls
    await broker.create_topic(TOPIC)
    client = await WireClient.connect(broker.port)
    produced = await client.call(0, 9, produce_body(TOPIC, 0, build_batch([Record(b"x")])))
    assert produced.responses[0].partition_responses[0].error_code == 0
    body = E(replica_id=-1, topics=[E.OffsetForLeaderTopic(topic=TOPIC, partitions=[
        E.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)])])  # fmt: skip
    response = await client.call(23, 4, body)
    answer = response.topics[0].partitions[0]
    assert (answer.error_code, answer.end_offset) == (0, 1)
    await client.aclose()


async def test_group_apis_at_kafka4_versions(nursery, tmp_path):
    """FindCoordinator v6 (a share group's key: INVALID_REQUEST, there is no share coordinator).
    A static member joins at v9 (with a reason), syncs at v5 (a wrong or missing protocol
    type/name is INCONSISTENT_GROUP_PROTOCOL), heartbeats at v4; its restart at v9 hears it leads
    with skip_assignment and the members (KIP-814), a restart at v8 hears the old leader id and
    no members; neither rebalances. It leaves at v5 with a reason."""
    tops = [_advertised(k)[1] for k in (10, 11, 14, 12, 13)]
    assert tops == [6, 9, 5, 4, 5]  # FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup
    broker = await start_broker(nursery, tmp_path, **{"offsets.topic.num.partitions": 1,
                                                      "group.initial.rebalance.delay.ms": 0})  # fmt: skip
    client = await WireClient.connect(broker.port)
    found = FIND_COORDINATOR_REQUEST.cls(key_type=0, coordinator_keys=["g4"])
    # The first creates __consumer_offsets: COORDINATOR_NOT_AVAILABLE until then.
    for _ in range(100):
        if (await client.call(10, 6, found)).coordinators[0].error_code == 0:
            break
    else:
        raise AssertionError("no group coordinator")
    share = FIND_COORDINATOR_REQUEST.cls(key_type=2, coordinator_keys=["g4"])  # v6: share groups
    [refused] = (await client.call(10, 6, share)).coordinators
    assert (refused.key, refused.error_code) == ("g4", ErrorCode.INVALID_REQUEST)  # none here
    J, S, H, L = (api.cls for api in (JOIN_GROUP_REQUEST, SYNC_GROUP_REQUEST, HEARTBEAT_REQUEST,
                                      LEAVE_GROUP_REQUEST))  # fmt: skip

    async def join(version: int, reason: str | None = None):
        return await client.call(11, version, J(
            group_id="g4", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
            group_instance_id="i1", protocol_type="consumer", reason=reason,
            protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"m")]))  # fmt: skip

    joined = await join(9, reason="starting")
    first = joined.member_id
    assert (joined.error_code, joined.generation_id, joined.leader) == (0, 1, first)
    assert (joined.protocol_type, joined.protocol_name, joined.skip_assignment) == (
        "consumer", "range", False)  # fmt: skip
    assert [m.metadata for m in joined.members] == [b"m"]

    async def sync(member: str, protocol_type: str | None, protocol_name: str | None):
        return await client.call(14, 5, S(
            group_id="g4", generation_id=1, member_id=member, group_instance_id="i1",
            protocol_type=protocol_type, protocol_name=protocol_name,
            assignments=[S.SyncGroupRequestAssignment(member_id=member, assignment=b"A")]))  # fmt: skip

    inconsistent = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert (await sync(first, "consumer", "roundrobin")).error_code == inconsistent
    assert (await sync(first, "connect", "range")).error_code == inconsistent
    assert (await sync(first, None, "range")).error_code == inconsistent
    synced = await sync(first, "consumer", "range")
    assert (synced.error_code, synced.assignment) == (0, b"A")
    assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")

    async def heartbeat(member: str) -> int:
        body = H(group_id="g4", generation_id=1, member_id=member, group_instance_id="i1")
        return (await client.call(12, 4, body)).error_code

    assert await heartbeat(first) == 0

    restarted = await join(9)  # KIP-814: the static leader is told it leads, assigns nothing
    second = restarted.member_id
    assert second != first and restarted.error_code == 0
    assert restarted.skip_assignment and (restarted.generation_id, restarted.leader) == (1, second)
    assert [(m.member_id, m.group_instance_id, m.metadata) for m in restarted.members] == [
        (second, "i1", b"m")]  # fmt: skip
    assert await heartbeat(first) == ErrorCode.FENCED_INSTANCE_ID

    older = await join(8, reason="restarted")  # before v9: the old leader id, no members
    third = older.member_id
    assert (older.error_code, older.generation_id, older.leader) == (0, 1, second)
    assert (older.members, older.skip_assignment) == ([], False)
    assert await heartbeat(third) == 0  # still generation 1: nothing rebalanced

    left = await client.call(13, 5, L(group_id="g4", members=[
        L.MemberIdentity(member_id=third, group_instance_id="i1", reason="shutting down")]))  # fmt: skip
    assert (left.error_code, [m.error_code for m in left.members]) == (0, [0])
    assert await heartbeat(third) == ErrorCode.UNKNOWN_MEMBER_ID
    assert [_advertised(k) for k in (15, 42)] == [(0, 6), (0, 2)]  # v6: test_kafka41_versions.py
    described = await client.call(15, 5, DESCRIBE_GROUPS_REQUEST.cls(groups=["g4"]))
    assert [(g.error_code, g.group_state, g.protocol_type) for g in described.groups] == [
        (0, "Empty", "consumer")]  # fmt: skip
    deleted = await client.call(42, 2, DELETE_GROUPS_REQUEST.cls(groups_names=["g4", "nope"]))
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        ("g4", 0), ("nope", ErrorCode.GROUP_ID_NOT_FOUND)]  # fmt: skip
    await client.aclose()


async def test_metadata_v13(broker):
    """v13 answers a top-level error_code (0: this broker never asks clients to rebootstrap);
    topics asked by name and by an unknown id keep their own codes."""
    assert _advertised(3) == (1, 13)
    M = METADATA_REQUEST.cls
    await broker.create_topic(TOPIC, partitions=2)
    client = await WireClient.connect(broker.port)
    unknown_id = uuid.uuid4()
    body = await client.call(3, 13, M(allow_auto_topic_creation=False, topics=[
        M.MetadataRequestTopic(name=TOPIC), M.MetadataRequestTopic(topic_id=unknown_id, name=None)]))  # fmt: skip
    assert body.error_code == 0
    known, unknown = body.topics
    assert (known.error_code, known.name, len(known.partitions)) == (0, TOPIC, 2)
    assert (unknown.error_code, unknown.name) == (ErrorCode.UNKNOWN_TOPIC_ID, None)
    assert [b.port for b in body.brokers] == [broker.port]
    await client.aclose()


async def test_describe_configs_v4_types_and_documentation(broker):
    """v4 (v3's fields, flexible): every config has Kafka's type; the documentation only when
    asked. A topic's retention.ms is LONG, cleanup.policy LIST; the broker's num.partitions INT,
    log.retention.ms LONG, auto.create.topics.enable BOOLEAN."""
    assert _advertised(32) == (1, 4)
    D = DESCRIBE_CONFIGS_REQUEST.cls
    await broker.create_topic(TOPIC, **{"retention.ms": "60000"})
    client = await WireClient.connect(broker.port)

    async def describe(resource_type: int, name: str, documentation: bool) -> dict:
        body = await client.call(32, 4, D(include_synonyms=True,
            include_documentation=documentation, resources=[D.DescribeConfigsResource(
                resource_type=resource_type, resource_name=name, configuration_keys=None)]))  # fmt: skip
        [result] = body.results
        assert result.error_code == 0
        return {c.name: c for c in result.configs}

    topic = await describe(2, TOPIC, documentation=True)
    retention, policy = topic["retention.ms"], topic["cleanup.policy"]
    assert (retention.value, retention.config_source, retention.config_type) == ("60000", 1, 5)
    assert policy.config_type == 7 and "compact" in policy.documentation
    assert all(c.config_type and c.documentation for c in topic.values())
    assert all(c.documentation is None for c in (await describe(2, TOPIC, False)).values())
    node = await describe(4, str(broker.server.ctx.node_id), documentation=True)
    types = {key: node[key].config_type for key in
             ("num.partitions", "log.retention.ms", "auto.create.topics.enable")}  # fmt: skip
    assert types == {"num.partitions": 3, "log.retention.ms": 5, "auto.create.topics.enable": 1}
    assert node["num.partitions"].documentation

    assert _advertised(33) == (0, 2)  # AlterConfigs v2: flexible
    A = ALTER_CONFIGS_REQUEST.cls
    altered = await client.call(33, 2, A(validate_only=False, resources=[A.AlterConfigsResource(
        resource_type=2, resource_name=TOPIC, configs=[
            A.AlterableConfig(name="retention.ms", value="120000")])]))  # fmt: skip
    assert [r.error_code for r in altered.responses] == [0]
    assert (await describe(2, TOPIC, documentation=False))["retention.ms"].value == "120000"
    await client.aclose()


async def test_delete_topics_v6_by_id_and_create_partitions_v3(broker):
    """DeleteTopics v6: a topic by name and one by id are deleted (each answered with its name
    and id); an unknown id is UNKNOWN_TOPIC_ID, name and id together or neither INVALID_REQUEST
    with Kafka's messages. CreatePartitions v3 grows a topic."""
    assert (_advertised(20), _advertised(37)) == ((1, 6), (0, 3))
    for name in ("by-name", "by-id", "grows"):
        await broker.create_topic(name)
    client = await WireClient.connect(broker.port)
    C = CREATE_PARTITIONS_REQUEST.cls
    grown = await client.call(37, 3, C(timeout_ms=10_000, validate_only=False, topics=[
        C.CreatePartitionsTopic(name="grows", count=3, assignments=None)]))  # fmt: skip
    assert [(r.name, r.error_code) for r in grown.results] == [("grows", 0)]
    assert len(broker.quorum.image.topic("grows").partitions) == 3

    ids = broker.quorum.image.topic_ids_by_name
    by_name_id, by_id = ids["by-name"], ids["by-id"]
    unknown, zero = uuid.uuid4(), uuid.UUID(int=0)
    D = DELETE_TOPICS_REQUEST.cls
    body = await client.call(20, 6, D(timeout_ms=10_000, topics=[
        D.DeleteTopicState(name="by-name", topic_id=zero),
        D.DeleteTopicState(name=None, topic_id=by_id),
        D.DeleteTopicState(name=None, topic_id=unknown),
        D.DeleteTopicState(name="grows", topic_id=ids["grows"]),
        D.DeleteTopicState(name=None, topic_id=zero)]))  # fmt: skip
    answers = {(r.name, r.topic_id): (r.error_code, r.error_message) for r in body.responses}
    invalid = ErrorCode.INVALID_REQUEST
    assert answers == {
        ("by-name", by_name_id): (0, None),
        ("by-id", by_id): (0, None),
        (None, unknown): (ErrorCode.UNKNOWN_TOPIC_ID, None),
        ("grows", ids["grows"]): (invalid, "You may not specify both topic name and topic id."),
        (None, zero): (invalid, "Neither topic name nor id were specified."),
    }
    image = broker.server.ctx.image
    assert image.topic("by-name") is None and image.topic("by-id") is None
    assert image.topic("grows") is not None
    await client.aclose()
