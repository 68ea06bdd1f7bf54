"""The request versions Kafka 4.1-4.3 added (issue 19), each on the wire at its top version
against a real in-process broker, its new fields exercised.

Produce v13 and Fetch v18 (topics by id; Fetch v18's tagged high_watermark of a follower),
ListOffsets v11 (-6, earliest pending upload), OffsetCommit v10 / OffsetFetch v10 (topics by
id), DescribeGroups v6 (GROUP_ID_NOT_FOUND with Kafka's message), and two versions Kafka 4.0
already had: DescribeCluster v2 (fenced brokers, KIP-1073) and ConsumerGroupDescribe v1 (each
member's type, KIP-1099). Layouts from Apache Kafka 4.3's JSON message definitions.
"""

from __future__ import annotations

import uuid

from log.common.errors import ErrorCode
from log.protocol.admin import ALTER_PARTITION_REASSIGNMENTS_REQUEST, DESCRIBE_CLUSTER_REQUEST
from log.protocol.apis import APIS, error_response_body
from log.protocol.consumer_group import (
    CONSUMER_GROUP_DESCRIBE_REQUEST,
    CONSUMER_GROUP_HEARTBEAT_REQUEST,
)
from log.protocol.coordinator import FIND_COORDINATOR_REQUEST
from log.protocol.fetch import FETCH_REQUEST
from log.protocol.groups import (
    DESCRIBE_GROUPS_REQUEST,
    OFFSET_COMMIT_REQUEST,
    OFFSET_FETCH_REQUEST,
)
from log.protocol.offsets import LIST_OFFSETS_REQUEST
from log.protocol.produce import PRODUCE_REQUEST
from log.records.batch_header import iter_batches
from log.records.builder import Record, build_batch
from quorum import controller
from quorum.records import BrokerEndpoint
from tests.broker.conftest import WireClient, produce_body, start_broker

TOPIC = "by-id"


def _advertised(api_key: int) -> tuple[int, int]:
    return APIS[api_key].advertised_versions()


def _produce_by_id(*topics: tuple[uuid.UUID, bytes]):
    P = PRODUCE_REQUEST.cls
    return P(acks=-1, timeout_ms=5000, topic_data=[
        P.TopicProduceData(topic_id=topic_id, partition_data=[
            P.PartitionProduceData(index=0, records=records)])
        for topic_id, records in topics])  # fmt: skip


async def test_produce_v13_and_fetch_v18_by_topic_id(broker):
    """Produce v13 names the topic by id and hears back by id; an unknown id is
    UNKNOWN_TOPIC_ID for its partition while the known one is appended. Fetch v18 (by id, with
    a follower's high_watermark in a partition: tagged, read and not used) returns the
    records; v12 by name still works beside it."""
    assert (_advertised(0), _advertised(1)) == ((0, 13), (4, 18))
    await broker.create_topic(TOPIC)
    topic_id = broker.quorum.image.topic_ids_by_name[TOPIC]
    unknown = uuid.uuid4()
    client = await WireClient.connect(broker.port)
    body = _produce_by_id((topic_id, build_batch([Record(b"one"), Record(b"two")])),
                          (unknown, build_batch([Record(b"lost")])))  # fmt: skip
    answer = await client.call(0, 13, body)
    got = {(t.topic_id, t.name): [(p.index, p.error_code, p.base_offset)
                                  for p in t.partition_responses]
           for t in answer.responses}  # fmt: skip
    # v13 has no name on the wire: decoded, it is the default ""
    assert got == {
        (topic_id, ""): [(0, 0, 0)],
        (unknown, ""): [(0, ErrorCode.UNKNOWN_TOPIC_ID, -1)],
    }
    by_name = await client.call(0, 12, produce_body(TOPIC, 0, build_batch([Record(b"three")])))
    assert [(t.name, t.partition_responses[0].base_offset) for t in by_name.responses] == [
        (TOPIC, 2)]  # fmt: skip

    F = FETCH_REQUEST.cls
    fetched = await client.call(1, 18, F(
        max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[F.FetchTopic(
            topic_id=topic_id, partitions=[F.FetchPartition(
                partition=0, fetch_offset=0, partition_max_bytes=1 << 20, high_watermark=1)])]))  # fmt: skip
    [topic] = fetched.responses
    [partition] = topic.partitions
    assert (topic.topic_id, partition.error_code, partition.high_watermark) == (topic_id, 0, 3)
    counts = [header.record_count for _, header in iter_batches(bytes(partition.records))]
    assert counts == [2, 1]
    await client.aclose()


