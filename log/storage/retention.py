"""Pure decisions on a partition log's segments: when to roll, which segments retention deletes.

Both take plain numbers (sizes, offsets, timestamps, `now_ms`) so they are tested without files.

Roll (Kafka's `LogSegment.shouldRoll`): the active segment is closed and a new one started at the
next offset when the incoming records would push it past `segment.bytes`; when it is non-empty
and older than `segment.ms` (minus jitter) -- age measured from its first batch's timestamp to the
incoming records' max timestamp, or from its creation when batches carry no timestamp; when
either index is full; or when the incoming last offset no longer fits the segment's relative
offset range.

Retention (Kafka's `deletableSegments`): walking from the oldest segment, a segment is deletable
while it lies wholly below the high watermark (its upper bound -- the next segment's base offset,
or the log end offset for the active one -- is <= high_watermark) and one of the rules holds:
its largest timestamp is older than `retention.ms`; the log still exceeds `retention.bytes`
without it; or the next segment starts at or below the log start offset. The walk stops at the
first segment that is not deletable, and an empty active segment is never deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from log.storage.config import LogConfig
from log.storage.segment import MAX_RELATIVE_OFFSET


@dataclass(frozen=True, slots=True)
class SegmentSummary:
    base_offset: int
    upper_bound_offset: int  # next segment's base offset, or the log end offset if active
    size_bytes: int
    largest_timestamp_ms: int


def roll_reason(
    config: LogConfig,
    *,
    segment_base_offset: int,
    segment_size_bytes: int,
    segment_first_batch_timestamp_ms: int | None,
    segment_created_ms: int,
    index_full: bool,
    records_size_bytes: int,
    records_max_timestamp_ms: int,
    records_last_offset: int,
    now_ms: int,
) -> str | None:
    """Why the active segment must roll before these records, or None when they fit."""
    if segment_size_bytes > config.segment_bytes - records_size_bytes:
        return "segment.bytes"
    if segment_size_bytes > 0:
        if segment_first_batch_timestamp_ms is not None and segment_first_batch_timestamp_ms >= 0:
            waited_ms = records_max_timestamp_ms - segment_first_batch_timestamp_ms
        else:
            waited_ms = now_ms - segment_created_ms
        if waited_ms > config.segment_ms - config.segment_jitter_ms:
            return "segment.ms"
    if index_full:
        return "segment.index.bytes"
    if records_last_offset - segment_base_offset > MAX_RELATIVE_OFFSET:
        return "relative offset overflow"
    return None


def deletable_segment_count(
    segments: Sequence[SegmentSummary],
    *,
    high_watermark: int,
    log_start_offset: int,
    retention_ms: int,
    retention_bytes: int,
    now_ms: int,
) -> tuple[int, str | None]:
    """How many of the oldest `segments` to delete, and the first rule that applied."""
    total_bytes = sum(s.size_bytes for s in segments)
    excess_bytes = total_bytes - retention_bytes if retention_bytes >= 0 else 0
    count = 0
    reason: str | None = None
    for index, segment in enumerate(segments):
        is_last = index == len(segments) - 1
        if is_last and segment.size_bytes == 0:
            break
        if segment.upper_bound_offset > high_watermark:
            break
        rule = None
        if not is_last and segments[index + 1].base_offset <= log_start_offset:
            rule = "log start offset"
        elif retention_ms >= 0 and now_ms - segment.largest_timestamp_ms > retention_ms:
            rule = "retention.ms"
        elif retention_bytes >= 0 and excess_bytes - segment.size_bytes >= 0:
            rule = "retention.bytes"
        if rule is None:
            break
        excess_bytes -= segment.size_bytes
        reason = reason or rule
        count += 1
    return count, reason
