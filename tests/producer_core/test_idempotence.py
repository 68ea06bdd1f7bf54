"""IdempotenceManager driven through the accumulator: sequences, retries in order, duplicates,
out-of-order and unknown-producer handling with epoch bumps, unresolved sequences, fatal errors."""

import pytest

from log.common.errors import ErrorCode, InvalidProducerEpochError, MessageTooLargeError
from producer.cluster_view import StaticClusterView, TopicPartition
from producer.idempotence import MAX_PRODUCER_EPOCH

CLUSTER = StaticClusterView.uniform("t", 2, [1])
P0, P1 = TopicPartition("t", 0), TopicPartition("t", 1)
BIG = 1 << 20


@pytest.fixture
def acc(make_accumulator):
    acc = make_accumulator(idempotent=True, retry_backoff_ms=10, retry_backoff_max_ms=10)
    acc.idempotence.set_producer_id_and_epoch(1000, 0)
    return acc


def queue_batches(acc, append, partition, count, records_per_batch=3):
    """Append `count` batches of `records_per_batch` records to `partition` (linger elapses)."""
    value = b"x" * 300  # three 300-byte records fill a 1024-byte batch
    for _ in range(count * records_per_batch):
        append(acc, CLUSTER, "t", partition, value=value)
    assert acc.queue_sizes("t")[partition] == count


def drain_one(acc, now_ms=0):
    batches = acc.drain(CLUSTER, {1}, BIG, now_ms)[1]
    return batches


def test_no_producer_id_no_drain(make_accumulator, append):
    acc = make_accumulator(idempotent=True)
    append(acc, CLUSTER, "t", 0)
    assert drain_one(acc, 100) == []
    assert acc.idempotence.bump_idempotent_epoch_and_reset_id_if_needed()  # needs InitProducerId


def test_sequences_are_assigned_at_drain_and_acked_in_order(acc, append):
    queue_batches(acc, append, 0, 3)
    mgr = acc.idempotence
    drained = [drain_one(acc)[0] for _ in range(3)]
    assert [b.base_sequence for b in drained] == [0, 3, 6]
    assert all((b.producer_id, b.producer_epoch) == (1000, 0) for b in drained)
    assert mgr.sequence_number(P0) == 9 and mgr.first_in_flight_sequence(P0) == 0
    for index, batch in enumerate(drained):
        mgr.handle_completed_batch(batch, base_offset=index * 3)
        acc.complete(batch, base_offset=index * 3)
    assert mgr.last_acked_sequence(P0) == 8 and mgr.last_acked_offset(P0) == 8
    assert not mgr.has_in_flight_batches(P0)


def test_built_batch_carries_producer_state(acc, append):
    from log.records.batch_header import validate_batch

    queue_batches(acc, append, 0, 1)
    (batch,) = drain_one(acc, 100)
    header = validate_batch(batch.build())
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (1000, 0, 0)


def test_retries_keep_sequence_and_order_one_at_a_time(acc, append):
    queue_batches(acc, append, 0, 3)
    mgr = acc.idempotence
    a, b = drain_one(acc)[0], drain_one(acc)[0]
    for batch in (b, a):  # responses may arrive in any order
        assert acc.can_retry(batch, ErrorCode.NOT_LEADER_OR_FOLLOWER, now_ms=1)
        acc.reenqueue(batch, now_ms=1)
    queue = list(acc._topics["t"].batches[0])
    assert queue[:2] == [a, b] and not queue[2].has_sequence
    later = 100
    assert drain_one(acc, later) == [a]
    # b is a retry but a (earlier) is still in flight: b must wait, and the new batch is behind
    assert drain_one(acc, later) == []
    mgr.handle_completed_batch(a, 0)
    acc.complete(a, 0)
    assert drain_one(acc, later) == [b] and (b.base_sequence, b.attempts) == (3, 1)
    c = drain_one(acc, later)[0]
    assert c.base_sequence == 6


def test_duplicate_sequence_is_success_with_unknown_offsets(acc, append):
    queue_batches(acc, append, 0, 1)
    (batch,) = drain_one(acc)
    handles = batch.handles()
    acc.idempotence.handle_completed_batch(batch, base_offset=-1)  # DUPLICATE_SEQUENCE_NUMBER
    acc.complete(batch, base_offset=-1)
    assert [h.result().offset for h in handles] == [-1, -1, -1]
    assert acc.idempotence.last_acked_sequence(P0) == 2


