"""TransactionMetadata: Kafka's transition table, prepare/complete, epochs and fencing."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from log.coordinator.transaction_state import (
    MAX_PRODUCER_EPOCH,
    VALID_PREVIOUS_STATES,
    IllegalStateTransitionError,
    ProducerFencedError,
    TransactionMetadata,
    TransactionVersion,
    is_epoch_exhausted,
)
from log.coordinator.transaction_state import TransactionState as S

TV0, TV2 = TransactionVersion.TV_0, TransactionVersion.TV_2

# Kafka's TransactionState.validPreviousStates, written out independently of the module.
KAFKA_TABLE = {
    "Empty": {"Empty", "CompleteCommit", "CompleteAbort"},
    "Ongoing": {"Ongoing", "Empty", "CompleteCommit", "CompleteAbort"},
    "PrepareCommit": {"Ongoing"},
    "PrepareAbort": {"Ongoing", "PrepareEpochFence", "Empty", "CompleteCommit", "CompleteAbort"},
    "CompleteCommit": {"PrepareCommit"},
    "CompleteAbort": {"PrepareAbort"},
    "Dead": {"Empty", "CompleteAbort", "CompleteCommit"},
    "PrepareEpochFence": {"Ongoing"},
}


def md(state=S.EMPTY, epoch=5, partitions=(), **kw) -> TransactionMetadata:
    return TransactionMetadata(
        "tid", producer_id=100, producer_epoch=epoch, state=state,
        topic_partitions=set(partitions), txn_start_timestamp_ms=10 if state != S.EMPTY else -1,
        txn_last_update_timestamp_ms=10, **kw,
    )  # fmt: skip


def test_state_ids_and_names_are_kafkas():
    assert [(s.value, s.kafka_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"),
        (4, "CompleteCommit"), (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence"),
    ]  # fmt: skip


def test_the_table_is_kafkas():
    table = {
        t.kafka_name: {p.kafka_name for p in prev} for t, prev in VALID_PREVIOUS_STATES.items()
    }
    assert table == KAFKA_TABLE


@pytest.mark.parametrize("source,target", list(itertools.product(S, S)))
def test_every_transition_is_legal_exactly_when_kafka_allows_it(source, target):
    m = md(source)
    legal = source.kafka_name in KAFKA_TABLE[target.kafka_name]
    if legal:
        transit = m._prepare(target)
        assert (transit.txn_state, m.pending_state, m.state) == (target, target, source)
    else:
        with pytest.raises(IllegalStateTransitionError):
            m._prepare(target)
        assert m.pending_state is None


def test_one_pending_transition_at_a_time():
    m = md(S.ONGOING, partitions=[("a", 0)])
    m.prepare_abort_or_commit(S.PREPARE_COMMIT, TV0, -1, 20, False)
    with pytest.raises(IllegalStateTransitionError):
        m.prepare_add_partitions(frozenset({("b", 0)}), 20, TV0)
    m.abort_transition()  # the write failed: nothing changed
    assert (m.state, m.pending_state) == (S.ONGOING, None)
    m.prepare_add_partitions(frozenset({("b", 0)}), 21, TV0)


def test_nothing_changes_until_completion():
    m = md(S.EMPTY)
    transit = m.prepare_add_partitions(frozenset({("a", 0)}), 50, TV0)
    assert (m.state, m.topic_partitions, m.txn_start_timestamp_ms) == (S.EMPTY, set(), -1)
    m.complete_transition(transit)
    assert (m.state, m.topic_partitions, m.txn_start_timestamp_ms) == (S.ONGOING, {("a", 0)}, 50)
    assert m.pending_state is None


def test_completion_must_match_what_was_prepared():
    m = md(S.ONGOING, partitions=[("a", 0)])
    with pytest.raises(IllegalStateTransitionError):  # nothing pending
        m.complete_transition(
            md(S.ONGOING).prepare_abort_or_commit(S.PREPARE_COMMIT, TV0, -1, 1, False)
        )
    transit = m.prepare_abort_or_commit(S.PREPARE_COMMIT, TV0, -1, 20, False)
    for bad in (
        dataclasses.replace(transit, txn_state=S.PREPARE_ABORT),
        dataclasses.replace(transit, producer_epoch=9),
        dataclasses.replace(transit, producer_id=7),
        dataclasses.replace(transit, topic_partitions=frozenset()),
        dataclasses.replace(transit, txn_timeout_ms=1),
        dataclasses.replace(transit, txn_start_timestamp_ms=99),
    ):
        with pytest.raises(IllegalStateTransitionError):
            m.complete_transition(bad)
    m.complete_transition(transit)
    assert m.state == S.PREPARE_COMMIT


def test_prepare_epoch_fence_and_dead_are_never_completed():
    m = md(S.ONGOING, partitions=[("a", 0)])
    with pytest.raises(IllegalStateTransitionError):
        m.complete_transition(m.prepare_fence_producer_epoch())
    m = md(S.COMPLETE_ABORT)
    with pytest.raises(IllegalStateTransitionError):
        m.complete_transition(m.prepare_dead())


# -- epochs (InitProducerId) -----------------------------------------------------------------


def test_init_without_expected_epoch_bumps_and_forgets_the_last():
    m = md(S.COMPLETE_COMMIT, epoch=5, last_producer_epoch=4)
    t = m.prepare_increment_producer_epoch(3000, None, 77)
    assert (t.producer_epoch, t.last_producer_epoch, t.txn_timeout_ms) == (6, -1, 3000)
    assert (t.txn_state, t.topic_partitions, t.txn_start_timestamp_ms) == (S.EMPTY, frozenset(), -1)
    m.complete_transition(t)
    assert (m.producer_epoch, m.txn_timeout_ms, m.txn_last_update_timestamp_ms) == (6, 3000, 77)


def test_init_of_a_new_id_starts_at_epoch_zero():
    m = TransactionMetadata("tid", producer_id=9)  # epoch -1: just created
    t = m.prepare_increment_producer_epoch(1000, None, 1)
    assert (t.producer_id, t.producer_epoch) == (9, 0)


def test_init_with_expected_epoch_bumps_and_remembers_it():
    m = md(S.EMPTY, epoch=5)
    t = m.prepare_increment_producer_epoch(1000, 5, 1)
    assert (t.producer_epoch, t.last_producer_epoch) == (6, 5)
    m.complete_transition(t)
    # the client did not hear the answer and retries with 5: same epoch, no second bump
    t = m.prepare_increment_producer_epoch(1000, 5, 2)
    assert (t.producer_epoch, t.last_producer_epoch) == (6, 5)


def test_init_with_a_stale_expected_epoch_is_fenced():
    m = md(S.EMPTY, epoch=5, last_producer_epoch=4)
    with pytest.raises(ProducerFencedError) as raised:
        m.prepare_increment_producer_epoch(1000, 3, 1)
    assert raised.value.error_code.name == "PRODUCER_FENCED"
    assert m.pending_state is None


def test_exhausted_epochs_need_a_new_producer_id():
    assert not is_epoch_exhausted(MAX_PRODUCER_EPOCH - 2)
    assert is_epoch_exhausted(MAX_PRODUCER_EPOCH - 1)
    m = md(S.EMPTY, epoch=MAX_PRODUCER_EPOCH - 1)
    with pytest.raises(IllegalStateTransitionError):
        m.prepare_increment_producer_epoch(1000, None, 1)
    t = m.prepare_producer_id_rotation(200, 1000, 5, record_last_epoch=True)
    assert (t.producer_id, t.prev_producer_id, t.producer_epoch) == (200, 100, 0)
    assert t.last_producer_epoch == MAX_PRODUCER_EPOCH - 1
    m.complete_transition(t)
    assert (m.producer_id, m.producer_epoch) == (200, 0)


def test_no_rotation_in_the_middle_of_a_transaction():
    m = md(S.ONGOING, partitions=[("a", 0)])
    with pytest.raises(IllegalStateTransitionError):
        m.prepare_producer_id_rotation(200, 1000, 5, record_last_epoch=False)


# -- fencing ---------------------------------------------------------------------------------


def test_fence_bumps_the_epoch_once_even_if_its_write_failed():
    m = md(S.ONGOING, epoch=5, partitions=[("a", 0)])
    assert m.prepare_fence_producer_epoch().producer_epoch == 6
    m.begin_fence_abort(6)
    assert (m.producer_epoch, m.last_producer_epoch, m.pending_state) == (6, -1, None)
    m.has_failed_epoch_fence = True  # the PrepareAbort with epoch 6 did not make it
    assert m.prepare_fence_producer_epoch().producer_epoch == 6


def test_fence_never_overflows():
    m = md(S.ONGOING, epoch=MAX_PRODUCER_EPOCH, partitions=[("a", 0)])
    assert m.prepare_fence_producer_epoch().producer_epoch == MAX_PRODUCER_EPOCH


def test_a_written_prepare_clears_the_failed_fence_flag():
    m = md(S.PREPARE_ABORT, partitions=[("a", 0)], has_failed_epoch_fence=True)
    m.prepare_complete(30)
    assert not m.has_failed_epoch_fence


# -- commit / abort, transaction versions ----------------------------------------------------


def _run(m: TransactionMetadata, transit) -> TransactionMetadata:
    m.complete_transition(transit)
    return m


def test_v1_lifecycle_keeps_the_epoch():
    m = md(S.EMPTY, epoch=5)
    _run(m, m.prepare_add_partitions(frozenset({("a", 0), ("b", 1)}), 20, TV0))
    _run(m, m.prepare_add_partitions(frozenset({("c", 0)}), 21, TV0))
    assert (m.txn_start_timestamp_ms, len(m.topic_partitions)) == (20, 3)
    _run(m, m.prepare_abort_or_commit(S.PREPARE_COMMIT, TV0, -1, 22, False))
    assert (m.state, m.producer_epoch) == (S.PREPARE_COMMIT, 5)
    t = m.prepare_complete(23)
    for tp in list(m.topic_partitions):
        m.remove_partition(tp)
    _run(m, t)
    assert (m.state, m.producer_epoch, m.topic_partitions) == (S.COMPLETE_COMMIT, 5, set())


def test_v2_bumps_the_epoch_at_every_end():
    m = md(S.EMPTY, epoch=5)
    _run(m, m.prepare_add_partitions(frozenset({("a", 0)}), 20, TV2))
    _run(m, m.prepare_abort_or_commit(S.PREPARE_ABORT, TV2, -1, 22, False))
    assert (m.producer_epoch, m.last_producer_epoch) == (6, 5)
    _run(m, m.prepare_complete(23))
    assert (m.state, m.producer_epoch, m.last_producer_epoch) == (S.COMPLETE_ABORT, 6, 5)


def test_v2_overflow_moves_to_the_next_producer_id_at_completion():
    m = md(S.ONGOING, epoch=MAX_PRODUCER_EPOCH - 1, partitions=[("a", 0)])
    m.client_transaction_version = TV2
    _run(m, m.prepare_abort_or_commit(S.PREPARE_COMMIT, TV2, 300, 22, False))
    assert (m.producer_id, m.producer_epoch, m.next_producer_id) == (100, MAX_PRODUCER_EPOCH, 300)
    m.remove_partition(("a", 0))
    _run(m, m.prepare_complete(23))
    assert (m.producer_id, m.prev_producer_id, m.producer_epoch) == (300, 100, 0)
    assert (m.last_producer_epoch, m.next_producer_id) == (MAX_PRODUCER_EPOCH - 1, -1)


def test_v2_abort_at_max_epoch_does_not_overflow():
    m = md(S.ONGOING, epoch=MAX_PRODUCER_EPOCH, partitions=[("a", 0)])
    t = m.prepare_abort_or_commit(S.PREPARE_ABORT, TV2, -1, 22, False)
    assert (t.producer_epoch, t.last_producer_epoch) == (MAX_PRODUCER_EPOCH, MAX_PRODUCER_EPOCH)
    _run(m, t)


@pytest.mark.parametrize("source", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_v2_may_abort_a_transaction_without_partitions(source):
    m = md(source, epoch=5)
    t = m.prepare_abort_or_commit(S.PREPARE_ABORT, TV2, -1, 40, no_partition_added=True)
    assert (t.txn_start_timestamp_ms, t.producer_epoch) == (40, 6)
    _run(m, t)
    _run(m, m.prepare_complete(41))
    assert m.state == S.COMPLETE_ABORT


def test_markers_are_acknowledged_only_while_prepared():
    m = md(S.ONGOING, partitions=[("a", 0)])
    with pytest.raises(IllegalStateTransitionError):
        m.remove_partition(("a", 0))
