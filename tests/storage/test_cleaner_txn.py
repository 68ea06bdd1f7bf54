"""The log cleaner and transactions, on a real compacted log: aborted data goes (and never
supersedes a committed value), markers stay while they still matter and go after their delete
horizon (stamped in the batch header), nothing at or past the last stable offset is touched."""

from __future__ import annotations

import shutil

from log.records.batch_header import DELETE_HORIZON_FLAG, iter_batches
from log.records.builder import Record, build_batch
from log.records.control import ControlRecordType, build_control_batch, read_end_txn_marker
from log.records.reader import iter_records
from log.storage.append_origin import AppendOrigin
from log.storage.cleaner_swap import commit_cleaned_file
from log.storage.log import UnifiedLog
from log.storage.log_cleaner import build_cleaned_segments
from tests.storage.test_cleaner_log import (
    DELETE_RETENTION_MS,
    TOPIC,
    compacted_config,
    open_manager,
)

PLAIN, ABORTED, COMMITTED, OPEN = -1, 31, 32, 33


class Writer:
    def __init__(self, log: UnifiedLog) -> None:
        self.log = log
        self.sequences: dict[int, int] = {}

    def data(self, producer_id: int, *pairs: tuple[str, str]) -> int:
        sequence = self.sequences.get(producer_id, 0)
        batch = build_batch(
            [Record(v.encode(), key=k.encode(), timestamp_ms=100) for k, v in pairs],
            producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1,
            base_sequence=sequence if producer_id >= 0 else -1,
            is_transactional=producer_id >= 0,
        )
        if producer_id >= 0:
            self.sequences[producer_id] = sequence + len(pairs)
        info = self.log.append_as_leader(batch, 0, 100)
        self.log.update_high_watermark(self.log.log_end_offset)
        return info.first_offset

    def end(self, producer_id: int, commit: bool) -> int:
        marker = build_control_batch(
            ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
            producer_id=producer_id,
            producer_epoch=0,
            coordinator_epoch=0,
            timestamp_ms=100,
        )
        info = self.log.append_as_leader(marker, 0, 100, AppendOrigin.COORDINATOR)
        self.log.update_high_watermark(self.log.log_end_offset)
        return info.first_offset


