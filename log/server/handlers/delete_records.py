"""DeleteRecords (21): move partitions' log start offsets forward (kafka-delete-records).

Per partition, on its leader (the ReplicaManager's delete_records_on_local_log and
await_low_watermark, Kafka's ReplicaManager.deleteRecords): not the leader ->
NOT_LEADER_OR_FOLLOWER; a topic whose cleanup.policy is compact only -> POLICY_VIOLATION
(records of a compacted topic are removed by the cleaner, not by offset); offset -1 means the
high watermark; an offset below 0 or above the high watermark -> OFFSET_OUT_OF_RANGE. The
leader raises its log start offset (`UnifiedLog.delete_records_before`: whole segments below
it are deleted) and wakes its followers' long polls, which carry the new log start offset to
them; they raise theirs and report it in their next fetch. The answer waits (at most the
request's timeout_ms, Kafka's DelayedDeleteRecords) until the low watermark -- the smallest
log start offset over the leader and its live followers (`PartitionState.low_watermark`) --
reaches the offset, and returns that low watermark; REQUEST_TIMED_OUT after timeout_ms.
"""

from __future__ import annotations

import trio

from log.common.acl import AclOperation, ResourceType
from log.common.errors import (
    ErrorCode,
    KafkaError,
)
from log.protocol.admin import DELETE_RECORDS_RESPONSE
from log.protocol.connection import Request
from log.replication.partition import HostedPartition
from log.replication.replica_manager import MAX_ACKS_WAIT_MS
from log.server.authorization import allowed
from log.server.broker_context import BrokerContext

R = DELETE_RECORDS_RESPONSE.cls


async def handle_delete_records(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    image = ctx.replica_manager.sync()
    rows_by_topic: dict[str, list[list]] = {}  # name -> [[partition, low_watermark, error]]
    waits: list[tuple[list, HostedPartition, int]] = []
    for topic in body.topics:
        rows = rows_by_topic.setdefault(topic.name, [])
        may_delete = allowed(ctx, request, AclOperation.DELETE, ResourceType.TOPIC, topic.name)
        for partition in topic.partitions:
            row = [partition.partition_index, -1, ErrorCode.NONE]
            rows.append(row)
            if not may_delete:  # authorization: DELETE on the topic
                row[2] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            try:
                hosted, offset = ctx.replica_manager.delete_records_on_local_log(
                    topic.name, partition.partition_index, partition.offset, image
                )
            except KafkaError as exc:
                row[2] = exc.error_code
                continue
            waits.append((row, hosted, offset))
    deadline = trio.current_time() + min(max(body.timeout_ms, 0), MAX_ACKS_WAIT_MS) / 1000
    for row, hosted, offset in waits:
        remaining_ms = max(deadline - trio.current_time(), 0) * 1000
        row[1], row[2] = await ctx.replica_manager.await_low_watermark(
            hosted, offset, int(remaining_ms)
        )
    return R(
        throttle_time_ms=0,
        topics=[
            R.DeleteRecordsTopicResult(
                name=name,
                partitions=[
                    R.DeleteRecordsTopicResult.DeleteRecordsPartitionResult(
                        partition_index=index, low_watermark=low, error_code=code
                    )
                    for index, low, code in rows
                ],
            )
            for name, rows in rows_by_topic.items()
        ],
    )