async def test_list_offsets_v11_earliest_pending_upload(broker):
    """-6 (earliest pending upload, KIP-1023) at v11: nothing is tiered here, so offset -1 and
    epoch -1, Kafka's answer for a log without remote storage; at v10 it is UNSUPPORTED_VERSION
    for its partition, and -7 is no timestamp at all."""
    assert _advertised(2) == (1, 11)
    L = LIST_OFFSETS_REQUEST.cls
    await broker.create_topic(TOPIC)
    client = await WireClient.connect(broker.port)
    produced = await client.call(0, 9, produce_body(TOPIC, 0, build_batch([Record(b"x")])))
    assert produced.responses[0].partition_responses[0].error_code == 0

    async def ask(version: int, *timestamps: int) -> list:
        partitions = [L.ListOffsetsPartition(partition_index=0, timestamp=t) for t in timestamps]
        body = L(replica_id=-1, isolation_level=0, timeout_ms=1000,
                 topics=[L.ListOffsetsTopic(name=TOPIC, partitions=partitions)])  # fmt: skip
        response = await client.call(2, version, body)
        return [(p.error_code, p.offset, p.timestamp, p.leader_epoch)
                for p in response.topics[0].partitions]  # fmt: skip

    pending, latest = await ask(11, -6, -1)
    assert pending == (0, -1, -1, -1) and latest[:2] == (0, 1)
    assert (await ask(10, -6))[0][0] == ErrorCode.UNSUPPORTED_VERSION
    assert (await ask(11, -7))[0][0] == ErrorCode.UNSUPPORTED_VERSION
    await client.aclose()


