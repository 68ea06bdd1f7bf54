"""Crash recovery through LogManager: torn tails, bit flips, lost indexes, the clean marker.

A crash is simulated by copying the log directory while the manager is running (what the page
cache holds; our userspace buffers are not in it), damaging the copy, and opening a new manager
on it. After every recovery the log must read back exactly the complete batches written before
the damage, and accept appends after them.
"""

from __future__ import annotations

import os
import random
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from log.records.batch_header import iter_batches, read_header
from log.storage.clean_shutdown import CLEAN_SHUTDOWN_FILE
from log.storage.config import LogConfig
from log.storage.manager import LogManager

from .conftest import make_batch

CONFIG = LogConfig(segment_bytes=2_000, index_interval_bytes=200)
TOPIC, PARTITION = "events", 0


def read_batches(log, check_crc=True):
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records
        assert data, f"no batch at offset {offset} below the log end offset {log.log_end_offset}"
        for position, header in iter_batches(data, check_crc=check_crc):
            out.append(bytes(data[position : position + header.size_bytes]))
            offset = header.next_offset
    return out


def write_batches(tmp_path, batch_count=30, seed=1):
    """A running manager with `batch_count` batches; returns (manager, log, batches)."""
    rng = random.Random(seed)
    manager = LogManager(tmp_path / "live", CONFIG, now_ms=0)
    log = manager.get_or_create_log(TOPIC, PARTITION)
    for i in range(batch_count):
        log.append_as_leader(
            make_batch(rng.randint(1, 4), value_bytes=rng.randint(10, 120), tag=i), 3, i
        )
    assert len(log.segments) >= 3
    return manager, log, read_batches(log)


def crash_copy(tmp_path, manager) -> str:
    target = tmp_path / f"crash{len(os.listdir(tmp_path))}"
    shutil.copytree(manager.log_dir, target)
    return str(target)


def partition_dir(log_dir):
    return os.path.join(log_dir, f"{TOPIC}-{PARTITION}")


def segment_files(log_dir, suffix=".log"):
    directory = partition_dir(log_dir)
    return sorted(os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(suffix))


def reopen(log_dir):
    manager = LogManager(log_dir, CONFIG, now_ms=10_000)
    return manager, manager.get_log(TOPIC, PARTITION)


def assert_recovered(log, expected):
    assert read_batches(log) == expected
    end = log.log_end_offset
    info = log.append_as_leader(make_batch(2), 9, 20_000)
    assert info.first_offset == end
    assert read_batches(log)[: len(expected)] == expected


def test_garbage_tail_on_active_segment(tmp_path):
    manager, _, batches = write_batches(tmp_path)
    crashed = crash_copy(tmp_path, manager)
    with open(segment_files(crashed)[-1], "ab") as fh:
        fh.write(random.Random(5).randbytes(333))
    _, log = reopen(crashed)
    assert_recovered(log, batches)


def test_half_written_batch_at_the_end(tmp_path):
    manager, log, batches = write_batches(tmp_path)
    crashed = crash_copy(tmp_path, manager)
    extra = make_batch(3, value_bytes=80, base_offset=log.log_end_offset)
    with open(segment_files(crashed)[-1], "ab") as fh:
        fh.write(extra[: len(extra) // 2])
    _, recovered = reopen(crashed)
    assert_recovered(recovered, batches)


@pytest.mark.parametrize("which", [-2, -1])
def test_bit_flip_cuts_there_and_drops_later_segments(tmp_path, which):
    manager, _, batches = write_batches(tmp_path, batch_count=40)
    crashed = crash_copy(tmp_path, manager)
    victim = segment_files(crashed)[which]
    data = open(victim, "rb").read()
    headers = list(iter_batches(data))
    position, header = headers[len(headers) // 2]
    flip_at = position + 70  # inside the records, covered by the CRC
    with open(victim, "r+b") as fh:
        fh.seek(flip_at)
        fh.write(bytes([data[flip_at] ^ 0x10]))
    _, log = reopen(crashed)
    survivors = [b for b in batches if next(iter_batches(b))[1].base_offset < header.base_offset]
    assert_recovered(log, survivors)
    assert segment_files(crashed)[-1] == victim  # later segments are gone


@pytest.mark.parametrize("damage", ["delete", "truncate", "garbage"])
@pytest.mark.parametrize("clean", [True, False])
def test_missing_or_damaged_indexes_are_rebuilt(tmp_path, damage, clean):
    manager, log, batches = write_batches(tmp_path)
    before = [
        (s.offset_index.relative_offsets.tolist(), s.time_index.timestamps.tolist())
        for s in log.segments
    ]
    manager.shutdown(now_ms=1)
    log_dir = str(manager.log_dir)
    if not clean:
        os.remove(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))
    for suffix in (".index", ".timeindex"):
        for path in segment_files(log_dir, suffix):
            if damage == "delete":
                os.remove(path)
            elif damage == "truncate":
                os.truncate(path, max(0, os.path.getsize(path) - 5))
            else:
                with open(path, "r+b") as fh:
                    fh.write(b"\xff" * 24)
    manager, log = reopen(log_dir)
    after = [
        (s.offset_index.relative_offsets.tolist(), s.time_index.timestamps.tolist())
        for s in log.segments
    ]
    assert after == before
    assert_recovered(log, batches)


def test_clean_marker_trusts_files_unclean_rescans(tmp_path):
    manager, log, batches = write_batches(tmp_path)
    manager.shutdown(now_ms=1)
    log_dir = str(manager.log_dir)
    assert os.path.exists(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))
    # Flip a record byte in the first (flushed, below the recovery point) segment.
    victim = segment_files(log_dir)[0]
    with open(victim, "r+b") as fh:
        fh.seek(70)
        byte = fh.read(1)
        fh.seek(70)
        fh.write(bytes([byte[0] ^ 1]))
    trusting, log = reopen(log_dir)
    assert not os.path.exists(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))  # removed on startup
    assert trusting.had_clean_shutdown
    assert len(read_batches(log, check_crc=False)) == len(batches)  # trusted: not rescanned
    # A crash now (no marker, recovery point reset): the whole log is rescanned and cut at 0.
    for name in ("recovery-point-offset-checkpoint",):
        os.remove(os.path.join(log_dir, name))
    crashed = crash_copy(tmp_path, trusting)
    _, rescanned = reopen(crashed)
    assert read_batches(rescanned) == []
    assert rescanned.log_end_offset == 0


