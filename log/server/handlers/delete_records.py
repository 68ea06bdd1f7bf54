"""DeleteRecords (21): move partitions' log start offsets forward (kafka-delete-records).

Per partition, on its leader (Kafka's ReplicaManager.deleteRecords): not the leader ->
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

from log.common.errors import (
    ErrorCode,
    KafkaError,
    OffsetOutOfRangeError,
    PolicyViolationError,
)
from log.protocol.admin import DELETE_RECORDS_RESPONSE
from log.protocol.connection import Request
from log.server.broker_context import BrokerContext
from log.server.partitions import HostedPartition

R = DELETE_RECORDS_RESPONSE.cls
MAX_WAIT_MS = 300_000
HIGH_WATERMARK_OFFSET = -1


async def _wait_for_low_watermark(
    ctx: BrokerContext, hosted: HostedPartition, offset: int, timeout_ms: int
) -> tuple[int, ErrorCode]:
    """Wait until every live replica's log start offset reached `offset`: (low watermark,
    error code)."""
    low_watermark = -1
    with trio.move_on_after(min(max(timeout_ms, 0), MAX_WAIT_MS) / 1000):
        while True:
            event = hosted.high_watermark_changed
            if ctx.partitions.get(hosted.topic, hosted.partition) is not hosted or not (
                hosted.state.is_leader
            ):
                return -1, ErrorCode.NOT_LEADER_OR_FOLLOWER
            live = {b for b, r in ctx.image.brokers.items() if not r.fenced}
            low_watermark = hosted.state.low_watermark(live)
            if low_watermark >= offset:
                return low_watermark, ErrorCode.NONE
            await event.wait()
    return low_watermark, ErrorCode.REQUEST_TIMED_OUT


def _delete_before(hosted: HostedPartition, requested_offset: int) -> int:
    """Raise the leader's log start offset; the offset it now starts at."""
    log = hosted.log
    if "delete" not in log.config.cleanup_policy.split(","):
        raise PolicyViolationError(
            f"records of {hosted.topic} (cleanup.policy={log.config.cleanup_policy}) cannot be "
            "deleted by offset"
        )
    offset = log.high_watermark if requested_offset == HIGH_WATERMARK_OFFSET else requested_offset
    if offset < 0:
        raise OffsetOutOfRangeError(f"cannot delete before offset {requested_offset}")
    log.delete_records_before(offset)  # OffsetOutOfRangeError above the high watermark
    hosted.signal_high_watermark()  # followers' long polls: the log start offset moved
    return offset


async def handle_delete_records(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    image = ctx.sync_partitions()
    rows_by_topic: dict[str, list[list]] = {}  # name -> [[partition, low_watermark, error]]
    waits: list[tuple[list, HostedPartition, int]] = []
    for topic in body.topics:
        rows = rows_by_topic.setdefault(topic.name, [])
        for partition in topic.partitions:
            row = [partition.partition_index, -1, ErrorCode.NONE]
            rows.append(row)
            try:
                hosted = ctx.partitions.leader(topic.name, partition.partition_index, image)
                offset = _delete_before(hosted, partition.offset)
            except KafkaError as exc:
                row[2] = exc.error_code
                continue
            waits.append((row, hosted, offset))
    deadline = trio.current_time() + min(max(body.timeout_ms, 0), MAX_WAIT_MS) / 1000
    for row, hosted, offset in waits:
        remaining_ms = max(deadline - trio.current_time(), 0) * 1000
        row[1], row[2] = await _wait_for_low_watermark(ctx, hosted, offset, int(remaining_ms))
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
