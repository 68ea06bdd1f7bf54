"""Transactions in the partition log: the `.txnindex` file, the last stable offset, recovery,
truncation and retention, on real files (kill-style crashes are copies of a live directory)."""

from __future__ import annotations

import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from log.common.errors import InvalidProducerEpochError, InvalidRecordError
from log.records.builder import Record, build_batch
from log.records.control import ControlRecordType, build_control_batch
from log.storage.abstract_index import CorruptIndexError
from log.storage.append_origin import AppendOrigin
from log.storage.config import LogConfig
from log.storage.log import UnifiedLog
from log.storage.log_loader import load_log
from log.storage.manager import LogManager
from log.storage.transaction_index import (
    ENTRY_BYTES,
    AbortedTxn,
    AbortedTxnStruct,
    TransactionIndex,
)

CONFIG = LogConfig(segment_bytes=1_000, index_interval_bytes=200)
TOPIC, PARTITION = "txn", 0
TS = 1_000


def data(producer_id: int, sequence: int, n: int = 2, *, transactional: bool = True) -> bytes:
    return build_batch(
        [Record(b"x" * 30, key=b"k", timestamp_ms=TS) for _ in range(n)],
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=sequence,
        is_transactional=transactional,
    )


def marker(producer_id: int, committed: bool, coordinator_epoch: int = 0) -> bytes:
    return build_control_batch(
        ControlRecordType.COMMIT if committed else ControlRecordType.ABORT,
        producer_id=producer_id,
        producer_epoch=0,
        coordinator_epoch=coordinator_epoch,
        timestamp_ms=TS,
    )


def end_txn(log: UnifiedLog, producer_id: int, committed: bool) -> int:
    return log.append_as_leader(
        marker(producer_id, committed), 0, TS, AppendOrigin.COORDINATOR
    ).first_offset


def aborted(log: UnifiedLog) -> list[tuple[int, int, int]]:
    return [
        (t.producer_id, t.first_offset, t.last_offset)
        for t in log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset)
    ]


# -- the file --------------------------------------------------------------------------------


def test_txn_index_file_round_trip_in_kafkas_layout(tmp_path):
    path = str(tmp_path / "00000000000000000100.txnindex")
    index = TransactionIndex(path, 100)
    assert not os.path.exists(path)  # created with the first entry
    entries = [AbortedTxn(7, 100, 105, 100), AbortedTxn(8, 101, 110, 111)]
    for entry in entries:
        index.append(entry)
    with pytest.raises(ValueError, match="not after"):
        index.append(AbortedTxn(9, 102, 110, 111))
    index.flush()
    index.close()
    raw = open(path, "rb").read()
    assert len(raw) == 2 * ENTRY_BYTES == 68
    assert raw[:ENTRY_BYTES] == AbortedTxnStruct.build(
        {"version": 0, "producer_id": 7, "first_offset": 100, "last_offset": 105,
         "last_stable_offset": 100}
    )  # fmt: skip
    reopened = TransactionIndex(path, 100)
    assert reopened.entries == entries
    reopened.sanity_check()
    reopened.truncate_to(110)
    assert reopened.entries == entries[:1] and os.path.getsize(path) == ENTRY_BYTES
    reopened.delete()
    assert not os.path.exists(path)


def test_txn_index_torn_tail_is_ignored_and_overwritten(tmp_path):
    path = str(tmp_path / "00000000000000000000.txnindex")
    index = TransactionIndex(path, 0)
    index.append(AbortedTxn(1, 0, 3, 0))
    index.close()
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x01\x02")  # a torn second entry
    reopened = TransactionIndex(path, 0)
    assert reopened.entries == [AbortedTxn(1, 0, 3, 0)]
    reopened.append(AbortedTxn(2, 4, 8, 9))
    reopened.close()
    assert os.path.getsize(path) == 2 * ENTRY_BYTES
    assert TransactionIndex(path, 0).entries == [AbortedTxn(1, 0, 3, 0), AbortedTxn(2, 4, 8, 9)]


@pytest.mark.parametrize(
    "entry", [AbortedTxn(1, 0, 3, 0, version=1), AbortedTxn(1, 0, 49, 50), AbortedTxn(1, 70, 60, 0)]
)
def test_txn_index_sanity_check_rejects_foreign_entries(tmp_path, entry):
    path = str(tmp_path / "00000000000000000050.txnindex")
    with open(path, "wb") as f:
        f.write(entry.encode())
    with pytest.raises(CorruptIndexError):
        TransactionIndex(path, 50).sanity_check()


def test_collect_aborted_txns_stops_at_an_entry_whose_lso_reaches_the_bound(tmp_path):
    index = TransactionIndex(str(tmp_path / "x.txnindex"), 0)
    for entry in (AbortedTxn(1, 0, 5, 0), AbortedTxn(2, 3, 9, 10), AbortedTxn(3, 12, 20, 21)):
        index.append(entry)
    assert index.collect_aborted_txns(6, 12) == ([AbortedTxn(2, 3, 9, 10)], True)
    assert index.collect_aborted_txns(6, 30) == (
        [AbortedTxn(2, 3, 9, 10), AbortedTxn(3, 12, 20, 21)],
        False,
    )
    assert index.collect_aborted_txns(0, 10) == ([AbortedTxn(1, 0, 5, 0), AbortedTxn(2, 3, 9, 10)],
                                                 True)  # fmt: skip
    assert index.collect_aborted_txns(21, 30) == ([], False)