def test_clean_marker_still_checks_last_segment_tail(tmp_path):
    manager, _, batches = write_batches(tmp_path)
    manager.shutdown(now_ms=1)
    log_dir = str(manager.log_dir)
    with open(segment_files(log_dir)[-1], "ab") as fh:
        fh.write(b"\x00" * 100)
    _, log = reopen(log_dir)
    assert_recovered(log, batches)


def test_checkpoints_and_leftover_files(tmp_path):
    manager, log, batches = write_batches(tmp_path)
    log.update_high_watermark(7)
    log.flush()
    manager.checkpoint_high_watermarks()
    manager.checkpoint_recovery_points()
    crashed = crash_copy(tmp_path, manager)
    directory = partition_dir(crashed)
    for name in (
        "00000000000000000999.log.deleted",
        "00000000000000000998.log.cleaned",
        "00000000000000000997.log.swap",
        "00000000000000000996.index",
    ):
        open(os.path.join(directory, name), "wb").close()
    os.mkdir(os.path.join(crashed, "old-0.abc-delete"))
    manager2, recovered = reopen(crashed)
    assert recovered.high_watermark == 7
    assert recovered.recovery_point == recovered.log_end_offset
    names = os.listdir(directory)
    assert not any(n.endswith((".deleted", ".cleaned", ".swap")) for n in names)
    assert "00000000000000000996.index" not in names
    assert not os.path.exists(os.path.join(crashed, "old-0.abc-delete"))
    assert_recovered(recovered, batches)
    manager2.shutdown(now_ms=30_000)
    manager3, again = reopen(crashed)
    assert again.high_watermark == 7 and again.log_end_offset == recovered.log_end_offset
    assert manager3.delete_log(TOPIC, PARTITION)
    assert not os.path.exists(directory)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cut=st.floats(0, 1), seed=st.integers(0, 1000))
def test_crash_at_any_byte_of_the_tail_keeps_exactly_the_whole_batches(tmp_path_factory, cut, seed):
    base = tmp_path_factory.mktemp("cut")
    manager, log, batches = write_batches(base, batch_count=25, seed=seed)
    crashed = crash_copy(base, manager)
    files = segment_files(crashed)
    total = sum(os.path.getsize(f) for f in files)
    keep_bytes = int(total * cut)
    survivors_bytes = 0
    for path in files:  # cut the concatenated log at keep_bytes
        size = os.path.getsize(path)
        if survivors_bytes + size <= keep_bytes:
            survivors_bytes += size
            continue
        os.truncate(path, max(0, keep_bytes - survivors_bytes))
        survivors_bytes = keep_bytes
    position = 0
    expected = []
    for batch in batches:
        position += len(batch)
        if position <= keep_bytes:
            expected.append(batch)
    _, recovered = reopen(crashed)
    assert read_batches(recovered) == expected


def test_clean_marker_but_log_shorter_than_its_indexes(tmp_path):
    """An OS crash after a clean shutdown can leave indexes naming batches the .log lost."""
    manager, _, batches = write_batches(tmp_path, batch_count=40)
    manager.shutdown(now_ms=1)
    log_dir = str(manager.log_dir)
    last_log = segment_files(log_dir)[-1]
    data = open(last_log, "rb").read()
    headers = list(iter_batches(data))
    cut_position, cut_header = headers[-1]
    os.truncate(last_log, cut_position)
    _, log = reopen(log_dir)
    survivors = [
        b for b in batches if next(iter_batches(b))[1].base_offset < cut_header.base_offset
    ]
    assert_recovered(log, survivors)


