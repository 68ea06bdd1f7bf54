"""RecordAccumulator: append, ready (linger/full/flush/close/exhausted), round-robin drain,
max_request_size, expiry, reenqueue order, split, sticky + adaptive partitioning."""

import collections

import pytest

from log.common.errors import ErrorCode, MessageTooLargeError, UnknownTopicOrPartitionError
from producer.accumulator import NO_READY_CHECK_DELAY_MS, AppendStatus
from producer.cluster_view import StaticClusterView, TopicPartition
from producer.errors import ProducerClosedError
from producer.partitioner import partition_for_key

ONE_NODE = StaticClusterView.uniform("t", 4, [1])
TWO_NODES = StaticClusterView.uniform("t", 4, [1, 2])


def fill_partition(append, acc, cluster, partition, batches, now_ms=0):
    """Append until `partition` holds `batches` full batches plus an open one."""
    while acc.queue_sizes("t").get(partition, 0) <= batches:
        append(acc, cluster, "t", partition, now_ms=now_ms)


def test_single_record_waits_for_linger(make_accumulator, append):
    acc = make_accumulator()
    append(acc, ONE_NODE, "t", 0, now_ms=0)
    result = acc.ready(ONE_NODE, now_ms=3)
    assert result.ready_nodes == frozenset() and result.next_ready_check_delay_ms == 7
    assert acc.ready(ONE_NODE, now_ms=10).ready_nodes == {1}


def test_nothing_queued_means_no_deadline(make_accumulator):
    acc = make_accumulator()
    assert acc.ready(ONE_NODE, 0).next_ready_check_delay_ms == NO_READY_CHECK_DELAY_MS


def test_full_batch_is_ready_before_linger(make_accumulator, append):
    acc = make_accumulator(linger_ms=1000, delivery_timeout_ms=5000)
    results = [append(acc, ONE_NODE, "t", 0) for _ in range(12)]
    assert any(r.new_batch_created for r in results[1:]) and results[-1].batch_is_full
    assert acc.ready(ONE_NODE, now_ms=0).ready_nodes == {1}


@pytest.mark.parametrize("trigger", ["flush", "close", "exhausted"])
def test_flush_close_and_exhausted_memory_make_batches_sendable(make_accumulator, append, trigger):
    acc = make_accumulator(linger_ms=1000, delivery_timeout_ms=5000)
    append(acc, ONE_NODE, "t", 0)
    assert acc.ready(ONE_NODE, 0).ready_nodes == frozenset()
    if trigger == "flush":
        acc.begin_flush()
    elif trigger == "close":
        acc.close()
        with pytest.raises(ProducerClosedError):
            append(acc, ONE_NODE, "t", 0)
    else:
        acc.buffer_pool._waiters.append(object())  # a task blocked in allocate()
    assert acc.ready(ONE_NODE, 0).ready_nodes == {1}
    if trigger == "flush":
        acc.end_flush()
        assert acc.ready(ONE_NODE, 0).ready_nodes == frozenset()


def test_unknown_leader_topics_are_reported(make_accumulator, append):
    cluster = StaticClusterView({TopicPartition("t", 0): None, TopicPartition("t", 1): 1})
    acc = make_accumulator()
    append(acc, cluster, "t", 0)
    result = acc.ready(cluster, now_ms=100)
    assert result.unknown_leader_topics == {"t"} and result.ready_nodes == frozenset()


def test_drain_takes_one_batch_per_partition_round_robin_within_max_request_size(
    make_accumulator, append
):
    acc = make_accumulator()
    for partition in range(4):
        fill_partition(append, acc, ONE_NODE, partition, batches=3)
    ready = acc.ready(ONE_NODE, 0).ready_nodes
    batch_bytes = acc.incomplete_batches()[0].estimated_size_bytes
    max_request = 2 * batch_bytes + 10
    order = []
    for _ in range(4):
        drained = acc.drain(ONE_NODE, ready, max_request, now_ms=0)
        order.append([b.topic_partition.partition for b in drained[1]])
        assert sum(b.estimated_size_bytes for b in drained[1]) <= max_request
    # each drain starts at the partition the previous one could not fit
    assert order == [[0, 1], [2, 3], [0, 1], [2, 3]]