async def test_offsets_v10_by_topic_id_and_describe_groups_v6(nursery, tmp_path):
    """OffsetCommit v10 commits by topic id (an unknown id: UNKNOWN_TOPIC_ID, the known topic
    committed); OffsetFetch v10 reads it back by id, asked (the unknown id again
    UNKNOWN_TOPIC_ID) and all of the group's; v9 by name sees the same offset. DescribeGroups
    v6: the group with offsets is Empty; a group that does not exist, or a KIP-848 consumer
    group, is GROUP_ID_NOT_FOUND with Kafka's messages (before v6: Dead, no error); that
    consumer group's member is a consumer member (type 1) in ConsumerGroupDescribe v1."""
    assert [_advertised(k) for k in (8, 9, 15, 69)] == [(2, 10), (1, 10), (0, 6), (0, 1)]
    broker = await start_broker(nursery, tmp_path, **{"offsets.topic.num.partitions": 1,
                                                      "group.initial.rebalance.delay.ms": 0})  # fmt: skip
    await broker.create_topic(TOPIC, partitions=2)
    topic_id = broker.quorum.image.topic_ids_by_name[TOPIC]
    unknown = uuid.uuid4()
    client = await WireClient.connect(broker.port)
    found = FIND_COORDINATOR_REQUEST.cls(key_type=0, coordinator_keys=["g41"])
    # The first creates __consumer_offsets: COORDINATOR_NOT_AVAILABLE until then.
    for _ in range(100):
        if (await client.call(10, 6, found)).coordinators[0].error_code == 0:
            break
    else:
        raise AssertionError("no group coordinator")

    C = OFFSET_COMMIT_REQUEST.cls
    committed = await client.call(8, 10, C(
        group_id="g41", generation_id_or_member_epoch=-1, member_id="", topics=[
            C.OffsetCommitRequestTopic(topic_id=topic_id, partitions=[
                C.OffsetCommitRequestPartition(partition_index=1, committed_offset=7,
                                               committed_metadata="m")]),
            C.OffsetCommitRequestTopic(topic_id=unknown, partitions=[
                C.OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                               committed_metadata=None)])]))  # fmt: skip
    assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in committed.topics] == [
        (topic_id, [(1, 0)]), (unknown, [(0, ErrorCode.UNKNOWN_TOPIC_ID)])]  # fmt: skip

    O = OFFSET_FETCH_REQUEST.cls  # noqa: E741, N806

    async def fetch(version: int, topics) -> list:
        body = O(groups=[O.OffsetFetchRequestGroup(group_id="g41", topics=topics)],
                 require_stable=True)  # fmt: skip
        [group] = (await client.call(9, version, body)).groups
        assert group.error_code == 0
        return [(t.topic_id if version >= 10 else t.name,
                 [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
                  for p in t.partitions]) for t in group.topics]  # fmt: skip

    asked = await fetch(10, [O.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
        topic_id=topic_id, partition_indexes=[0, 1]),
        O.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
        topic_id=unknown, partition_indexes=[3])])  # fmt: skip
    assert asked == [(topic_id, [(0, -1, "", 0), (1, 7, "m", 0)]),
                     (unknown, [(3, -1, "", ErrorCode.UNKNOWN_TOPIC_ID)])]  # fmt: skip
    assert await fetch(10, None) == [(topic_id, [(1, 7, "m", 0)])]
    assert await fetch(9, None) == [(TOPIC, [(1, 7, "m", 0)])]

    HB = CONSUMER_GROUP_HEARTBEAT_REQUEST.cls
    joined = await client.call(68, 1, HB(group_id="cg41", member_id="m1", member_epoch=0,
                                         rebalance_timeout_ms=30_000,
                                         subscribed_topic_names=[TOPIC], topic_partitions=[]))  # fmt: skip
    assert (joined.error_code, joined.member_epoch) == (0, 1)
    CD = CONSUMER_GROUP_DESCRIBE_REQUEST.cls
    types = [[m.member_type for m in g.members] for version in (1, 0)
             for g in (await client.call(69, version, CD(group_ids=["cg41"]))).groups]  # fmt: skip
    assert types == [[1], [-1]]  # v0 has no member_type: decoded as its default

    D = DESCRIBE_GROUPS_REQUEST.cls

    async def describe(version: int) -> list:
        body = await client.call(15, version, D(groups=["g41", "nope", "cg41"]))
        return [(g.group_id, g.error_code, g.error_message, g.group_state) for g in body.groups]

    not_found = ErrorCode.GROUP_ID_NOT_FOUND
    assert await describe(6) == [
        ("g41", 0, None, "Empty"),
        ("nope", not_found, "Group nope not found.", ""),
        ("cg41", not_found, "Group cg41 is not a classic group.", "")]  # fmt: skip
    assert await describe(5) == [
        ("g41", 0, None, "Empty"), ("nope", 0, None, "Dead"), ("cg41", 0, None, "Dead")]  # fmt: skip
    await client.aclose()


async def test_describe_cluster_v2_and_alter_partition_reassignments_v1(broker):
    """DescribeCluster v2 (KIP-1073): a registered but fenced broker is listed, is_fenced, only
    when include_fenced_brokers asks for it; the live broker is not fenced.
    AlterPartitionReassignments v1 (KIP-860): with allow_replication_factor_change false, a
    target whose size differs from the replica set the partition is headed for is
    INVALID_REPLICATION_FACTOR with Kafka's message, and nothing moves."""
    assert _advertised(60) == (0, 2)
    request = controller.BrokerRegistrationRequest(
        7, uuid.uuid4(), (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 1),))  # fmt: skip
    records, _ = controller.register_broker(broker.quorum.image, request)
    broker.quorum.commit(records)  # registered, never heartbeated: fenced
    assert broker.quorum.image.brokers[7].fenced
    client = await WireClient.connect(broker.port)
    D = DESCRIBE_CLUSTER_REQUEST.cls

    async def brokers(version: int, include_fenced: bool) -> list:
        body = await client.call(60, version, D(include_cluster_authorized_operations=False,
                                                include_fenced_brokers=include_fenced))  # fmt: skip
        assert body.error_code == 0
        return [(b.broker_id, b.port, b.is_fenced) for b in body.brokers]

    assert await brokers(2, True) == [(1, broker.port, False), (7, 1, True)]
    assert await brokers(2, False) == [(1, broker.port, False)]
    assert await brokers(1, True) == [(1, broker.port, False)]  # v1: never fenced ones

    # AlterPartitionReassignments v1 (KIP-860) onto that registered broker 7
    assert _advertised(45) == (0, 1)
    await broker.create_topic(TOPIC)
    A = ALTER_PARTITION_REASSIGNMENTS_REQUEST.cls

    async def reassign(version: int, replicas: list[int] | None, allow: bool) -> tuple:
        body = await client.call(45, version, A(
            timeout_ms=5000, allow_replication_factor_change=allow,
            topics=[A.ReassignableTopic(name=TOPIC, partitions=[
                A.ReassignablePartition(partition_index=0, replicas=replicas)])]))  # fmt: skip
        [partition] = body.responses[0].partitions
        return partition.error_code, partition.error_message

    rf_changed = ErrorCode.INVALID_REPLICATION_FACTOR
    assert await reassign(1, [1, 7], False) == (
        rf_changed, "The replication factor is changed from 1 to 2")  # fmt: skip
    assert broker.quorum.image.topic(TOPIC).partitions[0].replicas == (1,)
    assert await reassign(0, [1, 7], False) == (0, None)  # v0 has no such field: allowed
    state = broker.quorum.image.topic(TOPIC).partitions[0]
    assert (state.replicas, state.adding_replicas) == ((1, 7), (7,))  # 7 is fenced: stays
    assert await reassign(1, [7], False) == (
        rf_changed, "The replication factor is changed from 2 to 1")  # fmt: skip
    assert await reassign(1, None, False) == (0, None)  # a cancel changes no target
    assert broker.quorum.image.topic(TOPIC).partitions[0].replicas == (1,)
    await client.aclose()