def test_os_crash_loses_unflushed_bytes_only_in_the_active_segment(tmp_path):
    """A fake disk: every file falls back to its last fsynced length. Rolls flush the segments
    before the new one (Kafka's rule), so only the active segment's tail can go."""
    manager = LogManager(tmp_path / "live", CONFIG, now_ms=0)
    log = manager.get_or_create_log(TOPIC, PARTITION)
    flushed_sizes: dict[str, int] = {}
    original_fsync = os.fsync

    def recording_fsync(fd):
        original_fsync(fd)
        path = os.readlink(f"/proc/self/fd/{fd}")
        flushed_sizes[path] = os.fstat(fd).st_size

    os.fsync = recording_fsync
    try:
        for i in range(40):
            log.append_as_leader(make_batch(2, value_bytes=60, tag=i), 1, i)
        manager.checkpoint_recovery_points()
        assert len(log.segments) >= 3
        durable_end = log.recovery_point
        assert durable_end == log.active_segment.base_offset
        expected = [
            b for b in read_batches(log) if next(iter_batches(b))[1].last_offset < durable_end
        ]
        crashed = crash_copy(tmp_path, manager)
    finally:
        os.fsync = original_fsync
    live_prefix = str(manager.log_dir)
    for path in (
        segment_files(crashed)
        + segment_files(crashed, ".index")
        + segment_files(crashed, ".timeindex")
    ):
        live_path = live_prefix + path[len(crashed) :]
        os.truncate(path, min(os.path.getsize(path), flushed_sizes.get(live_path, 0)))
    _, recovered = reopen(crashed)
    assert read_batches(recovered) == expected
    assert recovered.log_end_offset == durable_end


def test_a_segment_cut_at_a_batch_boundary_before_an_empty_active_one(tmp_path):
    """The cut ends a non-active segment exactly on a batch boundary and empties the segment
    after it: the log end offset must fall back to the data's end, not the empty segment's
    base offset (readers in between would otherwise find nothing below the log end offset)."""
    manager, _, batches = write_batches(tmp_path, batch_count=25, seed=132)
    crashed = crash_copy(tmp_path, manager)
    files = segment_files(crashed)
    assert len(files) >= 3
    middle = files[-2]
    with open(middle, "rb") as f:
        first_batch_bytes = next(iter_batches(f.read()))[1].size_bytes
    os.truncate(middle, first_batch_bytes)
    os.truncate(files[-1], 0)
    keep_bytes = sum(os.path.getsize(f) for f in files)
    expected, position = [], 0
    for batch in batches:
        position += len(batch)
        if position <= keep_bytes:
            expected.append(batch)
    _, recovered = reopen(crashed)
    assert recovered.log_end_offset == read_header(expected[-1]).next_offset
    assert read_batches(recovered) == expected


@pytest.mark.parametrize("log_start_offset", [0, 57])
def test_a_new_directory_opens_as_an_existing_empty_one_does(tmp_path, log_start_offset):
    """load_log's path for a directory it creates (no listing, no recovery) ends where the
    general path ends for an empty directory that was already there; both then take appends
    and survive a reopen."""
    from log.storage.leader_epoch_cache import EpochEntry
    from log.storage.log_loader import load_log

    fresh_dir, existing_dir = tmp_path / "new-0", tmp_path / "existing-0"
    existing_dir.mkdir()
    opened = {
        name: load_log(str(path), CONFIG, log_start_offset=log_start_offset,
                       recovery_point=log_start_offset, high_watermark=log_start_offset)
        for name, path in (("new", fresh_dir), ("existing", existing_dir))
    }  # fmt: skip

    def state(log):
        return (
            [(s.base_offset, s.next_offset, s.size_bytes) for s in log.segments],
            log.log_start_offset, log.log_end_offset, log.recovery_point, log.high_watermark,
            log.producer_state_manager.map_end_offset,
            log.producer_state_manager.latest_snapshot_offset(),
            log.leader_epoch_cache.entries,
        )  # fmt: skip

    assert state(opened["new"]) == state(opened["existing"])
    assert sorted(os.listdir(fresh_dir)) == sorted(os.listdir(existing_dir))
    for name, log in opened.items():
        log.append_as_leader(make_batch(3, producer_id=7, producer_epoch=0, base_sequence=0), 2, 1)
        log.flush()
        log.close()
        path = fresh_dir if name == "new" else existing_dir
        reopened = load_log(str(path), CONFIG, log_start_offset=log_start_offset,
                            recovery_point=log.recovery_point, had_clean_shutdown=True)  # fmt: skip
        assert reopened.log_end_offset == log_start_offset + 3
        assert reopened.leader_epoch_cache.entries == [EpochEntry(2, log_start_offset)]
        assert reopened.producer_state_manager.map_end_offset == log_start_offset + 3
