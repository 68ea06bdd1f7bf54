"""LogCleanerManager: which log to clean next, and up to where. Sans-IO.

Kafka's vocabulary. Per compacted log (cleanup.policy contains compact):

    log start offset .. first dirty offset .. first uncleanable offset .. log end offset
    |<--- clean (cleaned before) --->|<------ dirty ------>|<-- never touched -->|

* first dirty offset: the cleaner-offset-checkpoint entry (where the previous clean ended),
  clamped to the log start offset; reset to the log start when it lies past the log end (the
  log was truncated or recreated).
* first uncleanable offset: the base offset of the first segment that is the active segment,
  or reaches the high watermark / last stable offset (only committed, non-transactional-pending
  data is cleaned: a later key that might still be truncated must not erase an earlier one),
  or holds a record younger than min.compaction.lag.ms. Always a segment boundary: the
  cleaner rewrites whole segments.
* dirty ratio = dirty bytes / (clean + dirty bytes), over the segments below the first
  uncleanable offset. `grab_filthiest_log` picks the log with the highest ratio among those at
  or above their min.cleanable.dirty.ratio -- or whose oldest dirty segment began more than
  max.compaction.lag.ms ago (Kafka's "needs compaction now", whatever the ratio) -- and not
  already being cleaned, and marks it in progress; `done_cleaning` records the new
  checkpoint, `abort_cleaning` just releases it. (Kafka also rolls an active segment older
  than max.compaction.lag.ms; we do not: it waits for segment.ms / segment.bytes.)

`cleaner_checkpoints` is what the cleaner-offset-checkpoint file holds (log/storage/
checkpoint_file.py, the format of the other offset checkpoints); the driver writes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from log.storage.retention import SegmentSummary

CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class LogToClean:
    topic_partition: TopicPartition
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int

    @property
    def cleanable_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def cleanable_offsets(
    segments: Sequence[SegmentSummary],
    *,
    log_start_offset: int,
    log_end_offset: int,
    high_watermark: int,
    last_stable_offset: int | None,
    checkpoint_offset: int | None,
    min_compaction_lag_ms: int,
    now_ms: int,
) -> tuple[int, int]:
    """(first dirty offset, first uncleanable offset) of a log's `segments` (the last one is
    the active segment). Equal offsets mean nothing is dirty."""
    assert segments
    first_dirty = log_start_offset if checkpoint_offset is None else checkpoint_offset
    if first_dirty < log_start_offset or first_dirty > log_end_offset:
        first_dirty = log_start_offset
    stable = (
        high_watermark if last_stable_offset is None else min(high_watermark, last_stable_offset)
    )
    first_uncleanable = segments[-1].base_offset
    for segment in segments[:-1]:
        too_new = (
            min_compaction_lag_ms > 0
            and segment.largest_timestamp_ms > now_ms - min_compaction_lag_ms
        )
        if segment.upper_bound_offset > stable or too_new:
            first_uncleanable = segment.base_offset
            break
    return first_dirty, max(first_dirty, first_uncleanable)


def log_to_clean(
    topic_partition: TopicPartition,
    segments: Sequence[SegmentSummary],
    first_dirty_offset: int,
    first_uncleanable_offset: int,
) -> LogToClean:
    clean_bytes = dirty_bytes = 0
    for segment in segments:
        if segment.base_offset >= first_uncleanable_offset:
            break
        if segment.upper_bound_offset <= first_dirty_offset:
            clean_bytes += segment.size_bytes
        else:
            dirty_bytes += segment.size_bytes
    return LogToClean(
        topic_partition, first_dirty_offset, first_uncleanable_offset, clean_bytes, dirty_bytes
    )


def needs_compaction_now(log: CleanableLog, first_dirty_offset: int, now_ms: int) -> bool:
    """The first dirty segment began more than max.compaction.lag.ms ago."""
    for index, segment in enumerate(log.segments[:-1]):
        if segment.upper_bound_offset > first_dirty_offset:
            if index >= len(log.first_batch_timestamps_ms):
                return False
            first_timestamp_ms = log.first_batch_timestamps_ms[index]
            return 0 <= first_timestamp_ms < now_ms - log.max_compaction_lag_ms
    return False


@dataclass(frozen=True, slots=True)
class CleanableLog:
    """What the manager needs of one log (built by the driver from a UnifiedLog)."""

    segments: tuple[SegmentSummary, ...]
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    last_stable_offset: int | None
    compact: bool
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int = (1 << 63) - 1
    # per segment (aligned with `segments`): its first batch's timestamp, -1 when empty
    first_batch_timestamps_ms: tuple[int, ...] = ()


class LogCleanerManager:
    """Checkpoints and in-progress state of the logs of one log directory."""

    def __init__(self, cleaner_checkpoints: Mapping[TopicPartition, int] | None = None) -> None:
        self.cleaner_checkpoints: dict[TopicPartition, int] = dict(cleaner_checkpoints or {})
        self.in_progress: set[TopicPartition] = set()

    def cleanable(
        self, topic_partition: TopicPartition, log: CleanableLog, now_ms: int
    ) -> LogToClean:
        first_dirty, first_uncleanable = cleanable_offsets(
            log.segments,
            log_start_offset=log.log_start_offset,
            log_end_offset=log.log_end_offset,
            high_watermark=log.high_watermark,
            last_stable_offset=log.last_stable_offset,
            checkpoint_offset=self.cleaner_checkpoints.get(topic_partition),
            min_compaction_lag_ms=log.min_compaction_lag_ms,
            now_ms=now_ms,
        )
        return log_to_clean(topic_partition, log.segments, first_dirty, first_uncleanable)

    def grab_filthiest_log(
        self, logs: Mapping[TopicPartition, CleanableLog], now_ms: int
    ) -> LogToClean | None:
        """The dirtiest compacted log at or above its min.cleanable.dirty.ratio, now in
        progress; None when no log needs cleaning."""
        best: LogToClean | None = None
        for topic_partition, log in logs.items():
            if not log.compact or topic_partition in self.in_progress:
                continue
            candidate = self.cleanable(topic_partition, log, now_ms)
            if candidate.dirty_bytes == 0:
                continue
            overdue = needs_compaction_now(log, candidate.first_dirty_offset, now_ms)
            if candidate.cleanable_ratio < log.min_cleanable_dirty_ratio and not overdue:
                continue
            if best is None or candidate.cleanable_ratio > best.cleanable_ratio:
                best = candidate
        if best is not None:
            self.in_progress.add(best.topic_partition)
        return best

    def done_cleaning(self, topic_partition: TopicPartition, end_offset: int) -> None:
        """The clean committed everything below `end_offset`: the new first dirty offset."""
        self.in_progress.discard(topic_partition)
        self.cleaner_checkpoints[topic_partition] = end_offset

    def abort_cleaning(self, topic_partition: TopicPartition) -> None:
        self.in_progress.discard(topic_partition)

    def maybe_truncate_checkpoint(self, topic_partition: TopicPartition, offset: int) -> None:
        """The log was truncated to `offset`: data re-appended above it is dirty again."""
        checkpoint = self.cleaner_checkpoints.get(topic_partition)
        if checkpoint is not None and checkpoint > offset:
            self.cleaner_checkpoints[topic_partition] = offset

    def remove_log(self, topic_partition: TopicPartition) -> None:
        """The log was deleted: forget its checkpoint (pruned from the file on next write)."""
        self.in_progress.discard(topic_partition)
        self.cleaner_checkpoints.pop(topic_partition, None)

    def retain_logs(self, topic_partitions: set[TopicPartition]) -> None:
        """At startup: drop checkpoints of logs this directory no longer holds."""
        for topic_partition in list(self.cleaner_checkpoints):
            if topic_partition not in topic_partitions:
                del self.cleaner_checkpoints[topic_partition]
