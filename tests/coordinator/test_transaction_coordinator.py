"""TransactionCoordinator, driven directly: a fake __transaction_state log, injected now_ms."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from log.common.errors import CoordinatorLoadInProgressError, ErrorCode
from log.coordinator.transaction_coordinator import (
    AddPartitionsResult,
    AppendOrigin,
    EndTxnResult,
    InitProducerIdResult,
    Step,
    TransactionCoordinator,
    TransactionCoordinatorConfig,
    TxnMarker,
    coordinator_error_for_append,
)
from log.coordinator.transaction_state import (
    MAX_PRODUCER_EPOCH,
    IllegalStateTransitionError,
    TransactionResult,
    TransactionVersion,
)
from log.coordinator.transaction_state import TransactionState as S

E = ErrorCode
TV0, TV2 = TransactionVersion.TV_0, TransactionVersion.TV_2
COMMIT, ABORT = TransactionResult.COMMIT, TransactionResult.ABORT
A0, B1 = ("a", 0), ("b", 1)


class Broker:
    """One coordinator over one __transaction_state partition, with its replicated log."""

    def __init__(self, level: TransactionVersion = TV2, log=None, coordinator_epoch: int = 1):
        self.ids = itertools.count(1000)
        self.log: list[tuple[bytes, bytes | None]] = [] if log is None else log
        config = TransactionCoordinatorConfig(
            transaction_max_timeout_ms=60_000,
            transaction_state_log_num_partitions=1,
            transaction_version_level=level,
        )
        self.c = TransactionCoordinator(config, self.allocate, lambda group: 7)
        self.coordinator_epoch = coordinator_epoch
        self.resumed = self.c.load(0, coordinator_epoch, list(self.log), 0)
        self.now_ms = 100
        self.fail_allocation = False

    def allocate(self) -> int:
        if self.fail_allocation:
            raise CoordinatorLoadInProgressError()
        return next(self.ids)

    def tick(self) -> int:
        self.now_ms += 1
        return self.now_ms

    def write(self, step: Step, error: ErrorCode = E.NONE) -> Step:
        """Replicate (or fail) the step's append; the next step."""
        assert step.append is not None and step.response is None
        if error == E.NONE:
            self.log.append((step.append.key, step.append.value))
        return self.c.on_append_complete(step.append, error, self.tick())

    def settle(self, step: Step):
        """Write every append and acknowledge every marker; the first response."""
        responses = []
        pending = [step]
        while pending:
            s = pending.pop()
            if s.response is not None:
                responses.append(s.response)
            if s.append is not None:
                pending.append(self.write(Step(append=s.append)))
            for marker in s.markers:
                pending.append(self.c.on_marker_result(marker, E.NONE, self.tick()))
        return responses[0] if responses else None

    def init(self, tid="tid", timeout_ms=1000, **kw) -> InitProducerIdResult:
        return self.settle(self.c.handle_init_producer_id(tid, timeout_ms, self.tick(), **kw))

    def add(self, pid, epoch, partitions=(A0, B1), tid="tid", version=TV0) -> ErrorCode:
        step = self.c.handle_add_partitions(tid, pid, epoch, partitions, self.tick(), version)
        errors = set(self.settle(step).errors.values())
        assert len(errors) == 1
        return errors.pop()

    def end(self, pid, epoch, result=COMMIT, tid="tid", version=TV0) -> EndTxnResult:
        return self.settle(self.c.handle_end_txn(tid, pid, epoch, result, self.tick(), version))

    def state(self, tid="tid"):
        return self.c.transaction(tid)


# -- InitProducerId --------------------------------------------------------------------------


def test_init_without_transactional_id_is_a_fresh_idempotent_producer():
    b = Broker()
    assert b.init(None) == InitProducerIdResult(E.NONE, 1000, 0)
    assert b.log == []
    b.fail_allocation = True
    assert b.init(None).error == E.COORDINATOR_LOAD_IN_PROGRESS


@pytest.mark.parametrize(
    "kwargs,error",
    [
        (dict(tid=""), E.INVALID_REQUEST),
        (dict(expected_producer_id=5), E.INVALID_REQUEST),  # id without epoch
        (dict(timeout_ms=60_001), E.INVALID_TRANSACTION_TIMEOUT),  # > transaction.max.timeout.ms
        (dict(timeout_ms=0), E.INVALID_TRANSACTION_TIMEOUT),
    ],
)
def test_init_refuses_bad_requests(kwargs, error):
    assert Broker().init(**kwargs).error == error