def test_full_round_takes_every_partition_once(make_accumulator, append):
    acc = make_accumulator()
    for partition in range(4):
        fill_partition(append, acc, ONE_NODE, partition, batches=2)
    drained = acc.drain(ONE_NODE, {1}, 1 << 20, now_ms=0)
    assert sorted(b.topic_partition.partition for b in drained[1]) == [0, 1, 2, 3]
    assert all(b.is_closed for b in drained[1])


def test_single_oversized_batch_still_goes(make_accumulator, append):
    acc = make_accumulator()
    fill_partition(append, acc, ONE_NODE, 0, batches=2)
    drained = acc.drain(ONE_NODE, {1}, max_request_size=100, now_ms=0)
    assert len(drained[1]) == 1


def test_drain_per_node(make_accumulator, append):
    acc = make_accumulator()
    for partition in range(4):
        append(acc, TWO_NODES, "t", partition)
    ready = acc.ready(TWO_NODES, now_ms=10).ready_nodes
    assert ready == {1, 2}
    drained = acc.drain(TWO_NODES, ready, 1 << 20, now_ms=10)
    assert {n: sorted(b.topic_partition.partition for b in bs) for n, bs in drained.items()} == {
        1: [0, 2],
        2: [1, 3],
    }
    assert not acc.has_undrained() and acc.has_incomplete()


def test_muted_partition_is_neither_ready_nor_drained(make_accumulator, append):
    acc = make_accumulator()
    append(acc, ONE_NODE, "t", 0)
    acc.mute_partition(TopicPartition("t", 0))
    assert acc.ready(ONE_NODE, 100).ready_nodes == frozenset()
    assert acc.drain(ONE_NODE, {1}, 1 << 20, 100) == {1: []}
    acc.unmute_partition(TopicPartition("t", 0))
    assert len(acc.drain(ONE_NODE, {1}, 1 << 20, 100)[1]) == 1


def test_completion_returns_memory_and_resolves_handles(make_accumulator, append):
    acc = make_accumulator()
    handles = [append(acc, ONE_NODE, "t", 0).handle for _ in range(20)]
    assert acc.buffer_pool.allocated_bytes > 0 and acc.queue_sizes("t")[0] == 3
    base_offset = 1000
    while acc.has_undrained():
        (batch,) = acc.drain(ONE_NODE, {1}, 1 << 20, 0)[1]  # one batch per partition per drain
        assert acc.complete(batch, base_offset=base_offset)
        base_offset += batch.record_count
    assert [h.result().offset for h in handles] == list(range(1000, 1020))
    assert not acc.has_incomplete() and acc.buffer_pool.allocated_bytes == 0
    assert acc.buffer_pool.available_memory_bytes == acc.buffer_pool.total_memory_bytes


def test_expired_batches_oldest_first_and_next_expiry(make_accumulator, append):
    acc = make_accumulator(delivery_timeout_ms=2000, request_timeout_ms=1000)
    append(acc, ONE_NODE, "t", 0, now_ms=0)
    append(acc, ONE_NODE, "t", 1, now_ms=500)
    assert acc.expired_batches(1999) == [] and acc.next_batch_expiry_time_ms == 2000
    expired = acc.expired_batches(2000)
    assert [b.topic_partition.partition for b in expired] == [0]
    assert acc.next_batch_expiry_time_ms == 2500
    handle = expired[0].handles()[0]
    acc.complete(expired[0], error=acc.delivery_timeout_error(expired[0], 2000))
    with pytest.raises(Exception, match="2000 ms has passed since batch creation") as info:
        handle.result()
    assert info.value.error_code == ErrorCode.REQUEST_TIMED_OUT


