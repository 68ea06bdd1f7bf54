"""ProducerBatch: appends within the size bound, built bytes, handle completion, split."""

import random

import pytest

from log.common.errors import NotLeaderOrFollowerError
from log.records.batch_header import HEADER_BYTES, validate_batch
from log.records.builder import Header, Record, build_batch
from log.records.compression import CompressionType
from producer.cluster_view import TopicPartition
from producer.producer_batch import FinalState, ProducerBatch, estimate_batch_size_upper_bound

TP = TopicPartition("events", 3)


def fill(batch, rng, max_value_bytes=200, now_ms=0):
    handles = []
    while True:
        value = rng.randbytes(rng.randrange(0, max_value_bytes))
        handle = batch.try_append(1000 + len(handles), b"k%d" % len(handles), value, (), now_ms)
        if handle is None:
            return handles
        handles.append(handle)


@pytest.mark.parametrize("compression", list(CompressionType))
def test_built_batch_never_exceeds_buffer_and_matches_reference(compression):
    rng = random.Random(int(compression) + 100)
    batch = ProducerBatch(TP, bytearray(4096), created_ms=0, compression_type=compression)
    handles = fill(batch, rng)
    assert len(handles) > 3 and batch.record_count == len(handles)
    built = batch.build()
    assert len(built) <= 4096
    header = validate_batch(built)
    assert header.record_count == len(handles) and header.compression_type == compression
    if compression == CompressionType.NONE:
        records = [r for r in batch._records]
        reference = build_batch(
            [Record(r.value, r.key, r.headers, r.timestamp_ms) for r in records],
            base_timestamp_ms=records[0].timestamp_ms,
        )
        assert built == reference


def test_first_record_always_fits_when_buffer_sized_by_estimate():
    value = b"x" * 10_000
    size = estimate_batch_size_upper_bound(CompressionType.SNAPPY, b"key", value, ())
    batch = ProducerBatch(TP, bytearray(size), 0, CompressionType.SNAPPY)
    assert batch.try_append(5, b"key", value, (), 0) is not None
    assert batch.try_append(5, None, b"y", (), 0) is None or batch.estimated_size_bytes <= size
    assert len(batch.build()) <= size


def test_done_completes_each_handle_once_with_offsets():
    batch = ProducerBatch(TP, bytearray(1024), 0)
    handles = [batch.try_append(100 + i, None, b"v", (Header("h", b"1"),), 0) for i in range(3)]
    seen = []
    handles[0].add_callback(lambda h: seen.append(h.result().offset))
    assert batch.done(base_offset=40, log_append_time_ms=-1, error=None)
    assert [h.result().offset for h in handles] == [40, 41, 42]
    assert [h.result().timestamp_ms for h in handles] == [100, 101, 102]
    assert seen == [40] and handles[2].result().partition == 3
    with pytest.raises(AssertionError):
        batch.done(base_offset=50, log_append_time_ms=-1, error=None)


def test_log_append_time_and_unknown_offsets():
    batch = ProducerBatch(TP, bytearray(1024), 0)
    handle = batch.try_append(100, None, b"v", (), 0)
    batch.done(base_offset=-1, log_append_time_ms=777, error=None)
    assert (handle.result().offset, handle.result().timestamp_ms) == (-1, 777)


def test_failure_then_late_success_is_ignored():
    batch = ProducerBatch(TP, bytearray(1024), 0)
    handle = batch.try_append(100, None, b"v", (), 0)
    assert batch.done(-1, -1, NotLeaderOrFollowerError("gone"))
    assert not batch.done(10, -1, None)
    assert batch.final_state is FinalState.FAILED
    with pytest.raises(NotLeaderOrFollowerError):
        handle.result()


def test_split_preserves_order_records_handles_and_sequences():
    rng = random.Random(5)
    batch = ProducerBatch(TP, bytearray(8192), 0)
    handles = fill(batch, rng, max_value_bytes=300)
    batch.set_producer_state(
        producer_id=7, producer_epoch=2, base_sequence=100, is_transactional=False
    )
    originals = [(r.key, r.value) for r in batch._records]
    parts = batch.split(1024, now_ms=5)
    assert len(parts) > 3 and batch.final_state is FinalState.SPLIT
    assert [(r.key, r.value) for p in parts for r in p._records] == originals
    assert [h for p in parts for h in p.handles()] == handles
    sequence = 100
    for part in parts:
        assert len(part.build()) <= 1024 and part.is_split_batch
        assert (part.producer_id, part.producer_epoch, part.base_sequence) == (7, 2, sequence)
        sequence += part.record_count
    base = 0
    for part in parts:
        part.done(base, -1, None)
        base += part.record_count
    assert [h.result().offset for h in handles] == list(range(len(handles)))


def test_empty_buffer_too_small_is_a_bug():
    with pytest.raises(AssertionError):
        ProducerBatch(TP, bytearray(HEADER_BYTES), 0)


def test_record_size_upper_bound_covers_any_encoding():
    from producer.producer_batch import encoded_record, record_size_upper_bound

    rng = random.Random(77)
    for _ in range(500):
        key = None if rng.random() < 0.3 else rng.randbytes(rng.randrange(0, 300))
        value = None if rng.random() < 0.1 else rng.randbytes(rng.randrange(0, 3000))
        headers = tuple(
            Header(f"h{i}", None if rng.random() < 0.2 else rng.randbytes(rng.randrange(50)))
            for i in range(rng.randrange(0, 4))
        )
        bound = record_size_upper_bound(key, value, headers)
        for offset_delta, timestamp_delta in ((0, 0), (2**31 - 1, -(2**62)), (70, 10**6)):
            actual = len(encoded_record(offset_delta, timestamp_delta, key, value, headers))
            assert actual <= bound
        assert bound - len(encoded_record(0, 0, key, value, headers)) <= 15
