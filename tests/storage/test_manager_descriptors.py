"""Running out of file descriptors never ends the node: the log manager's periodic jobs fail
with a real EMFILE (the process's descriptor table filled up under a lowered RLIMIT_NOFILE),
are retried at their next interval, and succeed once descriptors are free again."""

from __future__ import annotations

import errno
import os
import resource

from log.storage.checkpoint_file import OffsetCheckpointFile
from log.storage.config import LogConfig
from log.storage.manager import HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS, LogManager

from .conftest import make_batch


def _tick(manager: LogManager, now_ms: int) -> None:
    """What the broker's runtime does: tick, then the prepared checkpoint writes."""
    manager.tick(now_ms)
    for job, exc in manager.write_checkpoints(manager.take_checkpoint_writes()):
        manager.checkpoint_write_failed(job, exc)


def test_periodic_jobs_survive_a_full_descriptor_table_and_retry(tmp_path, caplog):
    manager = LogManager(tmp_path, LogConfig(segment_bytes=1000), now_ms=0)
    log = manager.get_or_create_log("t", 0)
    for i in range(5):
        log.append_as_leader(make_batch(2, value_bytes=100), 1, i)
    log.update_high_watermark(10)
    checkpoint = tmp_path / "replication-offset-checkpoint"
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    held: list[int] = []
    now_ms = 10 * HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 8, hard))
        while True:
            try:
                held.append(os.open(os.devnull, os.O_RDONLY))
            except OSError as exc:
                assert exc.errno == errno.EMFILE
                break
        _tick(manager, now_ms)  # every checkpoint write fails with EMFILE: no exception
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert "retrying" in caplog.text and "Too many open files" in caplog.text
    assert not checkpoint.exists() or OffsetCheckpointFile(checkpoint).read().get(("t", 0)) != 10
    _tick(manager, now_ms + HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS)  # descriptors are back
    assert OffsetCheckpointFile(checkpoint).read() == {("t", 0): 10}
    manager.shutdown(now_ms=now_ms)