def test_reenqueue_puts_batch_first_and_backs_off(make_accumulator, append):
    acc = make_accumulator(retry_backoff_ms=100, retry_backoff_max_ms=100)
    fill_partition(append, acc, ONE_NODE, 0, batches=1)
    first = acc.drain(ONE_NODE, {1}, 1 << 20, now_ms=0)[1][0]
    assert acc.can_retry(first, ErrorCode.NOT_LEADER_OR_FOLLOWER, now_ms=50)
    assert not acc.can_retry(first, ErrorCode.MESSAGE_TOO_LARGE, now_ms=50)
    acc.reenqueue(first, now_ms=50)
    assert first.attempts == 1 and 80 <= first.retry_backoff_ms <= 100
    # backing off: neither ready nor drainable, even though the queue has a full batch behind
    result = acc.ready(ONE_NODE, now_ms=60)
    assert result.ready_nodes == frozenset()
    assert result.next_ready_check_delay_ms == first.retry_backoff_ms - 10
    assert acc.drain(ONE_NODE, {1}, 1 << 20, now_ms=60) == {1: []}
    later = 50 + first.retry_backoff_ms
    assert acc.ready(ONE_NODE, later).ready_nodes == {1}
    assert acc.drain(ONE_NODE, {1}, 1 << 20, later)[1] == [first]


def test_retry_backoff_is_exponential_and_capped(make_accumulator):
    acc = make_accumulator(retry_backoff_ms=100, retry_backoff_max_ms=1000)
    backoffs = [acc.retry_backoff_ms(n) for n in range(1, 8)]
    assert 80 <= backoffs[0] <= 120 and 160 <= backoffs[1] <= 240 and 320 <= backoffs[2] <= 480
    assert all(b <= 1000 for b in backoffs) and backoffs[-1] >= 800


def test_no_retry_past_delivery_timeout_or_retries(make_accumulator, append):
    acc = make_accumulator(retries=1, delivery_timeout_ms=2000, request_timeout_ms=1000)
    append(acc, ONE_NODE, "t", 0)
    batch = acc.drain(ONE_NODE, {1}, 1 << 20, 10)[1][0]
    assert not acc.can_retry(batch, ErrorCode.NOT_LEADER_OR_FOLLOWER, now_ms=2000)
    acc.reenqueue(batch, 20)
    assert not acc.can_retry(batch, ErrorCode.NOT_LEADER_OR_FOLLOWER, now_ms=30)