def batches(log: UnifiedLog) -> list[tuple[int, bytes]]:
    """(base offset, bytes) of every batch a reader from the log start gets."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, max_bytes=1 << 20)
        for position, header in iter_batches(info.records):
            out.append((header.base_offset, info.records[position : position + header.size_bytes]))
        offset = info.next_fetch_offset
    return out


def view(log: UnifiedLog) -> list[str]:
    """What is in the log: `key=value` per record, `ABORT(pid)`/`COMMIT(pid)` per marker."""
    out = []
    for _, batch in batches(log):
        header = next(iter_batches(batch))[1]
        if header.is_control:
            marker = read_end_txn_marker(batch)
            out.append(f"{marker.control_type.name}({header.producer_id})" if marker else "EMPTY")
        else:
            out.extend(f"{r.key.decode()}={r.value.decode()}" for r in iter_records(batch))
    return out


def test_clean_removes_aborted_data_then_markers_after_their_horizon(tmp_path):
    manager = open_manager(tmp_path / "d", compacted_config(segment_bytes=400))
    log = manager.get_or_create_log(TOPIC, 0)
    cleaner = manager.cleaner
    assert cleaner is not None
    w = Writer(log)
    w.data(PLAIN, ("a", "1"))
    w.data(ABORTED, ("a", "aborted"), ("b", "aborted"))
    w.data(COMMITTED, ("c", "1"))
    w.end(ABORTED, commit=False)
    w.end(COMMITTED, commit=True)
    open_first = w.data(OPEN, ("d", "open"), ("a", "open"))
    for i in range(8):
        w.data(PLAIN, (f"x{i}", "1"))  # later segments
    assert len(log.segments) >= 3
    assert log.last_stable_offset == open_first
    untouched = [b for b in batches(log) if b[0] >= open_first]

    assert cleaner.clean_once(now_ms=10_000)
    # The aborted value of "a" did not supersede the committed one; both markers stay (this
    # pass saw their transactions' data); the open transaction and what follows are untouched.
    assert view(log)[:4] == ["a=1", "c=1", "ABORT(31)", "COMMIT(32)"]
    assert [b for b in batches(log) if b[0] >= open_first] == untouched
    assert [(t.producer_id, t.first_offset) for t in log.collect_aborted_transactions(0, 99)] == [
        (ABORTED, 1)
    ]

    # While producer 31 is active its last batch stays as an empty batch (its idempotence
    # state), which still counts as the transaction's data: the ABORT stays (Kafka does the same).
    w.end(OPEN, commit=True)
    round_ = iter(range(2, 100))

    def dirty_then_clean(now_ms: int) -> None:
        value = str(next(round_))
        for i in range(8):
            w.data(PLAIN, (f"x{i}", value))
        assert cleaner.clean_once(now_ms=now_ms)

    dirty_then_clean(20_000)
    assert "ABORT(31)" in view(log)
    # Once the producers expire (producer.id.expiration.ms), the empty batch goes, then the
    # next clean finds the ABORT with nothing left before it and stamps its delete horizon;
    # the COMMIT still has its data ("c=1") before it and stays.
    assert log.producer_state_manager.remove_expired_producers(10**12)
    dirty_then_clean(30_000)
    assert "ABORT(31)" in view(log)
    dirty_then_clean(40_000)
    abort = next(b for _, b in batches(log) if next(iter_batches(b))[1].is_control)
    header = next(iter_batches(abort))[1]
    assert header.attributes & DELETE_HORIZON_FLAG
    assert header.base_timestamp == 40_000 + DELETE_RETENTION_MS
    assert [r.timestamp_ms for r in iter_records(abort)] == [100]  # record times unchanged
    assert "ABORT(31)" in view(log) and "COMMIT(32)" in view(log)

    # Before the horizon it stays; at it, it goes.
    dirty_then_clean(40_000 + DELETE_RETENTION_MS - 1)
    assert "ABORT(31)" in view(log)
    dirty_then_clean(40_000 + DELETE_RETENTION_MS)
    contents = view(log)
    assert "ABORT(31)" not in contents
    # "a=1" is superseded by the committed "a=open" now.
    assert contents[:4] == ["c=1", "COMMIT(32)", "d=open", "a=open"]
    manager.shutdown()


def committed_view(log: UnifiedLog) -> list[str]:
    """What a read_committed consumer reading from the start gets: records outside the aborted
    transactions the log reports (Kafka's consumer-side filter, applied to the whole log)."""
    aborted = log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset)
    out = []
    for _, batch in batches(log):
        header = next(iter_batches(batch))[1]
        if header.is_control:
            continue
        if any(
            t.producer_id == header.producer_id
            and t.first_offset <= header.base_offset < t.last_offset
            for t in aborted
        ):
            continue
        out.extend(f"{r.key.decode()}={r.value.decode()}" for r in iter_records(batch))
    return out


def test_a_crash_after_the_swap_commit_keeps_the_read_committed_view(tmp_path):
    """Killed between the swap's commit point and the old segments' deletion: the load
    finishes the swap and recovers the swapped segment, whose .txnindex replay rebuilds for
    the aborted data still in it; a read_committed reader sees what it saw before the clean,
    minus superseded values."""
    live = tmp_path / "live"
    manager = open_manager(live, compacted_config(segment_bytes=300))
    log = manager.get_or_create_log(TOPIC, 0)
    w = Writer(log)
    for round_ in range(6):
        w.data(COMMITTED, (f"k{round_}", "c"))
        w.data(ABORTED, (f"k{round_}", "aborted"))
        w.end(ABORTED, commit=False)
        w.end(COMMITTED, commit=True)
    for i in range(6):
        w.data(PLAIN, (f"x{i}", "1"))
    before = committed_view(log)
    assert before[:2] == ["k0=c", "k1=c"] and not any("aborted" in v for v in before)
    plan = manager.cleaner.plan(now_ms=0)
    result = build_cleaned_segments(plan)
    groups = [g for g in result.groups if g.cleaned_path is not None]
    assert groups and len(groups[0].sources) >= 2
    for group in groups:
        commit_cleaned_file(group.cleaned_path)  # the commit point; then the "crash"
    crashed_dir = tmp_path / "crashed"
    shutil.copytree(live, crashed_dir)
    crashed = open_manager(crashed_dir, compacted_config(segment_bytes=300))
    recovered = crashed.get_log(TOPIC, 0)
    contents = view(recovered)
    assert "k0=aborted" not in contents and "ABORT(31)" in contents
    assert committed_view(recovered) == before
    crashed.shutdown()
    manager.shutdown()
