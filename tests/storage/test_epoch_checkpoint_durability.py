"""The leader-epoch checkpoint is written at once but fsynced only before the recovery point moves.

A new leader epoch (every partition a broker starts leading) used to cost two fsyncs on the
event loop; now its change is durable by the log's next flush (leader_epoch_cache.py says why
that is enough). These tests check both halves: the fsync happens before the recovery point
moves past the entry, and an OS crash that loses the last unsynced checkpoint write leaves a log
whose reloaded epochs are exactly those of the live log (recovery assigns them again from the
batches above the recovery point).
"""

from __future__ import annotations

import os
import shutil

from log.storage.config import LogConfig
from log.storage.leader_epoch_cache import LEADER_EPOCH_CHECKPOINT_FILE
from log.storage.manager import LogManager

from .conftest import make_batch

CONFIG = LogConfig(segment_bytes=2_000, index_interval_bytes=200)
TOPIC, PARTITION = "events", 0


def test_an_epoch_change_is_fsynced_before_the_recovery_point_moves(tmp_path, monkeypatch):
    fsynced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:  # the real fsync, and which file it was
        fsynced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    manager = LogManager(tmp_path / "logs", CONFIG, now_ms=0)
    log = manager.get_or_create_log(TOPIC, PARTITION)
    epoch_file = os.path.join(log.dir_path, LEADER_EPOCH_CHECKPOINT_FILE)
    monkeypatch.setattr(os, "fsync", recording_fsync)

    log.append_as_leader(make_batch(2), 3, 0)
    log.append_as_leader(make_batch(2), 5, 0)
    with open(epoch_file) as f:  # written at once: a process crash keeps it
        assert f.read() == "0\n2\n3 0\n5 2\n"
    assert epoch_file not in fsynced  # ... but not fsynced on the append path

    log.flush()
    assert log.recovery_point == 4
    assert epoch_file in fsynced and log.dir_path in fsynced
    fsynced.clear()
    log.flush()  # nothing changed since: no second fsync
    log.append_as_leader(make_batch(1), 5, 0)  # same epoch: no change to the file
    log.flush()
    assert epoch_file not in fsynced
    log.append_as_leader(make_batch(1), 7, 0)
    manager.shutdown()  # a clean shutdown makes it durable too
    assert epoch_file in fsynced


def test_an_os_crash_that_loses_the_unsynced_epoch_file_recovers_the_same_epochs(tmp_path):
    manager = LogManager(tmp_path / "live", CONFIG, now_ms=0)
    log = manager.get_or_create_log(TOPIC, PARTITION)
    for i in range(12):  # epochs 1, 2, 3 over several segments (each roll flushes)
        log.append_as_leader(make_batch(3, value_bytes=100, tag=i), 1 + i // 4, i)
    assert len(log.segments) >= 3 and log.recovery_point > 0
    epoch_file = os.path.join(log.dir_path, LEADER_EPOCH_CHECKPOINT_FILE)
    with open(epoch_file, "rb") as f:
        durable = f.read()  # what the last flush fsynced
    # Two new epochs in the active segment, above the recovery point: written, not fsynced.
    log.append_as_leader(make_batch(2, tag=50), 6, 20)
    log.append_as_leader(make_batch(2, tag=51), 9, 21)
    live_entries = log.leader_epoch_cache.entries
    assert [e.leader_epoch for e in live_entries[-2:]] == [6, 9]

    # The OS crashes: the page cache kept the records but not the last epoch-file writes.
    crashed = tmp_path / "crashed"
    shutil.copytree(manager.log_dir, crashed)
    with open(os.path.join(crashed, os.path.basename(log.dir_path), LEADER_EPOCH_CHECKPOINT_FILE),
              "wb") as f:  # fmt: skip
        f.write(durable)
    again = LogManager(crashed, CONFIG, now_ms=10_000)
    assert not again.had_clean_shutdown
    recovered = again.get_log(TOPIC, PARTITION)
    assert recovered.log_end_offset == log.log_end_offset
    assert recovered.leader_epoch_cache.entries == live_entries
    assert recovered.end_offset_for_epoch(6) == log.end_offset_for_epoch(6)
