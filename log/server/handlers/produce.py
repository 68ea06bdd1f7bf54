"""Produce: append each partition's record batch as leader; answer per partition.

Per partition (Kafka's ReplicaManager.appendRecords + Partition.appendRecordsToLeader):
unknown topic/partition -> UNKNOWN_TOPIC_OR_PARTITION; not the leader -> NOT_LEADER_OR_FOLLOWER;
acks=-1 with ISR size < min.insync.replicas -> NOT_ENOUGH_REPLICAS (nothing appended); then
`UnifiedLog.append_as_leader` on the received memoryview (header + CRC only, records never
decoded): CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_RECORD,
OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH come back as that partition's error; an
idempotent retry answers the original offsets. A failure affects only its partition.

acks: 0 and 1 answer after the local append; -1 waits until the high watermark passes the
appended batch (HostedPartitions.maybe_advance_high_watermark decides when, and signals) and
then answers `PartitionState.check_enough_replicas_reach_offset`'s verdict: NONE, or
NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR fell below min.insync.replicas meanwhile;
NOT_LEADER_OR_FOLLOWER when leadership moved (v10+, KIP-951: with the partition's current
leader and epoch from this broker's image, and that leader's endpoint in node_endpoints, so the
client retries there without a metadata request); REQUEST_TIMED_OUT after the request's
timeout_ms. The wait is on the partition's `high_watermark_changed` event (the one mechanism;
it is set on HW moves, appends, ISR and leadership changes). acks outside {-1, 0, 1}: INVALID_REQUIRED_ACKS
for every partition. acks=0 gets no response; broker.py closes the connection when such a
request had an error (Kafka does, so the client refreshes its metadata).

Appends run inline on the trio thread: an append is a header check, a CRC-32C in C and one
pwritev. bench/broker_produce measured a ~16 KB batch at ~23 us inline against ~100-150 us
through trio.to_thread.run_sync, so the hop would cost several appends' worth of time. A segment
roll (fsync of the old segment) is the rare slow case we accept inline.
"""

from __future__ import annotations

import trio

from log.common.errors import (
    ErrorCode,
    InvalidRecordError,
    KafkaError,
)
from log.protocol.connection import Request
from log.protocol.produce import PRODUCE_RESPONSE
from log.server.broker_context import BrokerContext
from log.server.handlers.metadata import live_brokers
from log.server.partitions import HostedPartition

R = PRODUCE_RESPONSE.cls
NO_HINT = R.PartitionProduceResponse.LeaderIdAndEpoch()  # leader -1, epoch -1: not written


def _current_leader(image: object, topic: str, partition: int, hinted: set[int]) -> object:
    """KIP-951: the partition's leader and leader epoch as this broker's image knows them, for a
    client told NOT_LEADER_OR_FOLLOWER (v10+), its id added to `hinted` (for node_endpoints);
    -1 when unknown or leaderless."""
    known = image.topic(topic)  # type: ignore[attr-defined]
    state = known.partitions.get(partition) if known is not None else None
    if state is None or state.leader < 0:
        return NO_HINT
    hinted.add(state.leader)
    return R.PartitionProduceResponse.LeaderIdAndEpoch(
        leader_id=state.leader, leader_epoch=state.leader_epoch
    )


MAX_ACKS_WAIT_MS = 300_000


async def _wait_for_high_watermark(
    ctx: BrokerContext, hosted: HostedPartition, required_offset: int, timeout_ms: int
) -> int:
    """acks=-1: wait until the HW reaches `required_offset`; the error code to answer."""
    min_insync_replicas = hosted.log.config.min_insync_replicas
    with trio.move_on_after(min(max(timeout_ms, 0), MAX_ACKS_WAIT_MS) / 1000):
        while True:
            event = hosted.high_watermark_changed
            done, error = hosted.state.check_enough_replicas_reach_offset(
                required_offset, min_insync_replicas
            )
            if done or error != ErrorCode.NONE:
                return error
            if ctx.partitions.get(hosted.topic, hosted.partition) is not hosted:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER  # no longer hosted here
            await event.wait()
    return ErrorCode.REQUEST_TIMED_OUT


async def handle_produce(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    acks = body.acks
    image = ctx.sync_partitions()
    now_ms = ctx.clock_ms()
    # name -> [[index, error_code, base_offset, log_append_time_ms, log_start_offset, message,
    #           current_leader hint]]
    results: dict[str, list[list]] = {}
    waits: list[tuple[list, HostedPartition, int]] = []
    hinted: set[int] = set()  # leaders named in NOT_LEADER answers (v10+)
    for topic_data in body.topic_data:
        rows = results.setdefault(topic_data.name, [])
        for partition_data in topic_data.partition_data:
            index = partition_data.index
            if acks not in (-1, 0, 1):
                rows.append([index, ErrorCode.INVALID_REQUIRED_ACKS, -1, -1, -1, None, NO_HINT])
                continue
            try:
                hosted = ctx.partitions.leader(topic_data.name, index, image)
                if acks == -1:
                    hosted.state.check_enough_replicas_for_append(
                        hosted.log.config.min_insync_replicas
                    )
                records = partition_data.records
                if not records:
                    raise InvalidRecordError("a produce request needs one record batch")
                info = hosted.log.append_as_leader(records, hosted.leader_epoch, now_ms)
            except KafkaError as exc:
                hint = NO_HINT
                if exc.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and request.api_version >= 10:
                    hint = _current_leader(image, topic_data.name, index, hinted)
                rows.append([index, exc.error_code, -1, -1, -1, str(exc), hint])
                continue
            if not ctx.partitions.maybe_advance_high_watermark(hosted):
                hosted.signal_high_watermark()  # new data: wake follower long-polls
            row = [index, ErrorCode.NONE, info.first_offset, info.log_append_time_ms,
                   info.log_start_offset, None, NO_HINT]  # fmt: skip
            rows.append(row)
            if acks == -1:
                waits.append((row, hosted, info.last_offset + 1))
    for row, hosted, required_offset in waits:
        row[1] = await _wait_for_high_watermark(ctx, hosted, required_offset, body.timeout_ms)
        if row[1] == ErrorCode.NOT_LEADER_OR_FOLLOWER and request.api_version >= 10:
            row[6] = _current_leader(ctx.sync_partitions(), hosted.topic, hosted.partition, hinted)
    return R(
        responses=[
            R.TopicProduceResponse(
                name=name,
                partition_responses=[
                    R.PartitionProduceResponse(
                        index=index,
                        error_code=code,
                        base_offset=base_offset,
                        log_append_time_ms=append_time,
                        log_start_offset=log_start_offset,
                        error_message=message,
                        current_leader=hint,
                    )  # fmt: skip
                    for index, code, base_offset, append_time, log_start_offset, message, hint in rows
                ],
            )
            for name, rows in results.items()
        ],
        node_endpoints=_endpoints(ctx, hinted) if hinted else [],
    )


def _endpoints(ctx: BrokerContext, broker_ids: set[int]) -> list:
    """KIP-951's node_endpoints: where the hinted leaders listen (live ones only)."""
    return [
        R.NodeEndpoint(node_id=b, host=host, port=port, rack=rack)
        for b, host, port, rack in live_brokers(ctx.sync_partitions())
        if b in broker_ids
    ]


def has_error(body: object) -> bool:
    """True when any partition of a produce response carries an error (acks=0: close)."""
    return any(
        p.error_code != ErrorCode.NONE
        for t in body.responses  # type: ignore[attr-defined]
        for p in t.partition_responses
    )
