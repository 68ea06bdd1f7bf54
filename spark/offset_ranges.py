"""Offset-range planning for reads: plain functions over offsets (no I/O).

The driver resolves, for every topic-partition, the log start offset (`earliest`) and the high
watermark (`latest`) with ListOffsets, then:

1. `resolve_ranges`: startingOffsets / endingOffsets (-2 earliest, -1 latest, or an offset)
   become `[start, end)`; a start below the log start offset means retention deleted data:
   an error with failOnDataLoss=true, else the range starts at the log start offset; an end
   past the high watermark is cut to it (reads stop at the high watermark).
2. `narrow_ranges`: pushed-down filters on partition / offset (and a timestamp lower bound,
   already turned into an offset) shrink or drop ranges before anything is fetched.
3. `split_ranges`: spark-sql-kafka's KafkaOffsetRangeCalculator: with minPartitions larger
   than the number of ranges, each range gets round(size / total * minPartitions) pieces
   (at least one); the last piece takes the remainder. Then, with maxRecordsPerPartition,
   a piece larger than that is cut into ceil(size / max) pieces of (near) equal size. Empty ranges are
   dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from spark.options import EARLIEST, LATEST


class QuorumLogDataLossError(RuntimeError):
    """Planned offsets were deleted by retention (failOnDataLoss=true)."""


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One Spark input partition: records [start_offset, end_offset) of one log partition."""

    topic: str
    partition: int
    start_offset: int
    end_offset: int

    @property
    def size(self) -> int:
        return max(0, self.end_offset - self.start_offset)


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    log_start_offset: int
    high_watermark: int


def _pick(spec: int | Mapping[str, Mapping[int, int]], topic: str, partition: int, default: int):
    if isinstance(spec, int):
        return spec
    return spec.get(topic, {}).get(partition, default)


def resolve_ranges(
    offsets: Mapping[tuple[str, int], PartitionOffsets],
    starting: int | Mapping[str, Mapping[int, int]],
    ending: int | Mapping[str, Mapping[int, int]],
    fail_on_data_loss: bool,
) -> list[OffsetRange]:
    ranges = []
    for (topic, partition), known in sorted(offsets.items()):
        start = _pick(starting, topic, partition, EARLIEST)
        end = _pick(ending, topic, partition, LATEST)
        start = {EARLIEST: known.log_start_offset, LATEST: known.high_watermark}.get(start, start)
        end = known.high_watermark if end == LATEST else min(end, known.high_watermark)
        if start < known.log_start_offset:
            if fail_on_data_loss:
                raise QuorumLogDataLossError(
                    f"{topic}-{partition}: offsets {start}..{known.log_start_offset - 1} were "
                    f"deleted (the log now starts at {known.log_start_offset}); set "
                    f"failOnDataLoss=false to skip to the log start"
                )
            start = known.log_start_offset
        if start > end:
            if start > known.high_watermark:
                raise ValueError(
                    f"{topic}-{partition}: starting offset {start} is past the high "
                    f"watermark {known.high_watermark}"
                )
            raise ValueError(f"{topic}-{partition}: starting offset {start} > ending {end}")
        ranges.append(OffsetRange(topic, partition, start, end))
    return ranges


@dataclass
class OffsetBounds:
    """What the pushed filters allow: partitions (None = all) and offsets [low, high)."""

    partitions: set[int] | None = None
    low_partition: int = 0
    high_partition: int = 2**31 - 1  # inclusive
    low_offset: int = 0
    high_offset: int = 2**63 - 1
    low_timestamp_ms: int | None = None  # records with timestamp >= this

    def restrict_partitions(self, allowed: Iterable[int]) -> None:
        allowed = set(allowed)
        self.partitions = allowed if self.partitions is None else self.partitions & allowed


def narrow_ranges(
    ranges: list[OffsetRange],
    bounds: OffsetBounds,
    timestamp_offsets: Mapping[tuple[str, int], int] | None = None,
) -> list[OffsetRange]:
    """Apply the pushed bounds; `timestamp_offsets` maps a partition to the first offset whose
    timestamp >= bounds.low_timestamp_ms (-1: no such record, nothing matches)."""
    out = []
    for r in ranges:
        if bounds.partitions is not None and r.partition not in bounds.partitions:
            continue
        if not bounds.low_partition <= r.partition <= bounds.high_partition:
            continue
        start = max(r.start_offset, bounds.low_offset)
        end = min(r.end_offset, bounds.high_offset)
        if timestamp_offsets is not None:
            first = timestamp_offsets.get((r.topic, r.partition), -1)
            if first < 0:
                continue
            start = max(start, first)
        if start < end:
            out.append(OffsetRange(r.topic, r.partition, start, end))
    return out


def split_ranges(
    ranges: list[OffsetRange], min_partitions: int | None, max_records: int | None = None
) -> list[OffsetRange]:
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is not None and min_partitions > len(ranges):
        total = sum(r.size for r in ranges)
        ranges = [
            piece
            for r in ranges
            for piece in _cut(r, max(1, round(r.size / total * min_partitions)))
            if piece.size > 0  # more pieces than records: the empty ones go
        ]
    if max_records is not None:
        ranges = [piece for r in ranges for piece in _cut_even(r, -(-r.size // max_records))]
    return [r for r in ranges if r.size > 0]


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """`r` in `parts` pieces of size // parts records, the last taking the remainder."""
    if parts <= 1:
        return [r]
    step = r.size // parts
    starts = [r.start_offset + i * step for i in range(parts)]
    ends = starts[1:] + [r.end_offset]
    return [OffsetRange(r.topic, r.partition, s, e) for s, e in zip(starts, ends, strict=True)]


def _cut_even(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """`r` in `parts` pieces whose sizes differ by at most one (none above ceil(size/parts))."""
    if parts <= 1:
        return [r]
    bounds = [r.start_offset + i * r.size // parts for i in range(parts + 1)]
    return [
        OffsetRange(r.topic, r.partition, s, e) for s, e in zip(bounds, bounds[1:], strict=False)
    ]
