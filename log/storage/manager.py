"""LogManager: every partition log in one log directory, its recovery and its checkpoints.

Directory layout (Kafka's)::

    <log_dir>/
        .kafka_cleanshutdown               present only between a clean shutdown and restart
        recovery-point-offset-checkpoint   topic partition offset: everything below is fsynced
        replication-offset-checkpoint      topic partition high_watermark
        log-start-offset-checkpoint        topic partition log_start_offset
        cleaner-offset-checkpoint          topic partition first dirty offset (log_cleaner.py)
        <topic>-<partition>/               one UnifiedLog (segments, snapshots, epoch cache)
        <topic>-<partition>.<hex>-delete/  a log being deleted (removed at startup)

Startup: read the three checkpoints, remember whether the clean-shutdown marker is present,
load every partition directory (`load_log`: unclean -> recover segments after the recovery
point; clean -> trust the files, lightly check the last segment), then delete the marker and
rewrite the checkpoints. Shutdown: flush and close every log, write the checkpoints, then the
marker -- in that order, so a marker always vouches for flushed files.

Periodic work is driven by `tick(now_ms)` from the broker's runtime (no threads here): retention
every `log.retention.check.interval.ms`, time-based flush (`flush.ms`), high-watermark and
recovery-point checkpoints, and producer-id expiration, each at Kafka's default interval. The
periodic checkpoints are only prepared by `tick` (their content taken then); the runtime takes
them (`take_checkpoint_writes`) and runs `write_checkpoints` in a worker thread: each is two
fsyncs (the file, the directory), ~10 ms and up to ~50 ms measured on the test box's disk, which
inline stalled every request of the node every 5 s. Kafka writes them from scheduler threads.
Log compaction runs in the background: `cleaner` (a LogCleaner, None when log.cleaner.enable is
false) is started by the broker runtime in its nursery (`cleaner.run`); `delete_log` prunes its
checkpoint.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from log.common.errors import InvalidTopicError, KafkaStorageError
from log.storage.checkpoint_file import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from log.storage.clean_shutdown import (
    forget_io_errors,
    has_clean_shutdown_marker,
    io_error_in,
    read_clean_shutdown_broker_epoch,
    remove_clean_shutdown_marker,
    write_clean_shutdown_marker,
)
from log.storage.config import LogConfig
from log.storage.log import UnifiedLog
from log.storage.log_cleaner import CleanerConfig, LogCleaner
from log.storage.log_dir_failure_channel import LogDirFailureChannel
from log.storage.log_loader import load_log

logger = logging.getLogger(__name__)

DELETE_DIR_SUFFIX = "-delete"
# A periodic job (a checkpoint, a flush) that failed for want of descriptors or memory is
# retried at its next interval: nothing was half-written (checkpoints are written to a temporary
# file and renamed; unwritten index entries stay pending). Any other error takes the directory
# offline (log_dir_failure_channel.py): an I/O error is never retried into apparent success.
RETENTION_CHECK_INTERVAL_MS = 300_000  # log.retention.check.interval.ms
FLUSH_CHECK_INTERVAL_MS = 1_000  # how often flush.ms is evaluated (bounded by INT64 flush.ms)
RECOVERY_POINT_CHECKPOINT_INTERVAL_MS = 60_000  # log.flush.offset.checkpoint.interval.ms
HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS = 5_000  # replica.high.watermark.checkpoint.interval.ms
LOG_START_OFFSET_CHECKPOINT_INTERVAL_MS = 60_000  # log.flush.start.offset.checkpoint.interval.ms
PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS = 600_000  # producer.id.expiration.check.interval.ms
MAX_TOPIC_NAME_LENGTH = 249  # Kafka's limit, so `<topic>-<partition>` fits a file name

TopicPartition = tuple[str, int]
# on_log_loaded(topic, partition, elapsed_ms, index, total): partition `index` (1-based) of
# `total` is loaded; for recovery progress and the node's per-partition recovery log line.
OnLogLoaded = Callable[[str, int, float, int, int], None]


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> TopicPartition | None:
    """`<topic>-<partition>` -> (topic, partition); None for anything else."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def check_topic_name(topic: str) -> None:
    if not topic or topic in (".", "..") or len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(f"invalid topic name {topic!r}")
    if not all(c.isascii() and (c.isalnum() or c in "._-") for c in topic):
        raise InvalidTopicError(f"topic name {topic!r} has characters outside [a-zA-Z0-9._-]")


