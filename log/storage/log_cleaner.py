"""LogCleaner: compacts the logs of one LogManager in the background (Kafka's LogCleaner).

One round (`clean_filthiest_log`), in three phases:

1. plan, on the caller's (trio) thread, instant: LogCleanerManager picks the dirtiest log
   (cleaner_manager.py: never past the last stable offset); the plan snapshots the segments
   below its first uncleanable offset (objects, paths, sizes), the last batch offsets of its
   active producers and the aborted transactions overlapping the range (its `.txnindex`).
2. clean, in a worker thread (`trio.to_thread.run_sync`): `build_cleaned_segments` opens its
   own file descriptors on the snapshotted segment files (never the active segment), builds
   the offset map over the dirty ones, cleans every segment below the map's end, groups the
   results by segment.bytes and writes one fsynced `<base>.log.cleaned` per group. It touches
   no UnifiedLog state, so appends, reads and fetches go on meanwhile.
3. commit, back on the trio thread, short: if the log still holds exactly the snapshotted
   segments, inactive and unchanged in size (no retention, truncation or deletion happened
   meanwhile), each `.cleaned` is renamed to `.swap` (the commit point) and
   `UnifiedLog.replace_segments` swaps the segment objects and builds their indexes from the
   cleaned spans; then the cleaner-offset-checkpoint file is rewritten. Otherwise the clean is
   aborted and its `.cleaned` files removed. The broker runs every log mutation on the trio
   thread, so the commit is atomic with respect to appends and reads.

`run` loops rounds, sleeping log.cleaner.backoff.ms when no log needs cleaning. A failing round
(a corrupt segment, a full disk) is logged and aborted; the log is retried after the backoff.
Memory: segments are read whole, one at a time; a clean holds one source segment, one cleaned
group (both bounded by segment.bytes) and the offset map (bounded by `max_offset_map_keys`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from log.common.errors import KafkaError
from log.common.files import fsync_directory
from log.storage.checkpoint_file import OffsetCheckpointFile
from log.storage.cleaner import (
    MAX_OFFSET_MAP_KEYS,
    BatchSpan,
    CleanedSegment,
    TransactionCleaning,
    build_offset_map,
    clean_batches,
    concatenate_group,
    fits_group,
)
from log.storage.cleaner_manager import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    CleanableLog,
    LogCleanerManager,
    LogToClean,
    TopicPartition,
)
from log.storage.cleaner_swap import (
    commit_cleaned_file,
    discard_cleaned_file,
    write_cleaned_file,
)
from log.storage.log import UnifiedLog
from log.storage.log_dir_failure_channel import LogDirFailureChannel
from log.storage.retention import SegmentSummary
from log.storage.segment import LogSegment

if TYPE_CHECKING:
    from collections.abc import Mapping

logger = logging.getLogger(__name__)

MIN_BACKOFF_MS = 10  # log.cleaner.backoff.ms=0 must not turn an idle cleaner into a busy loop


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """Broker-level cleaner settings (Kafka's names and defaults)."""

    enable: bool = True  # log.cleaner.enable
    backoff_ms: int = 15_000  # log.cleaner.backoff.ms: sleep when no log needs cleaning
    max_offset_map_keys: int = MAX_OFFSET_MAP_KEYS  # stands for log.cleaner.dedupe.buffer.size

    def __post_init__(self) -> None:
        if self.backoff_ms < 0:
            raise ValueError("log.cleaner.backoff.ms must be >= 0")
        if self.max_offset_map_keys < 1:
            raise ValueError("the offset map must hold at least one key")


@dataclass(frozen=True, slots=True)
class SourceSegment:
    """A snapshot of one segment to clean, taken on the log's thread."""

    segment: LogSegment
    base_offset: int
    next_offset: int
    size_bytes: int
    log_path: str


@dataclass(frozen=True, slots=True)
class CleanPlan:
    to_clean: LogToClean
    dir_path: str
    sources: tuple[SourceSegment, ...]  # every segment below the first uncleanable offset
    retained_batch_last_offsets: frozenset[int]
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int
    max_offset_map_keys: int
    aborted_txns: tuple[tuple[int, int], ...] = ()  # (producer id, first offset)


@dataclass(frozen=True, slots=True)
class CleanedGroup:
    sources: tuple[SourceSegment, ...]
    cleaned_path: str | None  # None: nothing of the group survived
    spans: tuple[BatchSpan, ...]


@dataclass(frozen=True, slots=True)
class CleanResult:
    end_offset: int  # the new first dirty offset
    groups: tuple[CleanedGroup, ...]
    bytes_before: int
    bytes_after: int


def cleanable_log(log: UnifiedLog) -> CleanableLog:
    segments = log.segments
    summaries = tuple(
        SegmentSummary(
            s.base_offset,
            segments[i + 1].base_offset if i + 1 < len(segments) else log.log_end_offset,
            s.size_bytes,
            s.max_timestamp_so_far,
        )
        for i, s in enumerate(segments)
    )
    return CleanableLog(
        segments=summaries,
        log_start_offset=log.log_start_offset,
        log_end_offset=log.log_end_offset,
        high_watermark=log.high_watermark,
        last_stable_offset=log.last_stable_offset,
        compact=log.config.compact,
        min_cleanable_dirty_ratio=log.config.min_cleanable_dirty_ratio,
        min_compaction_lag_ms=log.config.min_compaction_lag_ms,
        max_compaction_lag_ms=log.config.max_compaction_lag_ms,
        first_batch_timestamps_ms=tuple(
            -1 if s.first_batch_timestamp is None else s.first_batch_timestamp for s in segments
        ),
    )


def plan_clean(
    log: UnifiedLog, to_clean: LogToClean, now_ms: int, max_offset_map_keys: int
) -> CleanPlan:
    sources = tuple(
        SourceSegment(s, s.base_offset, s.next_offset, s.size_bytes, s.log_path)
        for s in log.segments[:-1]
        if s.base_offset < to_clean.first_uncleanable_offset
    )
    retained = frozenset(
        entry.last_data_offset
        for entry in log.producer_state_manager.active_producers.values()
        if entry.last_data_offset >= 0
    )
    aborted = tuple(
        (txn.producer_id, txn.first_offset)
        for txn in log.collect_aborted_transactions(
            log.log_start_offset, to_clean.first_uncleanable_offset
        )
    )
    return CleanPlan(
        to_clean,
        log.dir_path,
        sources,
        retained,
        now_ms,
        log.config.delete_retention_ms,
        log.config.segment_bytes,
        max_offset_map_keys,
        aborted,
    )


# -- phase 2: the worker thread -------------------------------------------------------------


def _read_source(source: SourceSegment) -> bytes:
    with open(source.log_path, "rb") as f:
        data = os.pread(f.fileno(), source.size_bytes, 0)
    if len(data) != source.size_bytes:
        raise OSError(f"{source.log_path} shrank during the clean")
    return data


def build_cleaned_segments(plan: CleanPlan) -> CleanResult:
    """Phase 2 (any thread): read, clean and group the plan's segments; write `.cleaned`
    files. Raises OSError / KafkaError when a file changed or is corrupt (the clean aborts).
    Streams: one source segment and one group (<= segment.bytes) in memory at a time."""
    to_clean = plan.to_clean
    dirty = [s for s in plan.sources if s.next_offset > to_clean.first_dirty_offset]
    offset_map = build_offset_map(
        ((s.base_offset, _read_source(s)) for s in dirty),
        to_clean.first_dirty_offset, to_clean.first_uncleanable_offset,
        plan.max_offset_map_keys, plan.aborted_txns,
    )  # fmt: skip
    txns = TransactionCleaning(list(plan.aborted_txns))
    by_base = {s.base_offset: s for s in plan.sources}
    groups: list[CleanedGroup] = []
    pending: list[CleanedSegment] = []
    bytes_after = 0

    def flush_pending() -> None:
        sources = tuple(by_base[c.base_offset] for c in pending)
        data, spans = concatenate_group(pending)
        path = write_cleaned_file(plan.dir_path, pending[0].base_offset, data) if data else None
        groups.append(CleanedGroup(sources, path, tuple(spans)))
        pending.clear()

    try:
        for source in plan.sources:
            if source.base_offset >= offset_map.end_offset:
                break
            records, spans = clean_batches(
                _read_source(source),
                offset_map,
                now_ms=plan.now_ms,
                delete_retention_ms=plan.delete_retention_ms,
                retained_batch_last_offsets=plan.retained_batch_last_offsets,
                txns=txns,
            )
            cleaned = CleanedSegment(source.base_offset, source.next_offset, records, tuple(spans))
            bytes_after += len(records)
            if pending and not fits_group(pending, cleaned, plan.segment_bytes):
                flush_pending()
            pending.append(cleaned)
        if pending:
            flush_pending()
    except BaseException:
        discard_groups(groups)
        raise
    return CleanResult(
        end_offset=offset_map.end_offset,
        groups=tuple(groups),
        bytes_before=sum(s.size_bytes for g in groups for s in g.sources),
        bytes_after=bytes_after,
    )


def discard_groups(groups: tuple[CleanedGroup, ...] | list[CleanedGroup]) -> None:
    for group in groups:
        if group.cleaned_path is not None:
            discard_cleaned_file(group.cleaned_path)


# -- phase 3: the commit --------------------------------------------------------------------


def still_cleanable(log: UnifiedLog, result: CleanResult) -> bool:
    """The log still holds every cleaned source segment, inactive and unchanged in size."""
    if log.is_closed:
        return False
    segments = log.segments
    positions = {id(s): i for i, s in enumerate(segments)}
    for group in result.groups:
        for source in group.sources:
            index = positions.get(id(source.segment))
            if index is None or index == len(segments) - 1:
                return False
            segment = segments[index]
            if segment.size_bytes != source.size_bytes or segment.next_offset != source.next_offset:
                return False
    return True


def commit_clean(log: UnifiedLog, result: CleanResult) -> bool:
    """Phase 3 (the log's thread): swap the cleaned segments in; False (and the `.cleaned`
    files removed) when the log changed under the clean."""
    if not still_cleanable(log, result):
        discard_groups(result.groups)
        return False
    swap_paths = [
        None if g.cleaned_path is None else commit_cleaned_file(g.cleaned_path, fsync=False)
        for g in result.groups
    ]
    fsync_directory(Path(log.dir_path))  # the commit point of every group at once
    for group, swap_path in zip(result.groups, swap_paths, strict=True):
        log.replace_segments([s.segment for s in group.sources], swap_path, group.spans)
    fsync_directory(Path(log.dir_path))
    return True


class LogCleaner:
    """The background cleaner of `logs()` (a LogManager's), checkpointing in `log_dir`."""

    def __init__(
        self,
        log_dir: str | os.PathLike[str],
        logs: Callable[[], Mapping[TopicPartition, UnifiedLog]],
        config: CleanerConfig | None = None,
        failure_channel: LogDirFailureChannel | None = None,
    ) -> None:
        self.config = config or CleanerConfig()
        self._logs = logs
        self.log_dir = Path(log_dir)
        # An I/O error while cleaning takes the directory offline, as any other (Kafka's).
        self.failure_channel = failure_channel or LogDirFailureChannel()
        self.checkpoint_file = OffsetCheckpointFile(Path(log_dir) / CLEANER_OFFSET_CHECKPOINT_FILE)
        self.manager = LogCleanerManager(self._read_checkpoints())
        self.cleaned_count = 0  # commits, for tests and metrics
        self.aborted_count = 0

    def _read_checkpoints(self) -> dict[TopicPartition, int]:
        try:
            return self.checkpoint_file.read()
        except KafkaError:  # a corrupt checkpoint: everything is dirty again, like Kafka
            return {}

    def write_checkpoints(self) -> None:
        logs = self._logs()
        self.manager.retain_logs(set(logs))
        self.checkpoint_file.write(self.manager.cleaner_checkpoints)

    def on_log_deleted(self, topic_partition: TopicPartition) -> None:
        """Prune the deleted log's checkpoint (an in-flight clean aborts at its commit)."""
        self.manager.remove_log(topic_partition)
        self.checkpoint_file.write(self.manager.cleaner_checkpoints)

    def plan(self, now_ms: int) -> CleanPlan | None:
        """Phase 1: the dirtiest log's plan (marked in progress), or None."""
        logs = self._logs()
        for topic_partition, log in logs.items():
            if log.truncated_to_offset is not None:
                self.manager.maybe_truncate_checkpoint(topic_partition, log.truncated_to_offset)
                log.truncated_to_offset = None
        cleanable = {tp: cleanable_log(log) for tp, log in logs.items() if log.config.compact}
        to_clean = self.manager.grab_filthiest_log(cleanable, now_ms)
        if to_clean is None:
            return None
        log = logs[to_clean.topic_partition]
        return plan_clean(log, to_clean, now_ms, self.config.max_offset_map_keys)

    def finish(self, plan: CleanPlan, result: CleanResult) -> bool:
        """Phase 3 plus the checkpoint; True when the clean was committed."""
        topic_partition = plan.to_clean.topic_partition
        log = self._logs().get(topic_partition)
        try:
            committed = log is not None and commit_clean(log, result)
        except (
            OSError,
            KafkaError,
        ) as exc:  # each group is swapped atomically: the log stays whole
            logger.exception("committing the clean of %s-%s failed", *topic_partition)
            self.failure_channel.report(self.log_dir, exc)
            committed = False
        if not committed:
            discard_groups(result.groups)
            self.manager.abort_cleaning(topic_partition)
            self.aborted_count += 1
            return False
        self.manager.done_cleaning(topic_partition, result.end_offset)
        self.write_checkpoints()
        self.cleaned_count += 1
        logger.info(
            "cleaned %s-%s up to offset %d: %d -> %d bytes",
            *topic_partition, result.end_offset, result.bytes_before, result.bytes_after,
        )  # fmt: skip
        return True

    def clean_once(self, now_ms: int) -> bool:
        """One synchronous round (tests, tools): True when a log was cleaned."""
        plan = self.plan(now_ms)
        if plan is None:
            return False
        try:
            result = build_cleaned_segments(plan)
        except BaseException:
            self.manager.abort_cleaning(plan.to_clean.topic_partition)
            raise
        return self.finish(plan, result)

    async def clean_filthiest_log(self, now_ms: int) -> bool:
        """One round with phase 2 in a worker thread; True when a log was cleaned."""
        plan = self.plan(now_ms)
        if plan is None:
            return False
        try:
            result = await trio.to_thread.run_sync(build_cleaned_segments, plan)
        except (OSError, KafkaError) as exc:  # a file changed under us, a full disk...
            logger.warning("cleaning %s-%s failed: %s", *plan.to_clean.topic_partition, exc)
            self.failure_channel.report(self.log_dir, exc)
            self.manager.abort_cleaning(plan.to_clean.topic_partition)
            self.aborted_count += 1
            return False
        except Exception:  # a bug must not stop the broker: log it, retry after the backoff
            logger.exception("cleaning %s-%s failed", *plan.to_clean.topic_partition)
            self.manager.abort_cleaning(plan.to_clean.topic_partition)
            self.aborted_count += 1
            return False
        except BaseException:
            self.manager.abort_cleaning(plan.to_clean.topic_partition)
            raise
        return self.finish(plan, result)

    async def run(
        self, clock_ms: Callable[[], int], *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Clean until cancelled; sleeps log.cleaner.backoff.ms whenever nothing is dirty."""
        task_status.started()
        while True:
            if not await self.clean_filthiest_log(clock_ms()):
                await trio.sleep(max(self.config.backoff_ms, MIN_BACKOFF_MS) / 1000)
            else:
                await trio.sleep(0)  # let appends in between rounds