def test_init_answers_only_after_the_record_is_replicated():
    b = Broker()
    step = b.c.handle_init_producer_id("tid", 1000, b.tick())
    assert step.response is None and step.append.origin == AppendOrigin.INIT_PRODUCER_ID
    assert b.state().pending_state == S.EMPTY
    # a second InitProducerId meanwhile must wait
    assert b.init().error == E.CONCURRENT_TRANSACTIONS
    assert b.write(step).response == InitProducerIdResult(E.NONE, 1000, 0)
    assert (b.state().state, b.state().producer_epoch, b.state().pending_state) == (
        S.EMPTY,
        0,
        None,
    )


def test_init_whose_write_fails_changes_nothing():
    b = Broker()
    assert b.init().producer_epoch == 0
    step = b.c.handle_init_producer_id("tid", 1000, b.tick())
    answer = b.write(step, E.NOT_ENOUGH_REPLICAS).response
    assert answer == InitProducerIdResult(E.COORDINATOR_NOT_AVAILABLE)
    assert (b.state().producer_epoch, b.state().pending_state) == (0, None)


def test_each_init_bumps_the_epoch_and_fences_the_previous_producer():
    b = Broker()
    first = b.init()
    second = b.init()
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
    assert b.add(first.producer_id, first.producer_epoch) == E.PRODUCER_FENCED
    assert b.end(first.producer_id, first.producer_epoch).error == E.PRODUCER_FENCED
    assert b.add(first.producer_id + 1, 1) == E.INVALID_PRODUCER_ID_MAPPING
    assert b.add(second.producer_id, 1) == E.NONE


def test_init_aborts_an_ongoing_transaction_first_fencing_its_producer():
    b = Broker(level=TransactionVersion.TV_1)
    zombie = b.init()
    assert b.add(zombie.producer_id, 0) == E.NONE
    step = b.c.handle_init_producer_id("tid", 1000, b.tick())
    assert step.append.origin == AppendOrigin.FENCE_FOR_INIT
    assert step.append.transit.txn_state == S.PREPARE_ABORT
    assert step.append.transit.producer_epoch == 1  # the fence's bump
    after = b.write(step)
    assert after.response == InitProducerIdResult(E.CONCURRENT_TRANSACTIONS)
    assert {(m.topic_partition, m.producer_epoch, m.result) for m in after.markers} == {
        (A0, 1, ABORT), (B1, 1, ABORT),
    }  # fmt: skip
    # the zombie can no longer commit, even while the markers are in flight
    assert b.end(zombie.producer_id, 0).error == E.PRODUCER_FENCED
    for marker in after.markers:
        b.settle(b.c.on_marker_result(marker, E.NONE, b.tick()))
    assert b.state().state == S.COMPLETE_ABORT
    assert b.init() == InitProducerIdResult(E.NONE, zombie.producer_id, 2)


def test_a_failed_fence_is_not_bumped_twice_and_still_fences():
    b = Broker(level=TransactionVersion.TV_1)
    zombie = b.init()
    b.add(zombie.producer_id, 0)
    step = b.c.handle_init_producer_id("tid", 1000, b.tick())
    assert b.write(step, E.NOT_LEADER_OR_FOLLOWER).response.error == E.NOT_COORDINATOR
    md = b.state()
    assert (md.state, md.producer_epoch, md.has_failed_epoch_fence) == (S.ONGOING, 1, True)
    assert b.end(zombie.producer_id, 0).error == E.PRODUCER_FENCED
    retry = b.c.handle_init_producer_id("tid", 1000, b.tick())
    assert retry.append.transit.producer_epoch == 1


def test_init_while_a_commit_is_being_completed_waits():
    b = Broker()
    p = b.init()
    b.add(p.producer_id, 0)
    after = b.write(b.c.handle_end_txn("tid", p.producer_id, 0, COMMIT, b.tick(), TV0))
    assert after.markers and b.state().state == S.PREPARE_COMMIT
    assert b.init().error == E.CONCURRENT_TRANSACTIONS


def test_exhausted_epochs_rotate_the_producer_id():
    b = Broker()
    b.init()
    b.state().producer_epoch = MAX_PRODUCER_EPOCH - 1
    answer = b.init()
    assert (answer.producer_id, answer.producer_epoch) == (1001, 0)
    assert b.state().prev_producer_id == 1000


