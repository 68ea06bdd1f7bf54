"""ProducerStateManager's transaction verification guards (KIP-890 part 1): handed out only when
the producer has no transaction open on the partition, shared by concurrent requests, voided by a
marker or a new producer epoch appended while the coordinator is being asked."""

from __future__ import annotations

from log.records.batch_header import read_header
from log.records.builder import Record, build_batch
from log.records.control import ControlRecordType, EndTransactionMarker, build_control_batch
from log.storage.producer_state import ProducerStateManager

PID = 1000


def txn_header(base_offset: int, epoch: int = 0, sequence: int = 0):
    return read_header(build_batch([Record(b"v")], base_offset=base_offset, producer_id=PID,
                                   producer_epoch=epoch, base_sequence=sequence,
                                   is_transactional=True))  # fmt: skip


def marker_header(base_offset: int, epoch: int = 0):
    batch = build_control_batch(ControlRecordType.ABORT, producer_id=PID, producer_epoch=epoch,
                                coordinator_epoch=0, timestamp_ms=0, base_offset=base_offset)  # fmt: skip
    return read_header(batch), EndTransactionMarker(ControlRecordType.ABORT, 0)


def test_no_guard_while_the_transaction_is_open_here():
    manager = ProducerStateManager(None)
    guard = manager.maybe_start_verification(PID, 0)
    assert guard is not None and manager.verification_holds(guard)
    assert manager.maybe_start_verification(PID, 0) is guard  # a concurrent request shares it
    manager.on_batch_appended(txn_header(0))  # the verified batch opens the transaction
    assert manager.verification_holds(guard)  # the concurrent request may append too
    assert manager.maybe_start_verification(PID, 0) is None  # open here: nothing to verify
    manager.on_batch_appended(*marker_header(1))
    assert manager.maybe_start_verification(PID, 0) is not None  # the next transaction


def test_a_marker_or_a_new_epoch_meanwhile_voids_the_guard():
    manager = ProducerStateManager(None)
    guard = manager.maybe_start_verification(PID, 0)
    assert guard is not None
    manager.on_batch_appended(*marker_header(0))  # the transaction ended while we asked
    assert not manager.verification_holds(guard)
    guard = manager.maybe_start_verification(PID, 0)
    assert guard is not None
    newer = manager.maybe_start_verification(PID, 1)  # a newer epoch replaces it
    assert newer is not None and newer is not guard
    assert not manager.verification_holds(guard) and manager.verification_holds(newer)
    manager.on_batch_appended(txn_header(1, epoch=2))  # a newer epoch's batch got in first
    assert not manager.verification_holds(newer)