# -- the log: LSO, index, truncation, retention ---------------------------------------------


def test_last_stable_offset_rules(tmp_path):
    log = load_log(str(tmp_path / "t-0"), CONFIG)
    log.append_as_leader(data(1, 0), 0, TS)  # 0-1: producer 1's transaction
    log.append_as_leader(data(9, 0, transactional=False), 0, TS)  # 2-3: plain idempotent
    log.append_as_leader(data(2, 0), 0, TS)  # 4-5: producer 2's transaction
    log.update_high_watermark(log.log_end_offset)
    assert (log.high_watermark, log.last_stable_offset) == (6, 0)
    assert end_txn(log, 1, committed=False) == 6
    # The abort is not replicated yet: its transaction still holds the LSO.
    assert log.last_stable_offset == 0
    log.update_high_watermark(7)
    assert log.last_stable_offset == 4  # producer 2's transaction is open
    assert aborted(log) == [(1, 0, 6)]
    assert log.segments[-1].txn_index.entries == [AbortedTxn(1, 0, 6, 4)]
    end_txn(log, 2, committed=True)  # 7, not yet below the HW (7)
    assert log.last_stable_offset == 4
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == log.high_watermark == 8
    assert aborted(log) == [(1, 0, 6)]  # commits are not indexed


def test_truncation_reopens_transactions_and_cuts_the_index(tmp_path):
    log = load_log(str(tmp_path / "t-0"), CONFIG)
    log.append_as_leader(data(1, 0), 0, TS)  # 0-1
    end_txn(log, 1, committed=False)  # 2
    log.append_as_leader(data(1, 2), 0, TS)  # 3-4: a new transaction
    end_txn(log, 1, committed=False)  # 5
    assert aborted(log) == [(1, 0, 2), (1, 3, 5)]
    log.truncate_to(5)
    assert aborted(log) == [(1, 0, 2)]
    log.update_high_watermark(5)
    assert log.last_stable_offset == 3  # the second transaction is open again
    log.truncate_to(2)
    assert aborted(log) == [] and log.last_stable_offset == 0


def test_retention_and_delete_records_drop_the_index_with_its_segment(tmp_path):
    log = load_log(str(tmp_path / "t-0"), CONFIG)
    for sequence in range(0, 40, 2):
        log.append_as_leader(data(1, sequence), 0, TS)
        end_txn(log, 1, committed=False)
    assert len(log.segments) >= 3
    files = sorted(n for n in os.listdir(log.dir_path) if n.endswith(".txnindex"))
    assert len(files) == len(log.segments)
    log.update_high_watermark(log.log_end_offset)
    second = log.segments[1].base_offset
    log.delete_records_before(second)
    assert sorted(n for n in os.listdir(log.dir_path) if n.endswith(".txnindex")) == files[1:]
    assert aborted(log)[0][2] >= second


# -- recovery --------------------------------------------------------------------------------


def write_transactions(tmp_path) -> tuple[LogManager, UnifiedLog]:
    manager = LogManager(tmp_path / "live", CONFIG, now_ms=0)
    log = manager.get_or_create_log(TOPIC, PARTITION)
    sequences = {1: 0, 2: 0}
    for round_ in range(12):
        for producer_id in (1, 2):
            log.append_as_leader(data(producer_id, sequences[producer_id]), 0, TS)
            sequences[producer_id] += 2
        end_txn(log, 1, committed=round_ % 3 != 0)
        end_txn(log, 2, committed=round_ % 2 == 0)
    log.append_as_leader(data(2, sequences[2]), 0, TS)  # left open
    log.update_high_watermark(log.log_end_offset)
    assert len(log.segments) >= 4
    return manager, log


def crash_copy(tmp_path, manager: LogManager) -> str:
    target = tmp_path / f"crash{len(os.listdir(tmp_path))}"
    shutil.copytree(manager.log_dir, target)  # no close: what a kill -9 leaves
    return str(target)


def reopen(log_dir: str) -> UnifiedLog:
    log = LogManager(log_dir, CONFIG, now_ms=10_000).get_log(TOPIC, PARTITION)
    assert log is not None
    return log


def txn_index_files(log_dir: str) -> list[str]:
    directory = os.path.join(log_dir, f"{TOPIC}-{PARTITION}")
    return sorted(os.path.join(directory, n) for n in os.listdir(directory)
                  if n.endswith(".txnindex"))  # fmt: skip