def test_kip360_expected_epoch():
    b = Broker()
    p = b.init()
    bumped = b.init(expected_producer_id=p.producer_id, expected_producer_epoch=0)
    assert bumped.producer_epoch == 1
    # a retry of that bump (the answer was lost) gets the same epoch
    again = b.init(expected_producer_id=p.producer_id, expected_producer_epoch=0)
    assert again.producer_epoch == 1
    b.init()  # another instance: epoch 2, the last epoch is forgotten
    stale = b.init(expected_producer_id=p.producer_id, expected_producer_epoch=1)
    assert stale.error == E.PRODUCER_FENCED
    assert b.init(expected_producer_id=4242, expected_producer_epoch=2).error == E.PRODUCER_FENCED


def test_allocation_failure_for_a_new_id():
    b = Broker()
    b.fail_allocation = True
    assert b.init().error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert b.state() is None


# -- AddPartitionsToTxn, AddOffsetsToTxn, verification ---------------------------------------


def test_add_partitions_checks_the_producer():
    b = Broker()
    assert b.add(1000, 0) == E.INVALID_PRODUCER_ID_MAPPING  # unknown transactional id
    p = b.init()
    assert b.add(p.producer_id, 1) == E.PRODUCER_FENCED
    assert b.add(p.producer_id, 0, tid="") == E.INVALID_REQUEST
    assert b.add(p.producer_id, 0) == E.NONE
    md = b.state()
    assert (md.state, md.topic_partitions, md.txn_start_timestamp_ms) == (
        S.ONGOING,
        {A0, B1},
        b.now_ms - 1,
    )
    # already there: answered at once, nothing written
    before = len(b.log)
    assert b.c.handle_add_partitions("tid", p.producer_id, 0, [A0], b.tick()).append is None
    assert len(b.log) == before


def test_add_partitions_waits_for_a_pending_transition():
    b = Broker()
    p = b.init()
    step = b.c.handle_add_partitions("tid", p.producer_id, 0, [A0], b.tick())
    assert b.add(p.producer_id, 0, [B1]) == E.CONCURRENT_TRANSACTIONS
    b.write(step)
    b.write(b.c.handle_end_txn("tid", p.producer_id, 0, COMMIT, b.tick()))
    assert b.add(p.producer_id, 0, [B1]) == E.CONCURRENT_TRANSACTIONS  # PrepareCommit


def test_add_offsets_adds_the_groups_offsets_partition():
    b = Broker()
    p = b.init()
    step = b.c.handle_add_offsets("tid", p.producer_id, 0, "group", b.tick())
    assert b.settle(step) == AddPartitionsResult({("__consumer_offsets", 7): E.NONE})
    assert b.state().topic_partitions == {("__consumer_offsets", 7)}


def test_verify_only_reports_partitions_outside_the_transaction_as_abortable():
    b = Broker()
    p = b.init()
    b.add(p.producer_id, 0, [A0])
    verify = b.c.handle_verify_partitions("tid", p.producer_id, 0, [A0, B1]).response
    assert verify.errors == {A0: E.NONE, B1: E.TRANSACTION_ABORTABLE}
    assert b.c.handle_verify_partitions("tid", p.producer_id, 1, [A0]).response.errors == {
        A0: E.PRODUCER_FENCED
    }
    assert b.c.handle_verify_partitions("", p.producer_id, 0, [A0]).response.errors == {
        A0: E.INVALID_REQUEST
    }
    assert b.c.handle_verify_partitions("x", 1, 0, [A0]).response.errors == {
        A0: E.INVALID_PRODUCER_ID_MAPPING
    }
    b.write(b.c.handle_end_txn("tid", p.producer_id, 0, ABORT, b.tick()))
    assert b.c.handle_verify_partitions("tid", p.producer_id, 0, [A0]).response.errors == {
        A0: E.CONCURRENT_TRANSACTIONS
    }


# -- EndTxn, transaction version 1 -----------------------------------------------------------


def _ongoing(b: Broker, version=TV0, partitions=(A0, B1)):
    p = b.init()
    assert b.add(p.producer_id, p.producer_epoch, partitions, version=version) == E.NONE
    return p.producer_id, p.producer_epoch