class LogManager:
    """The logs of one log directory (one per node)."""

    def __init__(
        self,
        log_dir: str | Path,
        default_config: LogConfig | None = None,
        *,
        now_ms: int = 0,
        topic_configs: Mapping[str, LogConfig] | None = None,
        on_log_loaded: OnLogLoaded | None = None,
        cleaner_config: CleanerConfig | None = None,
        failure_channel: LogDirFailureChannel | None = None,
    ) -> None:
        self.log_dir = Path(log_dir)
        self.failure_channel = failure_channel or LogDirFailureChannel()
        self._on_log_loaded = on_log_loaded
        self.default_config = default_config or LogConfig()
        self.topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self._logs: dict[TopicPartition, UnifiedLog] = {}
        self._recovery_point_checkpoint = OffsetCheckpointFile(
            self.log_dir / RECOVERY_POINT_CHECKPOINT_FILE
        )
        self._high_watermark_checkpoint = OffsetCheckpointFile(
            self.log_dir / REPLICATION_OFFSET_CHECKPOINT_FILE
        )
        self._log_start_offset_checkpoint = OffsetCheckpointFile(
            self.log_dir / LOG_START_OFFSET_CHECKPOINT_FILE
        )
        self._next_run_ms: dict[str, int] = {}
        self._checkpoint_writes: list[tuple[str, Callable[[], None]]] = []  # prepared by tick
        self.is_shut_down = False
        self.had_clean_shutdown = False
        # Nothing at all in the directory at start: a first start, or a wiped disk (KIP-966:
        # the broker then registers as holding none of the data it may have had).
        self.log_dir_was_empty = False
        # The broker epoch the last process had at its clean shutdown (-1: none or unknown).
        self.previous_broker_epoch = -1
        self._load_logs(now_ms)
        cleaner_config = cleaner_config or CleanerConfig()
        self.cleaner: LogCleaner | None = None
        if cleaner_config.enable:
            self.cleaner = LogCleaner(
                self.log_dir, lambda: self._logs, cleaner_config, self.failure_channel
            )
            self.cleaner.write_checkpoints()  # prunes logs this directory no longer holds

    # -- startup ------------------------------------------------------------------------------

    @staticmethod
    def _read_checkpoint(checkpoint: OffsetCheckpointFile) -> dict[TopicPartition, int]:
        """A corrupt checkpoint is ignored (recovery then starts from zero), like Kafka."""
        try:
            return checkpoint.read()
        except KafkaStorageError:
            return {}

    def _load_logs(self, now_ms: int) -> None:
        self.log_dir_was_empty = not self.log_dir.is_dir() or not any(self.log_dir.iterdir())
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.had_clean_shutdown = has_clean_shutdown_marker(self.log_dir)
        if self.had_clean_shutdown:
            self.previous_broker_epoch = read_clean_shutdown_broker_epoch(self.log_dir)
        recovery_points = self._read_checkpoint(self._recovery_point_checkpoint)
        high_watermarks = self._read_checkpoint(self._high_watermark_checkpoint)
        log_start_offsets = self._read_checkpoint(self._log_start_offset_checkpoint)
        entries = sorted(os.listdir(self.log_dir))
        total = sum(
            1 for e in entries if parse_partition_dir_name(e) and (self.log_dir / e).is_dir()
        )
        for entry in entries:
            path = self.log_dir / entry
            if not path.is_dir():
                continue
            if entry.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)
                continue
            topic_partition = parse_partition_dir_name(entry)
            if topic_partition is None:
                continue
            started_s = time.perf_counter()
            self._logs[topic_partition] = load_log(
                str(path),
                self.config_for(topic_partition[0]),
                log_start_offset=log_start_offsets.get(topic_partition, 0),
                recovery_point=recovery_points.get(topic_partition, 0),
                high_watermark=high_watermarks.get(topic_partition, 0),
                had_clean_shutdown=self.had_clean_shutdown,
                now_ms=now_ms,
            )
            if self._on_log_loaded is not None:
                elapsed_ms = (time.perf_counter() - started_s) * 1000
                self._on_log_loaded(*topic_partition, elapsed_ms, len(self._logs), total)
        remove_clean_shutdown_marker(self.log_dir)
        forget_io_errors(self.log_dir)  # loaded and recovered: what was noted is dealt with
        self.checkpoint_recovery_points()
        self.checkpoint_high_watermarks()
        self.checkpoint_log_start_offsets()
        self._schedule(now_ms)

    def config_for(self, topic: str) -> LogConfig:
        return self.topic_configs.get(topic, self.default_config)

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        """AlterConfigs: new logs and every existing partition of `topic` use `config`."""
        self.topic_configs[topic] = config
        for (log_topic, _), log in self._logs.items():
            if log_topic == topic:
                log.update_config(config)

    # -- logs ---------------------------------------------------------------------------------

    @property
    def logs(self) -> dict[TopicPartition, UnifiedLog]:
        return dict(self._logs)

    def get_log(self, topic: str, partition: int) -> UnifiedLog | None:
        return self._logs.get((topic, partition))

    def get_or_create_log(
        self, topic: str, partition: int, config: LogConfig | None = None, now_ms: int = 0
    ) -> UnifiedLog:
        """The partition's log, created empty (at offset 0) if this node has none."""
        assert not self.is_shut_down
        key = (topic, partition)
        existing = self._logs.get(key)
        if existing is not None:
            return existing
        if config is not None:
            self.topic_configs[topic] = config
        log = self._open_log(topic, partition, self.config_for(topic), now_ms)
        self._logs[key] = log
        return log

    def _open_log(self, topic: str, partition: int, config: LogConfig, now_ms: int) -> UnifiedLog:
        check_topic_name(topic)
        if partition < 0:
            raise InvalidTopicError(f"negative partition {partition}")
        return load_log(
            str(self.log_dir / partition_dir_name(topic, partition)),
            config,
            had_clean_shutdown=True,
            now_ms=now_ms,
        )

    def open_logs(
        self, wanted: Sequence[tuple[str, int, LogConfig]], now_ms: int
    ) -> list[tuple[TopicPartition, LogConfig, UnifiedLog]]:
        """Open (create) each `(topic, partition, config)`'s log without adding it to this
        manager: safe in a worker thread while the event loop uses the manager, as long as
        nothing else opens the same partitions meanwhile. `adopt_logs` adds them (creating a
        topic's thousand logs costs ~0.5 ms each, too long for the event loop). A partition
        that fails is left out: `get_or_create_log` meets the error again where it is
        handled."""
        opened = []
        for topic, partition, config in wanted:
            try:
                log = self._open_log(topic, partition, config, now_ms)
            except Exception as exc:  # noqa: BLE001 - see the docstring
                logger.debug("opening %s-%d ahead failed: %s", topic, partition, exc)
                continue
            opened.append(((topic, partition), config, log))
        return opened

    def adopt_logs(self, opened: Sequence[tuple[TopicPartition, LogConfig, UnifiedLog]]) -> None:
        """Add logs `open_logs` opened (on the thread that owns the manager)."""
        for key, config, log in opened:
            if key in self._logs or self.is_shut_down:
                log.close()  # cannot happen while only the image's publisher opens ahead
                continue
            self.topic_configs[key[0]] = config
            self._logs[key] = log

    def delete_log(self, topic: str, partition: int) -> bool:
        """Rename the directory to `<name>.<hex>-delete` (atomic), then remove it."""
        log = self._logs.pop((topic, partition), None)
        if log is None:
            return False
        log.close()
        source = self.log_dir / partition_dir_name(topic, partition)
        target = self.log_dir / f"{source.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        os.replace(source, target)
        shutil.rmtree(target, ignore_errors=True)
        self.checkpoint_recovery_points()
        self.checkpoint_high_watermarks()
        self.checkpoint_log_start_offsets()
        if self.cleaner is not None:
            self.cleaner.on_log_deleted((topic, partition))
        return True

    # -- checkpoints --------------------------------------------------------------------------

    def checkpoint_recovery_points(self) -> None:
        self._recovery_point_checkpoint.write(
            {tp: log.recovery_point for tp, log in self._logs.items()}
        )

    def checkpoint_high_watermarks(self) -> None:
        self._high_watermark_checkpoint.write(
            {tp: log.high_watermark for tp, log in self._logs.items()}
        )

    def checkpoint_log_start_offsets(self) -> None:
        self._log_start_offset_checkpoint.write(
            {tp: log.log_start_offset for tp, log in self._logs.items()}
        )

    # -- periodic work ------------------------------------------------------------------------

    def _schedule(self, now_ms: int) -> None:
        self._next_run_ms = {
            "retention": now_ms + RETENTION_CHECK_INTERVAL_MS,
            "flush": now_ms + FLUSH_CHECK_INTERVAL_MS,
            "recovery_point": now_ms + RECOVERY_POINT_CHECKPOINT_INTERVAL_MS,
            "high_watermark": now_ms + HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS,
            "log_start_offset": now_ms + LOG_START_OFFSET_CHECKPOINT_INTERVAL_MS,
            "producer_expiration": now_ms + PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
        }

    def cleanup_logs(self, now_ms: int) -> int:
        """Retention over every log; returns the number of segments deleted."""
        return sum(log.delete_old_segments(now_ms) for log in self._logs.values())

    def remove_expired_producers(self, now_ms: int) -> None:
        for log in self._logs.values():
            log.producer_state_manager.remove_expired_producers(now_ms)

    def flush_dirty_logs(self, now_ms: int) -> None:
        for log in self._logs.values():
            if now_ms - log.last_flush_ms >= log.config.flush_ms:
                log.flush(now_ms=now_ms)

    def tick(self, now_ms: int) -> int:
        """Run whatever periodic work is due; return ms until the next is due."""
        jobs = {
            "retention": (self.cleanup_logs, RETENTION_CHECK_INTERVAL_MS),
            "flush": (self.flush_dirty_logs, FLUSH_CHECK_INTERVAL_MS),
            "recovery_point": (
                lambda _now: self._prepare_checkpoint(
                    "recovery_point", self._recovery_point_checkpoint
                ),
                RECOVERY_POINT_CHECKPOINT_INTERVAL_MS,
            ),
            "high_watermark": (
                lambda _now: self._prepare_checkpoint(
                    "high_watermark", self._high_watermark_checkpoint
                ),
                HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS,
            ),
            "log_start_offset": (
                lambda _now: self._prepare_checkpoint(
                    "log_start_offset", self._log_start_offset_checkpoint
                ),
                LOG_START_OFFSET_CHECKPOINT_INTERVAL_MS,
            ),
            "producer_expiration": (
                self.remove_expired_producers,
                PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
            ),
        }
        for name, (job, interval_ms) in jobs.items():
            if self.is_offline:
                break  # a failed directory is never written again: no job runs there
            if now_ms >= self._next_run_ms[name]:
                self._next_run_ms[name] = now_ms + interval_ms
                try:
                    job(now_ms)
                except (OSError, KafkaStorageError) as exc:
                    if self.failure_channel.report(self.log_dir, exc):
                        continue  # offline: never retried into apparent success
                    logger.warning("log manager job %s failed, retrying in %d ms: %s",
                                   name, interval_ms, exc)  # fmt: skip
        return max(0, min(self._next_run_ms.values()) - now_ms)

    def _prepare_checkpoint(self, job: str, file: OffsetCheckpointFile) -> None:
        """Queue the write of `file` with each log's offset named `job` as it is now."""
        entries = {tp: getattr(log, job) for tp, log in self._logs.items()}
        self._checkpoint_writes.append((job, file.prepare(entries)))

    def take_checkpoint_writes(self) -> list[tuple[str, Callable[[], None]]]:
        """The periodic checkpoint writes `tick` prepared since the last call, as (job, write)."""
        writes, self._checkpoint_writes = self._checkpoint_writes, []
        return writes

    def write_checkpoints(
        self, writes: list[tuple[str, Callable[[], None]]]
    ) -> list[tuple[str, Exception]]:
        """Run prepared checkpoint writes; the (job, error) of those that failed. Safe in a
        worker thread: it touches only the checkpoint files (a directory that went offline
        meanwhile is not written)."""
        failures: list[tuple[str, Exception]] = []
        for job, write in writes:
            if self.is_offline:
                break
            try:
                write()
            except (OSError, KafkaStorageError) as exc:
                failures.append((job, exc))
        return failures

    def checkpoint_write_failed(self, job: str, exc: Exception) -> None:
        """A periodic checkpoint write failed (`write_checkpoints`): as a failed `tick` job."""
        if not self.failure_channel.report(self.log_dir, exc):
            logger.warning("log manager job %s failed, retrying at its next interval: %s",
                           job, exc)  # fmt: skip

    # -- shutdown -----------------------------------------------------------------------------

    @property
    def is_offline(self) -> bool:
        """The directory failed an I/O (LogDirFailureChannel): nothing is written there again."""
        return self.failure_channel.is_offline(self.log_dir)

    def shutdown(self, now_ms: int = 0, broker_epoch: int = -1) -> None:
        """Flush and close every log, write the checkpoints, then the clean-shutdown marker
        (with `broker_epoch`, the registration this process ends). An offline directory is
        only closed: no flush, no checkpoint, no marker (the next start recovers it)."""
        if self.is_shut_down:
            return
        if self.is_offline:
            for log in self._logs.values():
                log.close_handlers()
            logger.warning("not flushing or marking %s clean: it went offline (%s); the next "
                           "start recovers its logs", self.log_dir,
                           self.failure_channel.offline_reason(self.log_dir))  # fmt: skip
            self.is_shut_down = True
            return
        failures = []
        for log in self._logs.values():
            try:
                log.flush(now_ms=now_ms)
            except KafkaStorageError as exc:  # noted (segment.py); the others still close
                failures.append(exc)
            log.close()
        self.checkpoint_recovery_points()
        self.checkpoint_high_watermarks()
        self.checkpoint_log_start_offsets()
        error = io_error_in(self.log_dir)
        if error is None:
            write_clean_shutdown_marker(self.log_dir, broker_epoch)
        else:
            logger.warning("not marking %s clean: an I/O error happened there (%s); the next "
                           "start recovers its logs", self.log_dir, error)  # fmt: skip
        self.is_shut_down = True
        if failures:
            raise failures[0]
