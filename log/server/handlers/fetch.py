"""Fetch: read record batches from led partitions up to the high watermark, long-polling.

Per partition: unknown -> UNKNOWN_TOPIC_OR_PARTITION; not the leader -> NOT_LEADER_OR_FOLLOWER;
current_leader_epoch older/newer than ours -> FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH;
fetch_offset outside [log_start_offset, log_end_offset] -> OFFSET_OUT_OF_RANGE. Consumers read
below the high watermark (read_committed is the same: no transactions yet); replica fetches
(replica_id >= 0) are checked by `PartitionState.validate_fetch` (the replica must be a follower
of ours in the same leader epoch), read to the log end offset, and then recorded
(`update_follower_fetch_state`: the follower's log end offset is its fetch offset), which may
move the high watermark -- waking acks=all produce requests and consumer long-polls -- and may
propose an ISR expansion (`IsrManager.maybe_expand`). The stored file bytes go into the response as they are: the connection
writes them with a vectored send, no copy, no re-encoding.

Sizes: each partition gets at most partition_max_bytes and the response at most max_bytes,
except that the first batch found is returned whole even if larger (progress, KIP-74). Which
partitions get the budget first: the connection's `FetchFillOrder` (least recently fed first),
so no partition waits behind others whatever order the client sends.

Long poll: while fewer than min_bytes are available, no partition had an error and max_wait_ms
has not passed, wait on the fetched partitions' `high_watermark_changed` events -- an append or
a HW move wakes us at once -- and read again.

Fetch sessions (KIP-227): we never create one. session_id 0 in the response means "no session",
so clients keep sending full fetches (kafka-python does; librdkafka is always sessionless); a
request naming a session id we never issued gets FETCH_SESSION_ID_NOT_FOUND.

Reads run inline: a read is one pread of at most the requested bytes from the page cache.
"""

from __future__ import annotations

from typing import Any

import trio

from log.protocol.connection import Request
from log.protocol.errors import ErrorCode, KafkaError
from log.protocol.fetch import FETCH_RESPONSE
from log.replication.fetch_fill_order import FetchFillOrder
from log.server.handlers.context import BrokerContext
from log.server.partitions import HostedPartition

R = FETCH_RESPONSE.cls
MAX_WAIT_MS = 30_000  # a bound on one long poll, whatever the client asks


def _read_all(
    ctx: BrokerContext, body: object, fill_order: FetchFillOrder
) -> tuple[list, int, bool, list[HostedPartition]]:
    """One pass over the request: (topic responses, bytes read, any error, partitions read).

    Partitions are read in the connection's fair order (`FetchFillOrder`), each with what is
    left of max_bytes; the response lists them in request order."""
    image = ctx.sync_partitions()
    replica_id = body.replica_id  # type: ignore[attr-defined]
    is_replica = replica_id >= 0
    now_ms = ctx.clock_ms()
    any_error = False
    hosted_list: list[HostedPartition] = []

    def read(index: int, budget_bytes: int, first: bool) -> tuple[object, int]:
        nonlocal any_error
        topic, fp = requested[index]
        try:
            hosted = ctx.partitions.leader(topic, fp.partition, image)
            if is_replica:
                hosted.state.validate_fetch(replica_id, fp.fetch_offset, fp.current_leader_epoch)
            else:
                hosted.check_leader_epoch(fp.current_leader_epoch)
            log = hosted.log
            info = log.read(
                fp.fetch_offset,
                min(max(fp.partition_max_bytes, 0), budget_bytes),
                upper_bound_offset=None if is_replica else log.high_watermark,
                min_one_batch=first,
            )
            if is_replica:
                _record_follower_fetch(ctx, image, hosted, replica_id, fp, now_ms)
            high_watermark = log.high_watermark
        except KafkaError as exc:
            any_error = True
            return R.PartitionData(
                partition_index=fp.partition, error_code=exc.error_code,
                high_watermark=-1, records=b"",
            ), 0  # fmt: skip
        hosted_list.append(hosted)
        return R.PartitionData(
            partition_index=fp.partition,
            error_code=0,
            high_watermark=high_watermark,
            last_stable_offset=high_watermark,
            log_start_offset=log.log_start_offset,
            aborted_transactions=None,
            records=info.records,
        ), len(info.records)

    requested: list[tuple[str, Any]] = [
        (t.topic, fp)
        for t in body.topics  # type: ignore[attr-defined]
        for fp in t.partitions
    ]
    keys = [(topic, fp.partition) for topic, fp in requested]
    results, total_bytes = fill_order.fill(keys, body.max_bytes, read)  # type: ignore[attr-defined]
    topics = []
    position = 0
    for fetch_topic in body.topics:  # type: ignore[attr-defined]
        count = len(fetch_topic.partitions)
        partitions = results[position : position + count]
        position += count
        topics.append(R.FetchableTopicResponse(topic=fetch_topic.topic, partitions=partitions))
    return topics, total_bytes, any_error, hosted_list


def _record_follower_fetch(
    ctx: BrokerContext,
    image: object,
    hosted: HostedPartition,
    replica_id: int,
    fp: object,
    now_ms: int,
) -> None:
    """The follower's log end offset is its fetch offset: maybe move the HW, maybe expand."""
    registration = image.brokers.get(replica_id)  # type: ignore[attr-defined]
    broker_epoch = registration.broker_epoch if registration is not None else -1
    moved = hosted.state.update_follower_fetch_state(
        replica_id,
        fp.fetch_offset,  # type: ignore[attr-defined]
        fp.log_start_offset,  # type: ignore[attr-defined]
        now_ms,
        broker_epoch,
    )
    if moved:
        hosted.signal_high_watermark()
    if ctx.isr_manager is not None:
        ctx.isr_manager.maybe_expand(hosted, replica_id)


async def _wait_for_any(hosted_list: list[HostedPartition], timeout_ms: int) -> None:
    """Return when any partition's high watermark moves, or after `timeout_ms`."""
    woken = trio.Event()
    for hosted in hosted_list:
        hosted.fetch_waiters.add(woken)
    try:
        with trio.move_on_after(min(max(timeout_ms, 0), MAX_WAIT_MS) / 1000):
            await woken.wait()
    finally:
        for hosted in hosted_list:
            hosted.fetch_waiters.discard(woken)


async def handle_fetch(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    if request.api_version >= 7:
        if body.session_id != 0:
            return R(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[])
        if body.session_epoch not in (-1, 0):
            return R(error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id=0, responses=[])
    fill_order = request.connection_state.get("fetch_fill_order")
    if fill_order is None:
        fill_order = request.connection_state["fetch_fill_order"] = FetchFillOrder()
    topics, total_bytes, any_error, hosted_list = _read_all(ctx, body, fill_order)
    deadline = trio.current_time() + min(max(body.max_wait_ms, 0), MAX_WAIT_MS) / 1000
    while total_bytes < body.min_bytes and not any_error and trio.current_time() < deadline:
        await _wait_for_any(hosted_list, (deadline - trio.current_time()) * 1000)
        topics, total_bytes, any_error, hosted_list = _read_all(ctx, body, fill_order)
    return R(error_code=0, session_id=0, responses=topics)
