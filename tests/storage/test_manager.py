"""LogManager: logs per directory, checkpoints, periodic work, config updates, shutdown."""

from __future__ import annotations

import os

import pytest

from log.common.errors import InvalidTopicError
from log.storage.checkpoint_file import OffsetCheckpointFile
from log.storage.config import LogConfig
from log.storage.manager import (
    HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS,
    RETENTION_CHECK_INTERVAL_MS,
    LogManager,
    parse_partition_dir_name,
)

from .conftest import make_batch


def test_partition_dir_names():
    assert parse_partition_dir_name("my-topic-12") == ("my-topic", 12)
    assert parse_partition_dir_name("topic") is None
    assert parse_partition_dir_name("topic-x") is None


def test_logs_reload_with_checkpointed_offsets(tmp_path):
    manager = LogManager(tmp_path, LogConfig(segment_bytes=1000))
    a = manager.get_or_create_log("a.b-c", 0)
    b = manager.get_or_create_log("other", 3)
    assert manager.get_or_create_log("a.b-c", 0) is a
    for i in range(10):
        a.append_as_leader(make_batch(2, value_bytes=100), 1, i)
        b.append_as_leader(make_batch(1), 1, i)
    a.update_high_watermark(12)
    a.delete_records_before(4)
    manager.shutdown(now_ms=100)
    hw = OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint").read()
    assert hw == {("a.b-c", 0): 12, ("other", 3): 0}
    recovery = OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").read()
    assert recovery == {("a.b-c", 0): 20, ("other", 3): 10}
    again = LogManager(tmp_path, LogConfig(segment_bytes=1000), now_ms=200)
    assert again.had_clean_shutdown
    assert set(again.logs) == {("a.b-c", 0), ("other", 3)}
    log = again.get_log("a.b-c", 0)
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (4, 12, 20)
    assert log.end_offset_for_epoch(1) == (1, 20)
    assert again.delete_log("other", 3)
    assert not (tmp_path / "other-3").exists()
    assert set(OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint").read()) == {
        ("a.b-c", 0)
    }


def test_tick_runs_retention_and_checkpoints_when_due(tmp_path):
    config = LogConfig(segment_bytes=500, retention_ms=1_000)
    manager = LogManager(tmp_path, config, now_ms=0)
    log = manager.get_or_create_log("t", 0)
    for i in range(10):
        log.append_as_leader(make_batch(2, value_bytes=100, timestamp_ms=i), 0, i)
    log.update_high_watermark(log.log_end_offset)
    segments = len(log.segments)
    assert manager.tick(1) > 0
    assert len(log.segments) == segments  # retention not due yet
    manager.tick(HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS)  # prepares the write, as it is now
    log.update_high_watermark(19)
    hw_file = tmp_path / "replication-offset-checkpoint"
    before = OffsetCheckpointFile(hw_file).read() if hw_file.exists() else {}
    assert before != {("t", 0): 20}  # tick leaves the fsyncs to the runtime's worker thread
    writes = manager.take_checkpoint_writes()
    assert [job for job, _ in writes] == ["high_watermark"]
    assert manager.write_checkpoints(writes) == []
    assert OffsetCheckpointFile(hw_file).read() == {("t", 0): 20}
    assert manager.take_checkpoint_writes() == []
    manager.tick(RETENTION_CHECK_INTERVAL_MS)
    assert log.log_start_offset == log.log_end_offset == 20


def test_update_topic_config_and_topic_name_checks(tmp_path):
    manager = LogManager(tmp_path)
    log = manager.get_or_create_log("t", 0)
    manager.update_topic_config("t", LogConfig(segment_bytes=300))
    for _ in range(5):
        log.append_as_leader(make_batch(2, value_bytes=100), 0, 0)
    assert len(log.segments) > 1
    with pytest.raises(InvalidTopicError):
        manager.get_or_create_log("bad/name", 0)
    with pytest.raises(InvalidTopicError):
        manager.get_or_create_log("t", -1)


def test_log_start_beyond_files_restarts_empty(tmp_path):
    manager = LogManager(tmp_path)
    log = manager.get_or_create_log("t", 0)
    for _ in range(3):
        log.append_as_leader(make_batch(1), 0, 0)
    manager.shutdown()
    OffsetCheckpointFile(tmp_path / "log-start-offset-checkpoint").write({("t", 0): 50})
    os.remove(tmp_path / ".kafka_cleanshutdown")
    log = LogManager(tmp_path).get_log("t", 0)
    assert log.log_start_offset == log.log_end_offset == 50
    assert log.append_as_leader(make_batch(1), 0, 0).first_offset == 50


def test_tick_expires_idle_producers(tmp_path):
    from log.storage.manager import PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS

    manager = LogManager(tmp_path, now_ms=0)
    log = manager.get_or_create_log("t", 0)
    log.append_as_leader(make_batch(1, producer_id=9, producer_epoch=0, base_sequence=0), 0, 0)
    assert 9 in log.producer_state_manager.active_producers
    manager.tick(PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS)
    assert 9 in log.producer_state_manager.active_producers  # idle for less than a day
    manager.tick(2 * 86_400_000)
    assert 9 not in log.producer_state_manager.active_producers


def test_the_clean_shutdown_marker_carries_the_broker_epoch(tmp_path):
    """KIP-966: the marker names the broker epoch the process ended; the next LogManager reads
    it back (-1 after an unclean stop, or from an empty marker of an older version)."""
    from log.storage.clean_shutdown import CLEAN_SHUTDOWN_FILE
    from log.storage.config import LogConfig
    from log.storage.manager import LogManager

    manager = LogManager(str(tmp_path), LogConfig(), now_ms=0)
    assert manager.previous_broker_epoch == -1
    manager.shutdown(0, broker_epoch=42)
    manager = LogManager(str(tmp_path), LogConfig(), now_ms=0)
    assert manager.had_clean_shutdown and manager.previous_broker_epoch == 42
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # a crash now is unclean again
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_bytes(b"")  # an older version's marker
    manager = LogManager(str(tmp_path), LogConfig(), now_ms=0)
    assert manager.had_clean_shutdown and manager.previous_broker_epoch == -1