def test_out_of_order_not_next_retries_without_bump(acc, append):
    queue_batches(acc, append, 0, 2)
    a, b = drain_one(acc)[0], drain_one(acc)[0]
    mgr = acc.idempotence
    assert acc.can_retry(b, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, now_ms=1)
    assert not mgr.epoch_bump_required  # a may still land, b just waits behind it
    acc.reenqueue(b, 1)
    mgr.handle_completed_batch(a, 0)
    acc.complete(a, 0)
    assert drain_one(acc, 100) == [b] and b.base_sequence == 3


def test_out_of_order_gap_bumps_epoch_once_safe_and_resequences(acc, append):
    queue_batches(acc, append, 0, 2)
    a, b = drain_one(acc)[0], drain_one(acc)[0]
    mgr = acc.idempotence
    # a is the next expected sequence, yet the broker reports a gap: state was lost
    assert acc.can_retry(a, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, now_ms=1)
    assert mgr.epoch_bump_required
    acc.reenqueue(a, 1)
    # b's request is still outstanding: bumping now could let it land under a reused sequence
    assert not mgr.bump_idempotent_epoch_and_reset_id_if_needed()
    assert mgr.producer_epoch == 0 and mgr.epoch_bump_required
    assert acc.can_retry(b, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, now_ms=2)
    acc.reenqueue(b, 2)
    assert not mgr.bump_idempotent_epoch_and_reset_id_if_needed()
    assert (mgr.producer_epoch, mgr.epoch_bump_required) == (1, False)
    assert [(x.producer_epoch, x.base_sequence, x.sequence_has_been_reset) for x in (a, b)] == [
        (1, 0, True),
        (1, 3, True),
    ]
    assert mgr.sequence_number(P0) == 6 and mgr.last_acked_sequence(P0) == -1
    assert drain_one(acc, 100) == [a]


def test_unknown_producer_id(acc, append):
    queue_batches(acc, append, 0, 1)
    (batch,) = drain_one(acc)
    mgr = acc.idempotence
    assert acc.can_retry(batch, ErrorCode.UNKNOWN_PRODUCER_ID, now_ms=1, log_start_offset=-1)
    assert not mgr.epoch_bump_required  # log start offset unknown: just retry
    assert acc.can_retry(batch, ErrorCode.UNKNOWN_PRODUCER_ID, now_ms=1, log_start_offset=500)
    assert mgr.epoch_bump_required  # the log head (and our state) was removed
    acc.reenqueue(batch, 1)
    mgr.bump_idempotent_epoch_and_reset_id_if_needed()
    assert (batch.producer_epoch, batch.base_sequence) == (1, 0)
    # once re-sequenced, another UNKNOWN_PRODUCER_ID retries without a new bump
    assert acc.can_retry(batch, ErrorCode.UNKNOWN_PRODUCER_ID, now_ms=2, log_start_offset=500)
    assert not mgr.epoch_bump_required


def test_other_partitions_move_to_new_epoch_after_their_in_flight_batches(acc, append):
    queue_batches(acc, append, 0, 1)
    queue_batches(acc, append, 1, 2)
    mgr = acc.idempotence
    first = drain_one(acc)
    p0 = next(b for b in first if b.topic_partition == P0)
    p1_old = next(b for b in first if b.topic_partition == P1)
    mgr.request_epoch_bump_for_partition(P0)
    mgr.handle_failed_batch(p0, MessageTooLargeError("gone"), adjust_sequence_numbers=True)
    acc.complete(p0, error=MessageTooLargeError("gone"))
    mgr.bump_idempotent_epoch_and_reset_id_if_needed()
    assert mgr.producer_epoch == 1 and mgr.has_stale_producer_id_and_epoch(P1)
    assert drain_one(acc, 100) == []  # p1's next batch waits for the old-epoch one in flight
    mgr.handle_completed_batch(p1_old, 0)
    acc.complete(p1_old, 0)
    (p1_new,) = drain_one(acc, 100)
    assert (p1_new.producer_epoch, p1_new.base_sequence) == (1, 0)


def expire(acc, batch, now_ms=5000):
    """What the sender does with a batch past delivery.timeout.ms that was sent before."""
    mgr = acc.idempotence
    if batch.in_retry:
        mgr.mark_sequence_unresolved(batch)  # maybe written, maybe not
    mgr.handle_failed_batch(batch, acc.delivery_timeout_error(batch, now_ms), False)
    queue = acc._topics["t"].batches[0]
    if batch in queue:
        queue.remove(batch)
    acc.complete(batch, error=acc.delivery_timeout_error(batch, now_ms))