def test_v1_commit_answers_after_prepare_then_markers_then_complete():
    b = Broker()
    pid, epoch = _ongoing(b)
    step = b.c.handle_end_txn("tid", pid, epoch, COMMIT, b.tick())
    assert step.response is None and step.append.transit.txn_state == S.PREPARE_COMMIT
    after = b.write(step)
    assert after.response == EndTxnResult(E.NONE, pid, epoch)
    assert after.markers == (
        TxnMarker("tid", A0, pid, epoch, COMMIT, 1, TV0),
        TxnMarker("tid", B1, pid, epoch, COMMIT, 1, TV0),
    )
    assert (b.state().state, b.state().pending_state) == (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
    assert b.c.on_marker_result(after.markers[0], E.NONE, b.tick()) == Step()
    last = b.c.on_marker_result(after.markers[1], E.NONE, b.tick())
    assert last.append.origin == AppendOrigin.COMPLETE_TXN
    assert b.write(last) == Step()
    assert (b.state().state, b.state().topic_partitions) == (S.COMPLETE_COMMIT, set())


def test_v1_end_txn_states():
    b = Broker()
    pid, epoch = _ongoing(b)
    b.write(b.c.handle_end_txn("tid", pid, epoch, COMMIT, b.tick()))
    assert b.end(pid, epoch, COMMIT).error == E.CONCURRENT_TRANSACTIONS  # markers in flight
    b2 = Broker()
    pid, epoch = _ongoing(b2)
    assert b2.end(pid, epoch, COMMIT).error == E.NONE
    assert b2.end(pid, epoch, COMMIT) == EndTxnResult(E.NONE, pid, epoch)  # a retry
    assert b2.end(pid, epoch, ABORT).error == E.INVALID_TXN_STATE
    assert b2.end(pid, epoch + 1, COMMIT).error == E.PRODUCER_FENCED
    assert b2.end(pid + 1, epoch, COMMIT).error == E.INVALID_PRODUCER_ID_MAPPING
    assert b2.end(pid, epoch, COMMIT, tid="nobody").error == E.INVALID_PRODUCER_ID_MAPPING
    assert b2.end(pid, epoch, COMMIT, tid="").error == E.INVALID_REQUEST
    b3 = Broker()
    p = b3.init()
    assert b3.end(p.producer_id, 0, COMMIT).error == E.INVALID_TXN_STATE  # Empty
    assert b3.end(p.producer_id, 0, ABORT).error == E.INVALID_TXN_STATE  # Empty, V1


def test_v1_prepare_abort_retry_and_mismatch():
    b = Broker()
    pid, epoch = _ongoing(b)
    markers = b.write(b.c.handle_end_txn("tid", pid, epoch, ABORT, b.tick())).markers
    assert b.end(pid, epoch, COMMIT).error == E.CONCURRENT_TRANSACTIONS  # Complete* pending
    for m in markers:
        complete = b.c.on_marker_result(m, E.NONE, b.tick())
    b.write(complete, E.NOT_LEADER_OR_FOLLOWER)  # left in PrepareAbort, nothing pending
    assert b.end(pid, epoch, ABORT).error == E.CONCURRENT_TRANSACTIONS
    assert b.end(pid, epoch, COMMIT).error == E.INVALID_TXN_STATE


# -- EndTxn, transaction version 2 (KIP-890 part 2) ------------------------------------------


def test_v2_bumps_the_epoch_per_transaction_and_answers_it():
    b = Broker()
    pid, epoch = _ongoing(b, TV2)
    step = b.c.handle_end_txn("tid", pid, epoch, COMMIT, b.tick(), TV2)
    after = b.write(step)
    assert after.response == EndTxnResult(E.NONE, pid, epoch + 1)
    assert {m.producer_epoch for m in after.markers} == {epoch + 1}
    # a retry while the markers are in flight is told to wait; with the epoch it used
    assert b.end(pid, epoch, COMMIT, version=TV2).error == E.CONCURRENT_TRANSACTIONS
    for m in after.markers:
        b.settle(b.c.on_marker_result(m, E.NONE, b.tick()))
    assert (b.state().producer_epoch, b.state().last_producer_epoch) == (epoch + 1, epoch)
    # a retry after completion gets the first answer
    assert b.end(pid, epoch, COMMIT, version=TV2) == EndTxnResult(E.NONE, pid, epoch + 1)
    assert b.end(pid, epoch, ABORT, version=TV2).error == E.INVALID_TXN_STATE
    # the new epoch commits nothing yet; an older one is a zombie
    assert b.end(pid, epoch + 1, COMMIT, version=TV2).error == E.INVALID_TXN_STATE
    assert b.end(pid, epoch - 1, COMMIT, version=TV2).error == E.PRODUCER_FENCED
    # the next transaction: partitions added by the partition leaders, then commit
    assert b.add(pid, epoch + 1, [A0], version=TV2) == E.NONE
    assert b.end(pid, epoch + 1, COMMIT, version=TV2) == EndTxnResult(E.NONE, pid, epoch + 2)


@pytest.mark.parametrize("finish", [None, COMMIT, ABORT])
def test_v2_abort_without_partitions_bumps_and_completes_at_once(finish):
    b = Broker()
    p = b.init()
    pid, epoch = p.producer_id, p.producer_epoch
    if finish is not None:  # a finished previous transaction
        b.add(pid, epoch, [A0], version=TV2)
        epoch = b.end(pid, epoch, finish, version=TV2).producer_epoch
    step = b.c.handle_end_txn("tid", pid, epoch, ABORT, b.tick(), TV2)
    assert step.append.transit.txn_state == S.PREPARE_ABORT
    after = b.write(step)
    assert after.response == EndTxnResult(E.NONE, pid, epoch + 1)
    assert after.markers == () and after.append.origin == AppendOrigin.COMPLETE_TXN
    b.write(Step(append=after.append))
    assert (b.state().state, b.state().producer_epoch) == (S.COMPLETE_ABORT, epoch + 1)


def test_v2_epoch_overflow_moves_to_a_new_producer_id():
    b = Broker()
    pid, _ = _ongoing(b, TV2)
    b.state().producer_epoch = MAX_PRODUCER_EPOCH - 2
    b.end(pid, MAX_PRODUCER_EPOCH - 2, COMMIT, version=TV2)
    b.add(pid, MAX_PRODUCER_EPOCH - 1, [A0], version=TV2)
    step = b.c.handle_end_txn("tid", pid, MAX_PRODUCER_EPOCH - 1, COMMIT, b.tick(), TV2)
    assert step.append.transit.next_producer_id == 1001
    after = b.write(step)
    assert after.response == EndTxnResult(E.NONE, 1001, 0)
    assert {m.producer_epoch for m in after.markers} == {MAX_PRODUCER_EPOCH}
    for m in after.markers:
        b.settle(b.c.on_marker_result(m, E.NONE, b.tick()))
    md = b.state()
    assert (md.producer_id, md.prev_producer_id, md.producer_epoch) == (1001, pid, 0)
    # the client's retry with the old id at MAX-1 is recognised
    retry = b.end(pid, MAX_PRODUCER_EPOCH - 1, COMMIT, version=TV2)
    assert retry == EndTxnResult(E.NONE, 1001, 0)


def test_v2_retry_survives_a_coordinator_fail_over():
    b = Broker()
    pid, epoch = _ongoing(b, TV2)
    b.end(pid, epoch, COMMIT, version=TV2)
    b2 = Broker(log=list(b.log), coordinator_epoch=2)
    assert b2.end(pid, epoch, COMMIT, version=TV2) == EndTxnResult(E.NONE, pid, epoch + 1)


# -- timeouts --------------------------------------------------------------------------------


@pytest.mark.parametrize("level,epoch_after", [(TransactionVersion.TV_1, 1), (TV2, 2)])
def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(level, epoch_after):
    b = Broker(level=level)
    pid, epoch = _ongoing(b)
    start = b.state().txn_start_timestamp_ms
    assert b.c.expired_transactions(start + 1000) == []  # not before the timeout
    [step] = b.c.expired_transactions(start + 1001)
    assert step.append.origin == AppendOrigin.TIMEOUT_ABORT
    assert b.c.expired_transactions(start + 1002) == []  # pending: not twice
    after = b.write(step)
    assert after.response is None and {m.result for m in after.markers} == {ABORT}
    assert {m.producer_epoch for m in after.markers} == {epoch_after}
    assert b.end(pid, epoch, COMMIT).error == E.PRODUCER_FENCED
    for m in after.markers:
        b.settle(b.c.on_marker_result(m, E.NONE, b.tick()))
    assert b.state().state == S.COMPLETE_ABORT


# -- markers ---------------------------------------------------------------------------------


def _markers_in_flight(b: Broker):
    pid, epoch = _ongoing(b)
    return b.write(b.c.handle_end_txn("tid", pid, epoch, COMMIT, b.tick())).markers


@pytest.mark.parametrize("error", sorted({E.NOT_LEADER_OR_FOLLOWER, E.REQUEST_TIMED_OUT,
                                          E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS,
                                          E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                                          E.KAFKA_STORAGE_ERROR}))  # fmt: skip
def test_retriable_marker_errors_resend(error):
    b = Broker()
    markers = _markers_in_flight(b)
    assert b.c.on_marker_result(markers[0], error, b.tick()) == Step(markers=(markers[0],))


def test_fenced_markers_cancel_the_completion():
    b = Broker()
    markers = _markers_in_flight(b)
    assert b.c.on_marker_result(markers[0], E.INVALID_PRODUCER_EPOCH, b.tick()) == Step()
    assert b.c.on_marker_result(markers[1], E.NONE, b.tick()) == Step()
    assert b.state().state == S.PREPARE_COMMIT


def test_unsupported_and_deleted_partitions_count_as_done():
    b = Broker()
    markers = _markers_in_flight(b)
    assert b.c.on_marker_result(markers[0], E.UNSUPPORTED_VERSION, b.tick()) == Step()
    done = b.c.on_marker_partition_deleted(markers[1], b.tick())
    assert done.append.transit.txn_state == S.COMPLETE_COMMIT


def test_fatal_marker_errors_raise():
    b = Broker()
    markers = _markers_in_flight(b)
    with pytest.raises(IllegalStateTransitionError):
        b.c.on_marker_result(markers[0], E.CORRUPT_MESSAGE, b.tick())


def test_a_complete_record_that_fails_is_retried_or_left_to_the_next_coordinator():
    b = Broker()
    markers = _markers_in_flight(b)
    b.c.on_marker_result(markers[0], E.NONE, b.tick())
    complete = b.c.on_marker_result(markers[1], E.NONE, b.tick())
    assert b.write(complete, E.NOT_ENOUGH_REPLICAS) == complete  # retried, still pending
    assert b.state().pending_state == S.COMPLETE_COMMIT
    assert b.write(complete, E.NOT_LEADER_OR_FOLLOWER) == Step()  # someone else finishes it
    assert (b.state().state, b.state().pending_state) == (S.PREPARE_COMMIT, None)


def test_append_errors_map_to_coordinator_errors():
    assert coordinator_error_for_append(E.REQUEST_TIMED_OUT) == E.COORDINATOR_NOT_AVAILABLE
    assert coordinator_error_for_append(E.KAFKA_STORAGE_ERROR) == E.NOT_COORDINATOR
    assert coordinator_error_for_append(E.MESSAGE_TOO_LARGE) == E.UNKNOWN_SERVER_ERROR
    assert coordinator_error_for_append(E.INVALID_REQUEST) == E.INVALID_REQUEST


# -- loading and fail-over -------------------------------------------------------------------


def test_requests_while_loading_and_after_unloading():
    b = Broker()
    b.c.begin_load(0, 2)
    assert b.init().error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert b.c.complete_load(0, 2, [], 0) == []
    b.c.unload(0)
    assert b.init().error == E.NOT_COORDINATOR
    assert b.add(1, 0) == E.NOT_COORDINATOR
    assert b.end(1, 0).error == E.NOT_COORDINATOR


def test_a_load_superseded_by_an_unload_installs_nothing():
    b = Broker()
    b.c.begin_load(0, 2)
    b.c.unload(0, 2)
    assert b.c.complete_load(0, 2, [], 0) == []
    assert b.init().error == E.NOT_COORDINATOR


def test_a_new_coordinator_finishes_a_prepared_commit():
    b = Broker()
    pid, epoch = _ongoing(b)
    old_markers = b.write(b.c.handle_end_txn("tid", pid, epoch, COMMIT, b.tick())).markers
    # fail-over: the new leader loads the replicated log under coordinator epoch 2
    b2 = Broker(log=list(b.log), coordinator_epoch=2)
    [resumed] = b2.resumed
    assert {(m.topic_partition, m.result, m.coordinator_epoch) for m in resumed.markers} == {
        (A0, COMMIT, 2), (B1, COMMIT, 2),
    }  # fmt: skip
    assert b2.end(pid, epoch, COMMIT).error == E.CONCURRENT_TRANSACTIONS
    for m in resumed.markers:
        b2.settle(b2.c.on_marker_result(m, E.NONE, b2.tick()))
    assert b2.state().state == S.COMPLETE_COMMIT
    # the deposed coordinator's late answers change nothing there
    b.c.unload(0)
    assert b.c.on_marker_result(old_markers[0], E.NONE, b.tick()) == Step()


def test_a_write_completing_after_the_coordinator_epoch_changed_is_not_coordinator():
    b = Broker()
    p = b.init()
    step = b.c.handle_add_partitions("tid", p.producer_id, 0, [A0], b.tick())
    b.c.load(0, 2, list(b.log), b.tick())  # re-elected with a newer epoch meanwhile
    assert b.write(step).response.errors == {A0: E.NOT_COORDINATOR}
    assert b.state().state == S.EMPTY


def test_tombstones_and_unknown_keys_on_load():
    b = Broker()
    b.init()
    key = b.log[0][0]
    b2 = Broker(log=b.log + [(b"\x00\x09junk", b"junk"), (key, None)], coordinator_epoch=2)
    assert b2.state() is None


# -- property: random clients, write failures, lost answers and fail-overs --------------------


class Client:
    def __init__(self, index: int, tid: str, version: TransactionVersion):
        self.index, self.tid, self.version = index, tid, version
        self.producer_id, self.producer_epoch = -1, -1
        self.last_end: tuple[int, int, TransactionResult] | None = None  # to retry it


class Simulation:
    """Clients (two instances per transactional id, so one may be a zombie), one replicated
    __transaction_state log, the writes and markers in flight, and coordinator fail-overs.
    Records every outcome decided per transaction (transactional id, start time: now_ms only
    grows, so a start time names one transaction) and checks it never has two, and that no
    commit is accepted from an instance another InitProducerId has since superseded."""

    TIDS = ("t0", "t1")
    PARTITIONS = (("a", 0), ("a", 1), ("b", 0))

    def __init__(self, level: TransactionVersion, client_versions: list[TransactionVersion]):
        self.level = level
        self.log: list[tuple[bytes, bytes | None]] = []
        self.ids = itertools.count(1000)
        self.now_ms = 0
        self.coordinator_epoch = 0
        self.appends: list[tuple] = []  # (coordinator, append, client or None)
        self.markers: list[tuple] = []  # (coordinator, marker)
        self.clients = [Client(i, self.TIDS[i % 2], v) for i, v in enumerate(client_versions)]
        self.latest: dict[str, int] = {}  # tid -> index of the instance last initialised
        self.outcomes: dict[tuple[str, int], set[TransactionResult]] = {}
        self.c = None
        self.fail_over()

    def tick(self, ms: int = 1) -> int:
        self.now_ms += ms
        return self.now_ms

    def fail_over(self) -> None:
        old = self.c
        if old is not None:  # the deposed leader's writes fail; it forgets everything
            for coordinator, append, client in [a for a in self.appends if a[0] is old]:
                self.appends.remove((coordinator, append, client))
                step = old.on_append_complete(append, E.NOT_LEADER_OR_FOLLOWER, self.tick())
                self.handle(old, step, client)
            old.unload(0)
            self.markers = [m for m in self.markers if m[0] is not old]
        self.coordinator_epoch += 1
        config = TransactionCoordinatorConfig(1000, 1, self.level)
        self.c = TransactionCoordinator(config, lambda: next(self.ids), lambda g: 3)
        for step in self.c.load(0, self.coordinator_epoch, list(self.log), self.tick()):
            self.handle(self.c, step, None)

    def handle(self, coordinator, step: Step, client: Client | None) -> None:
        if step.response is not None and client is not None:
            self.answer(client, step.response)
        if step.append is not None:
            self.appends.append((coordinator, step.append, client))
        for marker in step.markers:
            md = coordinator.transaction(marker.transactional_id)
            self.decide(marker.transactional_id, md.txn_start_timestamp_ms, marker.result)
            self.markers.append((coordinator, marker))

    def decide(self, tid: str, start_ms: int, result: TransactionResult) -> None:
        seen = self.outcomes.setdefault((tid, start_ms), set())
        seen.add(result)
        assert len(seen) == 1, f"{tid} started at {start_ms} both committed and aborted"

    def answer(self, client: Client, response) -> None:
        if isinstance(response, InitProducerIdResult) and response.error == E.NONE:
            client.producer_id, client.producer_epoch = (
                response.producer_id,
                response.producer_epoch,
            )
            self.latest[client.tid] = client.index
        errors = (
            set(response.errors.values()) if isinstance(response, AddPartitionsResult) else set()
        )
        if E.PRODUCER_FENCED in errors | {getattr(response, "error", None)}:
            client.producer_id = -1  # fatal for a producer: it is restarted, re-initialising
        if isinstance(response, EndTxnResult) and response.error == E.NONE:
            if client.version == TV2:
                client.producer_id = response.producer_id
                client.producer_epoch = response.producer_epoch

    # -- operations, each picking its target with `choice` ----------------------------------

    def pick(self, choice: int) -> Client:
        """Mostly the live instance of a transactional id; one time in three any (a zombie)."""
        client = self.clients[choice % len(self.clients)]
        if (choice // 7) % 3 and client.tid in self.latest:
            return self.clients[self.latest[client.tid]]
        return client

    def op_init(self, choice: int) -> None:
        client = self.clients[choice % len(self.clients)]
        step = self.c.handle_init_producer_id(client.tid, 1000, self.tick())
        self.handle(self.c, step, client)

    def op_add(self, choice: int) -> None:
        client = self.pick(choice)
        if client.producer_id == -1:
            return self.op_init(choice)
        partition = self.PARTITIONS[choice // len(self.clients) % len(self.PARTITIONS)]
        step = self.c.handle_add_partitions(
            client.tid, client.producer_id, client.producer_epoch, [partition], self.tick(),
            client.version,
        )  # fmt: skip
        self.handle(self.c, step, client)

    def op_end(self, choice: int) -> None:
        client = self.pick(choice)
        if client.producer_id == -1:
            return self.op_init(choice)
        result = COMMIT if choice // len(self.clients) % 3 else ABORT
        client.last_end = (client.producer_id, client.producer_epoch, result)
        self.send_end(client, *client.last_end)

    def op_retry_end(self, choice: int) -> None:
        """A client resends its last EndTxn as if the answer was lost."""
        client = self.clients[choice % len(self.clients)]
        if client.last_end is not None:
            self.send_end(client, *client.last_end)

    def send_end(self, client: Client, producer_id, producer_epoch, result) -> None:
        step = self.c.handle_end_txn(
            client.tid, producer_id, producer_epoch, result, self.tick(), client.version
        )
        if step.append is not None and step.append.transit.txn_state == S.PREPARE_COMMIT:
            assert self.latest.get(client.tid) == client.index, "a fenced producer committed"
        self.handle(self.c, step, client)

    def op_write(self, choice: int, error: ErrorCode = E.NONE, ghost: bool = False) -> None:
        if not self.appends:
            return
        coordinator, append, client = self.appends.pop(choice % len(self.appends))
        if error == E.NONE or ghost:  # a ghost is replicated but reported as timed out
            self.log.append((append.key, append.value))
        if error == E.NONE and append.origin == AppendOrigin.COMPLETE_TXN:
            state = append.transit.txn_state
            result = COMMIT if state == S.COMPLETE_COMMIT else ABORT
            self.decide(append.transactional_id, append.transit.txn_start_timestamp_ms, result)
        step = coordinator.on_append_complete(append, error, self.tick())
        self.handle(coordinator, step, client)

    def op_fail(self, choice: int) -> None:
        errors = (E.NOT_ENOUGH_REPLICAS, E.NOT_LEADER_OR_FOLLOWER, E.REQUEST_TIMED_OUT)
        self.op_write(choice, errors[choice % 3])

    def op_ghost(self, choice: int) -> None:
        self.op_write(choice, E.REQUEST_TIMED_OUT, ghost=True)

    def op_marker(self, choice: int) -> None:
        if not self.markers:
            return
        coordinator, marker = self.markers.pop(choice % len(self.markers))
        error = {0: E.NOT_LEADER_OR_FOLLOWER, 1: E.INVALID_PRODUCER_EPOCH}.get(choice % 9, E.NONE)
        self.handle(coordinator, coordinator.on_marker_result(marker, error, self.tick()), None)

    def op_timeout(self, choice: int) -> None:
        for step in self.c.expired_transactions(self.tick(1 + choice % 1500)):
            self.handle(self.c, step, None)

    def op_fail_over(self, choice: int) -> None:
        self.fail_over()

    def drain(self) -> None:
        """Fail over once more, then let every write and marker succeed: nothing stays prepared."""
        self.fail_over()
        for _ in range(1000):
            if self.appends:
                self.op_write(0)
            elif self.markers:
                coordinator, marker = self.markers.pop(0)
                self.handle(
                    coordinator, coordinator.on_marker_result(marker, E.NONE, self.tick()), None
                )
            else:
                break
        for md in self.c.transactions():
            assert md.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT), md
            assert md.pending_state is None, md


OPERATIONS = ["op_init", "op_add", "op_add", "op_end", "op_end", "op_write", "op_write",
              "op_write", "op_write", "op_fail", "op_ghost", "op_marker", "op_marker",
              "op_marker", "op_timeout", "op_fail_over", "op_retry_end"]  # fmt: skip


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_one_outcome_per_transaction_and_no_fenced_commit(seed):
    """Hypothesis picks the seed (and reports it on failure); a seeded random.Random picks the
    operations, which finds interleavings a shrinking strategy rarely builds (a zombie that
    outlives two fences)."""
    rng = random.Random(seed)
    level = rng.choice([TransactionVersion.TV_1, TV2])
    sim = Simulation(level, [rng.choice([TV0, TV2]) for _ in range(4)])
    for _ in range(rng.randint(20, 200)):
        getattr(sim, rng.choice(OPERATIONS))(rng.randrange(2**16))
    sim.drain()
