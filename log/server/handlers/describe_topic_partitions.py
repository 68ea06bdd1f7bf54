"""DescribeTopicPartitions (75, v0): the paginated topic description of KIP-966 (Kafka 3.8+
admin clients' describeTopics, kafka-topics.sh --describe), with each partition's eligible
leader replicas and last known ELR.

Kafka's rules: an empty topic list means every topic; topics are answered in name order,
starting at the cursor's topic and partition; at most `response_partition_limit` partitions
(capped by `max.request.partition.size.limit`, 2000) are answered, and `next_cursor` says where
the next page starts. A cursor whose topic is not in a non-empty topic list, or whose partition is
negative, is INVALID_REQUEST. A requested topic that does not exist is answered
UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name); with every topic asked
for, only existing ones are listed. Nothing is auto-created. A leader that is not live is answered
as -1, as Kafka's metadata cache does.
"""

from __future__ import annotations

import uuid
from typing import Any

from log.common.acl import AclOperation, ResourceType
from log.common.errors import ErrorCode, InvalidRequestError
from log.protocol.connection import Request
from log.protocol.metadata import DESCRIBE_TOPIC_PARTITIONS_RESPONSE
from log.server.authorization import allowed, authorized_operations
from log.server.broker_context import BrokerContext
from quorum.image import MetadataImage, TopicImage, topic_name_error
from quorum.records import NO_LEADER

TOPIC = ResourceType.TOPIC
D: Any = DESCRIBE_TOPIC_PARTITIONS_RESPONSE.cls  # made at run time by schema.py: untyped
ZERO_UUID = uuid.UUID(int=0)


def _partitions(image: MetadataImage, topic: TopicImage, start: int, limit: int) -> list[Any]:
    rows = []
    for index in range(start, min(len(topic.partitions), start + limit)):
        state = topic.partitions[index]
        rows.append(
            D.DescribeTopicPartitionsResponsePartition(
                error_code=ErrorCode.NONE,
                partition_index=index,
                leader_id=state.leader if image.is_live(state.leader) else NO_LEADER,
                leader_epoch=state.leader_epoch,
                replica_nodes=list(state.replicas),
                isr_nodes=list(state.isr),
                eligible_leader_replicas=list(state.elr),
                last_known_elr=list(state.last_known_elr),
                offline_replicas=[r for r in state.replicas if not image.is_live(r)],
            )
        )
    return rows


async def handle_describe_topic_partitions(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    image = ctx.replica_manager.sync()
    every_topic = not body.topics
    cursor = body.cursor
    first = cursor.topic_name if cursor is not None else ""
    if every_topic:  # authorization: a listing leaves out what the caller may not DESCRIBE
        names = sorted(n for n in image.topic_ids_by_name if n >= first
                       and allowed(ctx, request, AclOperation.DESCRIBE, TOPIC, n, count=False))  # fmt: skip
    else:
        names = sorted({t.name for t in body.topics if t.name >= first})
        if cursor is not None and cursor.topic_name not in names:
            raise InvalidRequestError(f"the topic list must hold the cursor's topic {first!r}")
    if cursor is not None and cursor.partition_index < 0:
        raise InvalidRequestError(f"bad cursor partition {cursor.partition_index}")
    remaining = max(
        1, min(ctx.config.props["max.request.partition.size.limit"], body.response_partition_limit)
    )
    topics: list[Any] = []
    next_cursor = None
    for name in names:
        if remaining == 0:
            next_cursor = D.Cursor(topic_name=name, partition_index=0)
            break
        topic = image.topic(name)
        code: ErrorCode | None = None
        if not allowed(ctx, request, AclOperation.DESCRIBE, TOPIC, name):
            topic, code = None, ErrorCode.TOPIC_AUTHORIZATION_FAILED  # authorization
        elif topic is None and topic_name_error(name):
            code = ErrorCode.INVALID_TOPIC_EXCEPTION
        if topic is None:
            topics.append(
                D.DescribeTopicPartitionsResponseTopic(
                    error_code=code or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    name=name,
                    topic_id=ZERO_UUID,
                    is_internal=name.startswith("__"),
                    partitions=[],
                )
            )
            continue
        start = cursor.partition_index if cursor is not None and name == first else 0
        rows = _partitions(image, topic, start, remaining)
        topics.append(
            D.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.NONE,
                name=name,
                topic_id=topic.topic_id,
                is_internal=name.startswith("__"),
                partitions=rows,
                topic_authorized_operations=authorized_operations(ctx, request, TOPIC, name),
            )
        )
        if start + len(rows) < len(topic.partitions):
            next_cursor = D.Cursor(topic_name=name, partition_index=start + len(rows))
            break
        remaining -= len(rows)
    return D(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)
