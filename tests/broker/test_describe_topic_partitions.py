"""DescribeTopicPartitions (75): pages of partitions with cursors, over the wire."""

from __future__ import annotations

import uuid

import pytest

from log.common.errors import ErrorCode, InvalidRequestError
from log.protocol.metadata import DESCRIBE_TOPIC_PARTITIONS_REQUEST
from tests.broker.conftest import WireClient

Q = DESCRIBE_TOPIC_PARTITIONS_REQUEST.cls


def _request(topics=(), limit=2000, cursor=None):
    return Q(
        topics=[Q.TopicRequest(name=t) for t in topics],
        response_partition_limit=limit,
        cursor=None
        if cursor is None
        else Q.Cursor(topic_name=cursor[0], partition_index=cursor[1]),
    )


def _page(body) -> tuple[list[tuple[str, int]], tuple[str, int] | None]:
    rows = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
    cursor = body.next_cursor
    return rows, None if cursor is None else (cursor.topic_name, cursor.partition_index)


async def test_pages_through_every_topic_with_cursors(broker):
    for name, count in (("b", 2), ("a", 3), ("c", 1)):
        await broker.create_topic(name, partitions=count)
    client = await WireClient.connect(broker.port)
    pages, cursor = [], None
    while True:
        rows, cursor = _page(await client.call(75, 0, _request(limit=2, cursor=cursor)))
        pages.append(rows)
        if cursor is None:
            break
    assert pages == [
        [("a", 0), ("a", 1)],
        [("a", 2), ("b", 0)],
        [("b", 1), ("c", 0)],
    ]
    body = await client.call(75, 0, _request(["a"]))
    [topic] = body.topics
    assert topic.error_code == 0 and isinstance(topic.topic_id, uuid.UUID)
    assert topic.topic_id == broker.quorum.image.topic("a").topic_id
    partition = topic.partitions[0]
    assert (partition.leader_id, partition.replica_nodes, partition.isr_nodes) == (1, [1], [1])
    assert partition.eligible_leader_replicas == [] and partition.offline_replicas == []
    await client.aclose()


async def test_a_full_page_ends_exactly_at_a_topic_boundary(broker):
    await broker.create_topic("a", partitions=2)
    await broker.create_topic("b", partitions=1)
    client = await WireClient.connect(broker.port)
    rows, cursor = _page(await client.call(75, 0, _request(limit=2)))
    assert rows == [("a", 0), ("a", 1)] and cursor == ("b", 0)
    await client.aclose()


async def test_unknown_and_invalid_topics_and_cursors(broker):
    await broker.create_topic("a", partitions=1)
    client = await WireClient.connect(broker.port)
    body = await client.call(75, 0, _request(["a", "missing", "bad name!"]))
    codes = {t.name: (t.error_code, t.topic_id) for t in body.topics}
    assert codes == {
        "a": (0, broker.quorum.image.topic("a").topic_id),
        "bad name!": (ErrorCode.INVALID_TOPIC_EXCEPTION, uuid.UUID(int=0)),
        "missing": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, uuid.UUID(int=0)),
    }
    assert broker.quorum.image.topic("missing") is None  # never auto-created
    for bad in (_request(["a"], cursor=("b", 0)), _request(cursor=("a", -1))):
        body = await client.call(75, 0, bad)
        assert [t.error_code for t in body.topics] == [ErrorCode.INVALID_REQUEST] * len(body.topics)
        assert body.next_cursor is None
    await client.aclose()


def test_nullable_struct_codec():
    for cursor in (None, ("t", 3)):
        body = _request(["t"], limit=5, cursor=cursor)
        encoded = DESCRIBE_TOPIC_PARTITIONS_REQUEST.encode(body, 0)
        decoded, end = DESCRIBE_TOPIC_PARTITIONS_REQUEST.decode(encoded, 0)
        assert decoded == body and end == len(encoded)
    encoded = bytearray(DESCRIBE_TOPIC_PARTITIONS_REQUEST.encode(_request(cursor=("t", 3)), 0))
    marker = encoded.index(b"\x01\x02t")  # the cursor's marker, then its compact string "t"
    encoded[marker] = 7
    with pytest.raises(InvalidRequestError, match="nullable struct marker"):
        DESCRIBE_TOPIC_PARTITIONS_REQUEST.decode(bytes(encoded), 0)


async def test_kafka_python_admin_pages_through_partitions(broker):
    import trio
    from kafka.admin import KafkaAdminClient

    await broker.create_topic("kp", partitions=5)

    def pages() -> list[list[int]]:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        seen, cursor = [], None
        try:
            while True:
                page = admin.describe_topic_partitions(
                    ["kp"], response_partition_limit=2, cursor=cursor
                )
                [topic] = page["topics"]
                assert topic["error_code"] == 0 and topic["name"] == "kp"
                seen.append([p["partition_index"] for p in topic["partitions"]])
                cursor = page["next_cursor"]
                if cursor is None:
                    return seen
        finally:
            admin.close()

    assert await trio.to_thread.run_sync(pages) == [[0, 1], [2, 3], [4]]
