"""Property test: random appends, time steps, drains and completions keep the accumulator's
memory accounting exact, requests within max_request_size, and per-partition order intact."""

import collections

from hypothesis import given, settings
from hypothesis import strategies as st

from producer.cluster_view import StaticClusterView

CLUSTER = StaticClusterView.uniform("t", 4, [1, 2])

appends = st.tuples(st.just("append"), st.integers(0, 3), st.integers(0, 1500))
operations = st.lists(
    st.one_of(
        appends,
        appends,
        appends,
        st.tuples(st.just("tick"), st.integers(0, 20), st.just(0)),
        st.tuples(st.just("send"), st.integers(300, 3000), st.just(0)),
        st.tuples(st.just("ack"), st.integers(1, 4), st.just(0)),
    ),
    min_size=10,
    max_size=150,
)


@settings(max_examples=100, deadline=None)
@given(operations)
def test_random_operations_keep_invariants(make_accumulator, append, ops):
    acc = make_accumulator(buffer_memory=256 * 1024)
    pool = acc.buffer_pool
    now_ms = 0
    appended = collections.defaultdict(list)  # partition -> handles in append order
    in_flight = collections.deque()
    next_offset = collections.Counter()
    for op, a, b in ops:
        if op == "append":
            appended[a].append(append(acc, CLUSTER, "t", a, value=b"z" * b, now_ms=now_ms).handle)
        elif op == "tick":
            now_ms += a
        elif op == "send":
            ready = acc.ready(CLUSTER, now_ms).ready_nodes
            for batches in acc.drain(CLUSTER, ready, a, now_ms).values():
                assert len(batches) <= 2  # two partitions per node, one batch each
                size = sum(batch.estimated_size_bytes for batch in batches)
                assert size <= a or len(batches) == 1
                for batch in batches:
                    assert len(batch.build()) <= batch.buffer_size_bytes
                in_flight.extend(batches)
        else:
            for _ in range(min(a, len(in_flight))):
                batch = in_flight.popleft()
                partition = batch.topic_partition.partition
                acc.complete(batch, base_offset=next_offset[partition])
                next_offset[partition] += batch.record_count
        pooled = sum(
            batch.buffer_size_bytes
            for batch in acc.incomplete_batches()
            if not batch.is_split_batch
        )
        assert pool.allocated_bytes == pooled
        assert pool.allocated_bytes + pool.available_memory_bytes == pool.total_memory_bytes
    for partition, handles in appended.items():
        done = [h.result().offset for h in handles if h.done]
        assert done == list(range(len(done))), partition  # completed in append order
        assert all(h.done for h in handles[: len(done)])