async def test_list_transactions_v2_transactional_id_pattern(nursery, tmp_path):
    """ListTransactions v2 (KIP-1152): the pattern must match the whole transactional id (RE2,
    as Kafka's RE2/J); empty or null lists every id; a pattern RE2 refuses is
    INVALID_REGULAR_EXPRESSION."""
    from log.protocol.transaction_admin import LIST_TRANSACTIONS_REQUEST
    from tests.broker.test_txn_coordinator import find_coordinator, init

    assert _advertised(66) == (0, 2)
    broker = await start_broker(nursery, tmp_path, **{"transaction.state.log.num.partitions": 1})
    client = await WireClient.connect(broker.port)
    await find_coordinator(client, "orders-1")
    for tid in ("orders-1", "orders-2", "other"):
        assert (await init(client, tid)).error_code == 0
    LT = LIST_TRANSACTIONS_REQUEST.cls

    async def listed(version: int, pattern: str | None) -> tuple[int, list[str]]:
        body = await client.call(66, version, LT(state_filters=[], producer_id_filters=[],
                                                 transactional_id_pattern=pattern))  # fmt: skip
        return body.error_code, sorted(t.transactional_id for t in body.transaction_states)

    everyone = (0, ["orders-1", "orders-2", "other"])
    assert await listed(2, "orders-.*") == (0, ["orders-1", "orders-2"])
    assert await listed(2, "orders-[2-9]") == (0, ["orders-2"])
    assert await listed(2, "orders") == (0, [])  # a prefix is no whole match
    assert await listed(2, "") == everyone
    assert await listed(2, None) == everyone
    assert await listed(1, "orders-.*") == everyone  # v1 has no pattern on the wire
    assert await listed(2, "orders-(") == (ErrorCode.INVALID_REGULAR_EXPRESSION, [])
    await client.aclose()


def test_whole_request_errors_name_topics_by_id():
    """A whole-request error answer (a handler's KafkaError, KIP-896's refusals) of the versions
    that name topics by id carries each topic's id, so the client can match it."""
    topic_id = uuid.uuid4()
    denied = ErrorCode.GROUP_AUTHORIZATION_FAILED
    C = OFFSET_COMMIT_REQUEST.cls
    request = C(group_id="g", topics=[C.OffsetCommitRequestTopic(topic_id=topic_id, partitions=[
        C.OffsetCommitRequestPartition(partition_index=3, committed_offset=1)])])  # fmt: skip
    body = error_response_body(APIS[8], 10, request, denied)
    assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in body.topics] == [(topic_id, [(3, denied)])]  # fmt: skip
    response = APIS[8].response
    assert response.decode(response.encode(body, 10), 10)[0] == body
    produced = error_response_body(APIS[0], 13, _produce_by_id((topic_id, b"")), denied)
    assert [(t.topic_id, [p.error_code for p in t.partition_responses])
            for t in produced.responses] == [(topic_id, [denied])]  # fmt: skip