def test_split_and_reenqueue_keeps_order_and_records(make_accumulator, append):
    acc = make_accumulator(batch_size=4096, buffer_memory=64 * 1024)
    handles = [append(acc, ONE_NODE, "t", 0, value=b"%05d" % i * 40).handle for i in range(15)]
    big = acc.drain(ONE_NODE, {1}, 1 << 20, 0)[1][0]
    behind = acc.queue_sizes("t")[0]
    parts = acc.split_and_reenqueue(big, now_ms=5)
    assert all(p.estimated_size_bytes <= big.estimated_size_bytes // 2 for p in parts)
    assert len(parts) > 1 and acc.queue_sizes("t")[0] == behind + len(parts)
    drained = []
    while acc.has_undrained():
        drained += acc.drain(ONE_NODE, {1}, 1 << 20, 5)[1]
    base = 0
    for batch in drained:
        assert len(batch.build()) <= batch.buffer_size_bytes
        acc.complete(batch, base_offset=base)
        base += batch.record_count
    assert [h.result().offset for h in handles] == list(range(15))
    assert acc.buffer_pool.allocated_bytes == 0


def test_record_too_large_is_refused(make_accumulator, append):
    acc = make_accumulator(max_request_size=500)
    with pytest.raises(MessageTooLargeError, match="max.request.size"):
        append(acc, ONE_NODE, "t", 0, value=b"x" * 600)


def test_big_record_gets_its_own_buffer(make_accumulator, append):
    acc = make_accumulator()
    result = append(acc, ONE_NODE, "t", 0, value=b"x" * 3000)
    batch = acc.incomplete_batches()[0]
    assert result.new_batch_created and batch.buffer_size_bytes > 3000
    assert len(batch.build()) <= batch.buffer_size_bytes


def test_bad_partition_and_unknown_topic(make_accumulator, append):
    acc = make_accumulator()
    with pytest.raises(UnknownTopicOrPartitionError, match=r"not in the range \[0...3\]"):
        append(acc, ONE_NODE, "t", 4)
    with pytest.raises(UnknownTopicOrPartitionError):
        append(acc, ONE_NODE, "nope", 0)
    assert acc.buffer_pool.allocated_bytes == 0


def test_needs_buffer_then_unneeded_buffer_is_returned(make_accumulator, append):
    acc = make_accumulator()
    first = acc.try_append("t", 0, 0, None, b"v", (), 0, ONE_NODE)
    assert first.status is AppendStatus.NEEDS_BUFFER and first.buffer_size_bytes == 1024
    spare = acc.buffer_pool.try_allocate_nowait(1024)
    append(acc, ONE_NODE, "t", 0)  # someone else opened the batch meanwhile
    again = acc.try_append("t", 0, 0, None, b"v", (), 0, ONE_NODE, buffer=spare)
    assert again.status is AppendStatus.APPENDED and not again.new_batch_created
    assert acc.buffer_pool.allocated_bytes == 1024


def test_abort_on_new_batch(make_accumulator):
    acc = make_accumulator()
    result = acc.try_append("t", 0, 0, None, b"v", (), 0, ONE_NODE, abort_on_new_batch=True)
    assert result.status is AppendStatus.ABORT_FOR_NEW_BATCH


def test_abort_incomplete_batches_fails_everything_and_frees_memory(make_accumulator, append):
    acc = make_accumulator()
    handles = [append(acc, ONE_NODE, "t", p).handle for p in range(4)]
    acc.drain(ONE_NODE, {1}, 1024, 100)
    assert acc.abort_incomplete_batches(ProducerClosedError("closing")) == 4
    assert all(h.done and isinstance(h.error, ProducerClosedError) for h in handles)
    assert not acc.has_undrained() and acc.buffer_pool.allocated_bytes == 0


def test_keyed_records_follow_murmur2(make_accumulator, append):
    acc = make_accumulator()
    for i in range(50):
        key = b"user-%d" % i
        assert append(acc, ONE_NODE, "t", key=key).topic_partition.partition == partition_for_key(
            key, 4
        )


def test_unkeyed_records_stick_then_switch_after_batch_size(make_accumulator, append):
    acc = make_accumulator(batch_size=1024)
    partitions = [append(acc, ONE_NODE, "t", value=b"x" * 100).topic_partition.partition
                  for _ in range(60)]  # fmt: skip
    runs = [len(list(g)) for _, g in __import__("itertools").groupby(partitions)]
    # ~1 KiB (8-9 records of ~120 bytes) per stick, switched at batch boundaries
    assert len(runs) >= 5 and all(r >= 8 for r in runs[:-1]), runs
    ignore = make_accumulator(partitioner_ignore_keys=True)
    keyed = {append(ignore, ONE_NODE, "t", key=b"same%d" % i).topic_partition for i in range(5)}
    assert len(keyed) == 1  # keys ignored: sticky


def test_adaptive_load_table_prefers_short_queues(make_accumulator, append):
    acc = make_accumulator(seed=9, buffer_memory=1 << 20)
    for partition in range(4):
        append(acc, ONE_NODE, "t", partition)
    fill_partition(append, acc, ONE_NODE, 0, batches=6)  # partition 0 is backed up
    acc.ready(ONE_NODE, 0)
    stats = acc.partitioner("t").load_stats
    assert stats is not None and stats.partition_ids == (0, 1, 2, 3)
    assert stats.cumulative_frequency_table == (1, 8, 15, 22)
    chosen = collections.Counter(acc.partitioner("t").next_partition(4, [0, 1, 2, 3])
                                 for _ in range(22_000))  # fmt: skip
    assert chosen[0] / 22_000 == pytest.approx(1 / 22, abs=0.01)


def test_unavailable_leader_is_left_out_of_the_load_table(make_accumulator, append):
    acc = make_accumulator(partitioner_availability_timeout_ms=100)
    for partition in range(4):
        append(acc, TWO_NODES, "t", partition)
    fill_partition(append, acc, TWO_NODES, 0, batches=2)
    acc.update_node_latency_stats(2, now_ms=0, can_drain=True)
    acc.update_node_latency_stats(2, now_ms=500, can_drain=False)  # node 2 stuck for 500 ms
    acc.ready(TWO_NODES, 500)
    assert acc.partitioner("t").load_stats.partition_ids == (0, 2)
