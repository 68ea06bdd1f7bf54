"""Fetch v12-v17 and Metadata v10-v12 through the wire: topic ids (KIP-516), the leader hint
on NOT_LEADER (KIP-951, v12+ current_leader, v16+ node_endpoints); replica-side behaviour
(diverging epochs, KIP-903's replica epoch) is in tests/replication/test_replication_in_process.py."""

from __future__ import annotations

import dataclasses
import uuid

from log.common.errors import ErrorCode
from log.protocol.fetch import FETCH_REQUEST
from log.records.builder import Record, build_batch
from tests.broker.conftest import WireClient, produce_body

F = FETCH_REQUEST.cls


def by_id(topic_id: uuid.UUID, offset: int = 0) -> object:
    return F(
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[
            F.FetchTopic(
                topic_id=topic_id,
                partitions=[
                    F.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
                ],
            )
        ],
    )


async def test_v13_names_topics_by_id_and_refuses_an_unknown_id(broker):
    await broker.create_topic("t", 1)
    topic_id = broker.quorum.image.topic_ids_by_name["t"]
    client = await WireClient.connect(broker.port)
    await client.call(0, 8, produce_body("t", 0, build_batch([Record(b"v")])))
    for version in (13, 15, 17):
        body = await client.call(1, version, by_id(topic_id))
        (topic,) = body.responses
        assert topic.topic_id == topic_id and topic.topic == ""
        assert topic.partitions[0].error_code == ErrorCode.NONE
        assert topic.partitions[0].high_watermark == 1 and len(topic.partitions[0].records) > 0
    body = await client.call(1, 13, by_id(uuid.uuid4()))
    (topic,) = body.responses
    assert topic.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    await client.aclose()


async def test_not_leader_names_the_current_leader_and_where_it_listens(broker):
    await broker.create_topic("t", 1)
    topic_id = broker.quorum.image.topic_ids_by_name["t"]
    broker.server.replica_manager.get("t", 0).is_leader = False  # as just after a leader move
    client = await WireClient.connect(broker.port)
    body = await client.call(1, 16, by_id(topic_id))
    partition = body.responses[0].partitions[0]
    assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (1, 0)
    assert [(e.node_id, e.port) for e in body.node_endpoints] == [(1, broker.port)]
    await client.aclose()


async def test_a_session_fetch_naming_an_unknown_topic_id_gets_no_session(broker):
    """A follower may know a new topic before the leader's image does. Its partitions cannot
    go into a session (sessions hold topics by name), and a fetcher never names a partition
    again in its incremental fetches: so the answer opens no session, and the fetcher retries
    with a full fetch (regression: followers of a new topic never fetched at all, 1 run in 3)."""
    await broker.create_topic("t", 1)
    topic_id = broker.quorum.image.topic_ids_by_name["t"]
    client = await WireClient.connect(broker.port)
    request = by_id(uuid.uuid4())
    session_fetch = dataclasses.replace(
        request, replica_state=F.ReplicaState(replica_id=2, replica_epoch=-1), session_epoch=0
    )
    body = await client.call(1, 17, session_fetch)
    assert body.session_id == 0
    assert body.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    known = dataclasses.replace(session_fetch, topics=by_id(topic_id).topics)
    body = await client.call(1, 17, known)
    assert body.session_id != 0  # a fetch naming known topics opens one as usual
    await client.aclose()


async def test_metadata_v12_gives_topic_ids_and_takes_topics_by_id(broker):
    from log.protocol.metadata import METADATA_REQUEST

    await broker.create_topic("t", 2)
    topic_id = broker.quorum.image.topic_ids_by_name["t"]
    M = METADATA_REQUEST.cls  # noqa: N806
    client = await WireClient.connect(broker.port)
    body = await client.call(3, 12, M(topics=[M.MetadataRequestTopic(name="t")]))
    (topic,) = body.topics
    assert (topic.error_code, topic.name, topic.topic_id) == (0, "t", topic_id)
    unknown = uuid.uuid4()
    body = await client.call(3, 12, M(topics=[
        M.MetadataRequestTopic(topic_id=topic_id, name=None),
        M.MetadataRequestTopic(topic_id=unknown, name=None),
    ], allow_auto_topic_creation=False))  # fmt: skip
    known, missing = body.topics
    assert (known.name, known.topic_id, len(known.partitions)) == ("t", topic_id, 2)
    assert (missing.error_code, missing.name, missing.topic_id) == (
        ErrorCode.UNKNOWN_TOPIC_ID,
        None,
        unknown,
    )
    await client.aclose()
