"""RecordAccumulator.handle_partition_response: the sender's per-partition decisions."""

from log.common.errors import ErrorCode, MessageTooLargeError
from producer.accumulator import ResponseAction
from producer.cluster_view import StaticClusterView

CLUSTER = StaticClusterView.uniform("t", 2, [1])


def drained_batch(acc, append, records=3, value=b"v" * 200):
    for _ in range(records):
        append(acc, CLUSTER, "t", 0, value=value)
    (batch,) = acc.drain(CLUSTER, {1}, 1 << 20, 0)[1]
    return batch


def test_success_completes_with_offsets(make_accumulator, append):
    acc = make_accumulator()
    batch = drained_batch(acc, append)
    handles = batch.handles()
    outcome = acc.handle_partition_response(
        batch, ErrorCode.NONE, 5, base_offset=10, log_append_time_ms=99
    )
    assert outcome.action is ResponseAction.COMPLETED and not outcome.refresh_metadata
    assert [(h.result().offset, h.result().timestamp_ms) for h in handles] == [
        (10, 99),
        (11, 99),
        (12, 99),
    ]
    assert acc.buffer_pool.allocated_bytes == 0


def test_stale_leader_retries_and_asks_for_metadata(make_accumulator, append):
    acc = make_accumulator()
    batch = drained_batch(acc, append)
    outcome = acc.handle_partition_response(batch, ErrorCode.NOT_LEADER_OR_FOLLOWER, 5)
    assert outcome.action is ResponseAction.RETRY and outcome.refresh_metadata
    assert acc.queue_sizes("t")[0] == 1 and batch.attempts == 1


def test_non_retriable_error_fails_records(make_accumulator, append):
    acc = make_accumulator()
    batch = drained_batch(acc, append)
    handles = batch.handles()
    outcome = acc.handle_partition_response(batch, ErrorCode.INVALID_RECORD, 5)
    assert outcome.action is ResponseAction.FAILED
    assert all(h.error.error_code == ErrorCode.INVALID_RECORD for h in handles)
    assert acc.buffer_pool.allocated_bytes == 0


def test_message_too_large_splits_then_single_record_fails(make_accumulator, append):
    acc = make_accumulator()
    batch = drained_batch(acc, append, records=4)
    handles = batch.handles()
    assert acc.handle_partition_response(batch, ErrorCode.MESSAGE_TOO_LARGE, 5).action is (
        ResponseAction.SPLIT
    )
    actions = []
    while acc.has_undrained():
        for part in acc.drain(CLUSTER, {1}, 1 << 20, 10)[1]:
            actions.append(
                acc.handle_partition_response(part, ErrorCode.MESSAGE_TOO_LARGE, 10).action
            )
    assert ResponseAction.FAILED in actions
    assert all(isinstance(h.error, MessageTooLargeError) for h in handles)
    assert acc.buffer_pool.allocated_bytes == 0 and not acc.has_incomplete()


def test_response_for_an_expired_batch_is_ignored(make_accumulator, append):
    acc = make_accumulator(delivery_timeout_ms=2000, request_timeout_ms=1000)
    batch = drained_batch(acc, append)
    expired = acc.fail_expired_batches(2500, in_flight=[batch])
    assert expired == [batch] and batch.handles()[0].error.error_code == ErrorCode.REQUEST_TIMED_OUT
    outcome = acc.handle_partition_response(batch, ErrorCode.NONE, 2600, base_offset=0)
    assert outcome.action is ResponseAction.IGNORED
    assert acc.buffer_pool.allocated_bytes == 0


def test_no_retry_once_retries_are_exhausted(make_accumulator, append):
    acc = make_accumulator(retries=1)
    batch = drained_batch(acc, append)
    assert acc.handle_partition_response(batch, ErrorCode.REQUEST_TIMED_OUT, 5).action is (
        ResponseAction.RETRY
    )
    (again,) = acc.drain(CLUSTER, {1}, 1 << 20, 1000)[1]
    assert again is batch
    assert acc.handle_partition_response(batch, ErrorCode.REQUEST_TIMED_OUT, 1001).action is (
        ResponseAction.FAILED
    )
