"""UnifiedReplicaLog: a real UnifiedLog through the ReplicaLog protocol the cores read."""

from __future__ import annotations

from log.records.builder import Record, build_batch
from log.replication.replica_log import UNDEFINED_EPOCH
from log.replication.unified_replica_log import UnifiedReplicaLog
from log.storage.config import LogConfig
from log.storage.manager import LogManager


def _log(tmp_path):
    manager = LogManager(str(tmp_path), LogConfig(), now_ms=0)
    return manager, manager.get_or_create_log("t", 0, LogConfig(), 0)


def test_epochs_high_watermark_and_log_start(tmp_path):
    manager, log = _log(tmp_path)
    replica_log = UnifiedReplicaLog(log)
    assert replica_log.latest_epoch == UNDEFINED_EPOCH  # storage says None
    replica_log.maybe_assign_epoch_start_offset(3, 0)
    for _ in range(3):
        log.append_as_leader(build_batch([Record(b"a"), Record(b"b")]), 3, 0)
    assert replica_log.latest_epoch == 3
    assert replica_log.end_offset_for_epoch(3) == (3, 6)
    assert replica_log.update_high_watermark(4) == 4
    assert replica_log.update_high_watermark(99) == 6  # clamped to the log end offset
    # The leader's log start offset is adopted only up to our own high watermark.
    replica_log.truncate_to(4)
    assert replica_log.high_watermark == replica_log.log_end_offset == 4
    replica_log.maybe_increment_log_start_offset(6)
    assert replica_log.log_start_offset == 4
    replica_log.truncate_fully_and_start_at(10)
    assert (replica_log.log_start_offset, replica_log.log_end_offset) == (10, 10)
    assert replica_log.latest_epoch == UNDEFINED_EPOCH
    manager.shutdown(0)
