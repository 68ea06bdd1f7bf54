"""Checkpoint writes prepared in one thread and run in another (the broker runs the periodic
ones in a worker thread): a write holds the offsets of its preparation, never replaces content
prepared after it, and a failed one is reported, not raised."""

from __future__ import annotations

import threading

from log.common.errors import KafkaStorageError
from log.storage.checkpoint_file import OffsetCheckpointFile
from log.storage.config import LogConfig
from log.storage.manager import (
    HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS,
    RECOVERY_POINT_CHECKPOINT_INTERVAL_MS,
    LogManager,
)

from .conftest import make_batch


def test_a_late_prepared_write_never_replaces_a_later_one(tmp_path):
    checkpoint = OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint")
    first = checkpoint.prepare({("t", 0): 5})
    second = checkpoint.prepare({("t", 0): 7, ("t", 1): 1})
    second()
    first()  # prepared before `second`, run after it: skipped
    assert checkpoint.read() == {("t", 0): 7, ("t", 1): 1}
    checkpoint.write({("t", 0): 9})  # a direct write is prepared now: it wins
    assert checkpoint.read() == {("t", 0): 9}
    first()
    assert checkpoint.read() == {("t", 0): 9}


def test_tick_prepares_the_periodic_checkpoints_the_runtime_writes(tmp_path):
    manager = LogManager(tmp_path, LogConfig(segment_bytes=1000), now_ms=0)
    log = manager.get_or_create_log("t", 0)
    for i in range(5):
        log.append_as_leader(make_batch(2, value_bytes=100), 1, i)
    log.update_high_watermark(10)
    manager.tick(RECOVERY_POINT_CHECKPOINT_INTERVAL_MS)  # every checkpoint is due
    writes = manager.take_checkpoint_writes()
    assert sorted(job for job, _ in writes) == ["high_watermark", "log_start_offset",
                                                "recovery_point"]  # fmt: skip
    log.append_as_leader(make_batch(2, value_bytes=100), 1, 5)
    log.update_high_watermark(12)  # after the preparation: not in this write
    assert manager.write_checkpoints(writes) == []
    assert OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint").read() == {("t", 0): 10}
    manager.shutdown(now_ms=RECOVERY_POINT_CHECKPOINT_INTERVAL_MS)


def test_a_failed_checkpoint_write_is_reported_and_takes_the_directory_offline(tmp_path):
    manager = LogManager(tmp_path, LogConfig(segment_bytes=1000), now_ms=0)
    manager.get_or_create_log("t", 0).update_high_watermark(0)
    # `<name>.tmp` a directory: the write's open fails with EISDIR, a disk-level error.
    (tmp_path / "replication-offset-checkpoint.tmp").mkdir()
    manager.tick(HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS)
    failures = manager.write_checkpoints(manager.take_checkpoint_writes())
    assert [job for job, _ in failures] == ["high_watermark"]
    assert isinstance(failures[0][1], KafkaStorageError)
    assert not manager.is_offline
    manager.checkpoint_write_failed(*failures[0])
    assert manager.is_offline


def test_two_objects_of_one_path_never_write_it_at_once(tmp_path):
    """An in-process restart writes a checkpoint while the previous LogManager's last write
    may still run in a worker thread: both go through one lock per path (with a lock per
    object, one rename could find the other's `.tmp` already moved: ENOENT, directory offline)."""
    path = tmp_path / "log-start-offset-checkpoint"
    old, new = OffsetCheckpointFile(path), OffsetCheckpointFile(path)
    errors: list[BaseException] = []

    def write_many(checkpoint: OffsetCheckpointFile, offset: int) -> None:
        try:
            for i in range(30):
                checkpoint.write({("t", 0): offset + i})
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write_many, args=(c, o)) for c, o in ((old, 0), (new, 100))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert old.read()[("t", 0)] in (29, 129)
