"""ListOffsets and OffsetForLeaderEpoch, answered by the partition leader.

ListOffsets: -2 earliest (log_start_offset), -1 latest (what the asker can read: the high
watermark for read_uncommitted consumers, the last stable offset for read_committed ones
(isolation_level 1, v2+), the log end offset for replicas), -3 max timestamp (v7+), -4 earliest
local (v8+: with no tiered storage the log start offset, as -2), -5 latest tiered (v9+: with no
tiered storage offset -1, epoch -1, as Kafka answers without remote storage), -6 earliest
pending upload (v11+, KIP-1023: the same offset -1, epoch -1, Kafka's answer for a log without
remote storage), else the first
offset whose timestamp >= the given one, below that same bound (offset -1 when none). A special
timestamp below the version that introduced it, or an unknown negative one, gets
UNSUPPORTED_VERSION for its partition (Kafka's `isListOffsetsTimestampUnsupported`). Leader
epoch of the returned offset from the epoch cache (v4+). OffsetForLeaderEpoch:
`UnifiedLog.end_offset_for_epoch`.
"""

from __future__ import annotations

from typing import Any

from log.common.acl import AclOperation, ResourceType
from log.common.errors import ErrorCode, KafkaError, OffsetNotAvailableError
from log.protocol.connection import Request
from log.protocol.offsets import LIST_OFFSETS_RESPONSE, OFFSET_FOR_LEADER_EPOCH_RESPONSE
from log.server.authorization import allowed, require_cluster
from log.server.broker_context import BrokerContext
from log.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP

EARLIEST_LOCAL_TIMESTAMP = -4  # KIP-1005: the first offset still on local disk
LATEST_TIERED_TIMESTAMP = -5  # KIP-1005: the last offset copied to remote storage
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6  # KIP-1023: the first offset not yet copied to remote
# The first ListOffsets version that may ask for each special timestamp.
_TIMESTAMP_MIN_VERSION = {
    EARLIEST_TIMESTAMP: 1,
    LATEST_TIMESTAMP: 1,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL_TIMESTAMP: 8,
    LATEST_TIERED_TIMESTAMP: 9,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11,
}


def timestamp_unsupported(timestamp: int, version: int) -> bool:
    """A special (negative) timestamp this request version may not ask for."""
    return timestamp < 0 and version < _TIMESTAMP_MIN_VERSION.get(timestamp, 1 << 15)


# The response classes are made at run time by schema.py: untyped.
L: Any = LIST_OFFSETS_RESPONSE.cls
E: Any = OFFSET_FOR_LEADER_EPOCH_RESPONSE.cls


def _list_offset(ctx: BrokerContext, image, topic: str, p, is_replica: bool,  # noqa: ANN001
                 read_committed: bool, version: int) -> object:  # fmt: skip
    if timestamp_unsupported(p.timestamp, version):
        return L.ListOffsetsPartitionResponse(
            partition_index=p.partition_index, error_code=ErrorCode.UNSUPPORTED_VERSION
        )
    try:
        hosted = ctx.replica_manager.leader(topic, p.partition_index, image)
        hosted.state.validate_current_leader_epoch(p.current_leader_epoch)
        log = hosted.log
        if is_replica:
            last_fetchable_offset = log.log_end_offset
        elif read_committed:
            last_fetchable_offset = log.last_stable_offset
        else:
            last_fetchable_offset = log.high_watermark
        # A client's answer may not come from a high watermark that lags the epoch's start
        # (KIP-207): the latest offset waits; a timestamp found below the last fetchable
        # offset is still right.
        lagging = not is_replica and hosted.state.high_watermark_lags_epoch_start
        if p.timestamp == LATEST_TIMESTAMP:
            if lagging:
                raise OffsetNotAvailableError(
                    f"{topic}-{p.partition_index}: the high watermark ({log.high_watermark}) "
                    f"lags the start of leader epoch {hosted.state.leader_epoch} "
                    f"({hosted.state.leader_epoch_start_offset})"
                )
            offset = last_fetchable_offset
            epoch = log.latest_epoch
            return L.ListOffsetsPartitionResponse(
                partition_index=p.partition_index, error_code=0, timestamp=-1, offset=offset,
                leader_epoch=-1 if epoch is None else epoch,
            )  # fmt: skip
        if p.timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
            # nothing is tiered here: Kafka answers both without an offset
            return L.ListOffsetsPartitionResponse(
                partition_index=p.partition_index, error_code=0, timestamp=-1, offset=-1,
                leader_epoch=-1,
            )  # fmt: skip
        if p.timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):  # all of it is local
            found = log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP)
        else:
            found = log.fetch_offset_by_timestamp(p.timestamp)
            if found is not None and found.offset >= last_fetchable_offset:
                found = None
            if found is None and lagging:
                raise OffsetNotAvailableError(
                    f"{topic}-{p.partition_index}: no offset below the high watermark, which "
                    f"lags the start of leader epoch {hosted.state.leader_epoch}"
                )
    except KafkaError as exc:
        return L.ListOffsetsPartitionResponse(
            partition_index=p.partition_index, error_code=exc.error_code
        )
    if found is None:
        return L.ListOffsetsPartitionResponse(
            partition_index=p.partition_index, error_code=0, timestamp=-1, offset=-1
        )
    return L.ListOffsetsPartitionResponse(
        partition_index=p.partition_index, error_code=0, timestamp=found.timestamp_ms,
        offset=found.offset, leader_epoch=-1 if found.leader_epoch is None else found.leader_epoch,
    )  # fmt: skip


async def handle_list_offsets(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    image = ctx.replica_manager.sync()
    is_replica = body.replica_id >= 0
    read_committed = request.api_version >= 2 and body.isolation_level == 1
    return L(
        topics=[
            L.ListOffsetsTopicResponse(
                name=t.name,
                partitions=[
                    _list_offset(
                        ctx, image, t.name, p, is_replica, read_committed, request.api_version
                    )
                    if allowed(ctx, request, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
                    else L.ListOffsetsPartitionResponse(  # authorization: DESCRIBE on the topic
                        partition_index=p.partition_index,
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    )
                    for p in t.partitions
                ],
            )
            for t in body.topics
        ]
    )


def _epoch_end_offset(ctx: BrokerContext, image, topic: str, p) -> object:  # noqa: ANN001
    try:
        hosted = ctx.replica_manager.leader(topic, p.partition, image)
        hosted.state.validate_current_leader_epoch(p.current_leader_epoch)
        epoch, end_offset = hosted.log.end_offset_for_epoch(p.leader_epoch)
    except KafkaError as exc:
        return E.EpochEndOffset(error_code=exc.error_code, partition=p.partition)
    return E.EpochEndOffset(
        error_code=ErrorCode.NONE, partition=p.partition, leader_epoch=epoch, end_offset=end_offset
    )


async def handle_offset_for_leader_epoch(ctx: BrokerContext, request: Request) -> object:
    image = ctx.replica_manager.sync()
    # authorization: a replica needs CLUSTER_ACTION, a client DESCRIBE on each topic
    if getattr(request.body, "replica_id", -1) >= 0:
        require_cluster(ctx, request, AclOperation.CLUSTER_ACTION)
    return E(
        topics=[
            E.OffsetForLeaderTopicResult(
                topic=t.topic,
                partitions=[
                    _epoch_end_offset(ctx, image, t.topic, p)
                    if allowed(ctx, request, AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic)
                    else E.EpochEndOffset(
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, partition=p.partition
                    )
                    for p in t.partitions
                ],
            )
            for t in request.body.topics
        ]
    )