def test_all_in_flight_expired_leaves_a_gap_and_bumps(acc, append):
    queue_batches(acc, append, 0, 3)
    mgr = acc.idempotence
    a, b = drain_one(acc)[0], drain_one(acc)[0]
    acc.reenqueue(a, 1)
    expire(acc, a)
    assert mgr.has_unresolved_sequence(P0)
    assert drain_one(acc, 100) == []  # no new sequence while unresolved
    acc.reenqueue(b, 2)
    expire(acc, b)
    mgr.maybe_resolve_sequences()
    assert not mgr.has_unresolved_sequence(P0) and mgr.epoch_bump_required
    mgr.bump_idempotent_epoch_and_reset_id_if_needed()
    (c,) = drain_one(acc, 100)
    assert (c.producer_epoch, c.base_sequence) == (1, 0)


def test_expired_batch_resolved_by_a_later_ack(acc, append):
    queue_batches(acc, append, 0, 3)
    mgr = acc.idempotence
    a, b = drain_one(acc)[0], drain_one(acc)[0]
    acc.reenqueue(a, 1)
    expire(acc, a)
    mgr.maybe_resolve_sequences()
    assert mgr.has_unresolved_sequence(P0)  # b still in flight
    mgr.handle_completed_batch(b, 3)  # b (seq 3) was accepted, so a (seq 0..2) was written too
    acc.complete(b, 3)
    mgr.maybe_resolve_sequences()
    assert not mgr.has_unresolved_sequence(P0) and not mgr.epoch_bump_required
    (c,) = drain_one(acc, 100)
    assert (c.producer_epoch, c.base_sequence) == (0, 6)


def test_unresolved_sequence_resolved_when_later_batches_cover_it(acc, append):
    queue_batches(acc, append, 0, 2)
    mgr = acc.idempotence
    a = drain_one(acc)[0]
    mgr.handle_completed_batch(a, 0)  # acked, then (say) the response was lost and it expired
    mgr.mark_sequence_unresolved(a)
    mgr.maybe_resolve_sequences()
    assert not mgr.has_unresolved_sequence(P0) and not mgr.epoch_bump_required


def test_fencing_is_fatal(acc, append):
    queue_batches(acc, append, 0, 2)
    (a,) = drain_one(acc)
    mgr = acc.idempotence
    mgr.handle_failed_batch(a, InvalidProducerEpochError("fenced"), adjust_sequence_numbers=True)
    assert mgr.has_fatal_error and isinstance(mgr.fatal_error, InvalidProducerEpochError)
    assert drain_one(acc, 100) == []
    assert not acc.can_retry(a, ErrorCode.NOT_LEADER_OR_FOLLOWER, now_ms=1)


def test_permanent_failure_with_retries_left_requests_bump(acc, append):
    queue_batches(acc, append, 0, 1)
    (a,) = drain_one(acc)
    assert not acc.can_retry(a, ErrorCode.INVALID_RECORD, now_ms=1)
    acc.idempotence.handle_failed_batch(a, MessageTooLargeError("x"), adjust_sequence_numbers=True)
    assert acc.idempotence.epoch_bump_required


def test_epoch_exhaustion_needs_a_new_producer_id(acc, append):
    mgr = acc.idempotence
    mgr.set_producer_id_and_epoch(1000, MAX_PRODUCER_EPOCH)
    mgr.request_epoch_bump_for_partition(P0)
    assert mgr.bump_idempotent_epoch_and_reset_id_if_needed()
    assert not mgr.has_producer_id
    mgr.set_producer_id_and_epoch(2000, 0)
    queue_batches(acc, append, 0, 1)
    (batch,) = drain_one(acc, 100)
    assert (batch.producer_id, batch.base_sequence) == (2000, 0)


def test_split_keeps_sequences_contiguous_and_tracked(acc, append):
    for _ in range(3):
        append(acc, CLUSTER, "t", 0, value=b"y" * 300)
    (big,) = drain_one(acc)
    mgr = acc.idempotence
    parts = acc.split_and_reenqueue(big, now_ms=1)
    assert len(parts) >= 2
    assert [b.base_sequence for b in mgr.in_flight_batches(P0)] == [p.base_sequence for p in parts]
    assert parts[0].base_sequence == 0
    assert sum(p.record_count for p in parts) == 3
    sequence = 0
    for part in parts:
        assert part.base_sequence == sequence
        sequence += part.record_count
    assert mgr.sequence_number(P0) == 3
    first = drain_one(acc, 1)
    assert first == [parts[0]]