def test_unclean_shutdown_rebuilds_lost_or_corrupt_txn_indexes(tmp_path):
    manager, log = write_transactions(tmp_path)
    expected = aborted(log)
    per_segment = [s.txn_index.entries for s in log.segments]
    ongoing = log.producer_state_manager.ongoing_txns
    assert len(expected) == 10 and list(ongoing.values()) == [2]

    copy = crash_copy(tmp_path, manager)
    recovered = reopen(copy)
    assert aborted(recovered) == expected
    assert [s.txn_index.entries for s in recovered.segments] == per_segment
    assert recovered.producer_state_manager.ongoing_txns == ongoing

    # With everything flushed and the recovery point checkpointed, only the active segment is
    # recovered, plus any whose index fails its check: the first one's, an unknown entry
    # version. The active segment's index file is lost (an unflushed create).
    log.flush()
    manager.checkpoint_recovery_points()
    copy = crash_copy(tmp_path, manager)
    files = txn_index_files(copy)
    assert len(files) == len(log.segments)
    os.remove(files[-1])
    with open(files[0], "r+b") as f:
        f.write(b"\x00\x07")
    recovered = reopen(copy)
    assert aborted(recovered) == expected
    assert [s.txn_index.entries for s in recovered.segments] == per_segment
    manager.shutdown()


def test_clean_restart_keeps_indexes_and_the_open_transaction(tmp_path):
    manager, log = write_transactions(tmp_path)
    expected = aborted(log)
    lso = log.last_stable_offset
    manager.shutdown()
    recovered = reopen(str(tmp_path / "live"))
    assert aborted(recovered) == expected
    assert recovered.last_stable_offset == lso < recovered.high_watermark


# -- the rules against a model ---------------------------------------------------------------

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("data"), st.integers(1, 3), st.booleans()),
        st.tuples(st.just("end"), st.integers(1, 3), st.booleans()),
        st.tuples(st.just("hw"), st.integers(0, 3), st.just(False)),
    ),
    max_size=40,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_lso_and_aborted_transactions_match_a_model(tmp_path_factory, ops):
    directory = tmp_path_factory.mktemp("model")
    log = load_log(str(directory / "t-0"), CONFIG)
    sequences = {1: 0, 2: 0, 3: 0}
    open_first: dict[int, int] = {}  # producer -> first offset of its open transaction
    completed: list[tuple[int, int, int, bool]] = []  # (producer, first, marker, aborted)
    for kind, producer_id, flag in ops:
        if kind == "data":
            if producer_id in open_first and not flag:
                continue  # a non-transactional batch would be INVALID_TXN_STATE
            info = log.append_as_leader(data(producer_id, sequences[producer_id],
                                              transactional=flag), 0, TS)  # fmt: skip
            sequences[producer_id] += 2
            if flag:
                open_first.setdefault(producer_id, info.first_offset)
        elif kind == "end":
            offset = end_txn(log, producer_id, committed=flag)
            if producer_id in open_first:
                completed.append((producer_id, open_first.pop(producer_id), offset, not flag))
        else:
            log.update_high_watermark(log.high_watermark + producer_id)
        high_watermark = log.high_watermark
        bounds = [high_watermark, *open_first.values()]
        bounds += [first for _, first, end, _ in completed if end >= high_watermark]
        assert log.last_stable_offset == min(bounds)
    expected = [(p, first, end) for p, first, end, is_aborted in completed if is_aborted]
    assert aborted(log) == expected
    # Any fetch range sees exactly the aborted transactions overlapping it.
    end = log.log_end_offset
    for start in range(0, end + 1, 3):
        for upper in range(start, end + 1, 4):
            found = {(t.producer_id, t.first_offset, t.last_offset)
                     for t in log.collect_aborted_transactions(start, upper)}  # fmt: skip
            assert found == {(p, f, e) for p, f, e in expected if e >= start and f < upper}
    log.close()
    reloaded = load_log(str(directory / "t-0"), CONFIG, high_watermark=log.high_watermark)
    assert aborted(reloaded) == expected
    reloaded.close()


def test_coordinator_data_batches_skip_sequences_but_not_epochs(tmp_path):
    """A transactional offset commit: the group coordinator appends a transactional batch with
    no sequence (origin COORDINATOR); a client may not."""
    log = load_log(str(tmp_path / "t-0"), CONFIG)

    def offset_commit(producer_epoch: int) -> bytes:
        return build_batch(
            [Record(b"offset", key=b"group", timestamp_ms=TS)],
            producer_id=1,
            producer_epoch=producer_epoch,
            base_sequence=-1,
            is_transactional=True,
        )

    with pytest.raises(InvalidRecordError):
        log.append_as_leader(offset_commit(2), 0, TS)
    log.append_as_leader(offset_commit(2), 0, TS, AppendOrigin.COORDINATOR)
    log.append_as_leader(offset_commit(2), 0, TS, AppendOrigin.COORDINATOR)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(offset_commit(1), 0, TS, AppendOrigin.COORDINATOR)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 0
    marker = build_control_batch(ControlRecordType.COMMIT, producer_id=1, producer_epoch=2,
                                 coordinator_epoch=0, timestamp_ms=TS)  # fmt: skip
    log.append_as_leader(marker, 0, TS, AppendOrigin.COORDINATOR)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == log.log_end_offset == 3
