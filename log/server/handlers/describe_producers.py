"""DescribeProducers (61): the active producers of partition replicas on this broker (Kafka's
Partition.activeProducerState): producer id and epoch, last sequence and timestamp, the
coordinator epoch of its last transaction marker and the start of its open transaction. Any
replica hosting the partition answers from its own log (kafka-transactions.sh --broker-id asks
a follower); a partition not hosted here is NOT_LEADER_OR_FOLLOWER, an unknown one
UNKNOWN_TOPIC_OR_PARTITION."""

from __future__ import annotations

from typing import Any

from log.common.acl import AclOperation, ResourceType
from log.common.errors import ErrorCode
from log.protocol.connection import Request
from log.protocol.producers import DESCRIBE_PRODUCERS_RESPONSE
from log.server.authorization import allowed
from log.server.broker_context import BrokerContext

R: Any = DESCRIBE_PRODUCERS_RESPONSE.cls  # made at run time by schema.py: untyped


def _partition(ctx: BrokerContext, topic: str, index: int) -> Any:
    hosted = ctx.replica_manager.get(topic, index)
    if hosted is None:
        known = (t := ctx.image.topic(topic)) is not None and index in t.partitions
        code = ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return R.PartitionResponse(partition_index=index, error_code=code, active_producers=[])
    producers = hosted.log.producer_state_manager.active_producers
    return R.PartitionResponse(
        partition_index=index,
        error_code=ErrorCode.NONE,
        active_producers=[
            R.ProducerState(
                producer_id=entry.producer_id,
                producer_epoch=entry.producer_epoch,
                last_sequence=entry.last_seq,
                last_timestamp=entry.last_timestamp_ms,
                coordinator_epoch=entry.coordinator_epoch,
                current_txn_start_offset=(
                    -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset
                ),
            )
            for _, entry in sorted(producers.items())
        ],
    )


async def handle_describe_producers(ctx: BrokerContext, request: Request) -> object:
    ctx.replica_manager.sync()
    return R(
        throttle_time_ms=0,
        topics=[
            R.TopicResponse(
                name=topic.name,
                partitions=[
                    _partition(ctx, topic.name, i)
                    if allowed(ctx, request, AclOperation.READ, ResourceType.TOPIC, topic.name)
                    else R.PartitionResponse(  # authorization: READ on the topic
                        partition_index=i,
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        active_producers=[],
                    )
                    for i in topic.partition_indexes
                ],
            )
            for topic in request.body.topics
        ],
    )
