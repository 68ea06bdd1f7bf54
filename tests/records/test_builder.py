"""Builders: the construct spec agrees with encode_record; BatchBuilder; the columnar path."""

from hypothesis import given, settings
from hypothesis import strategies as st

from log.records.batch import build_record, parse_batch
from log.records.batch_header import HEADER_BYTES, validate_batch
from log.records.builder import (
    BatchBuilder,
    Header,
    Record,
    build_batch,
    build_batch_from_columns,
    encode_record,
    record_size_bytes,
)
from log.records.compression import CompressionType
from log.records.reader import decode_batch

headers_st = st.lists(
    st.builds(Header, st.text(max_size=6), st.none() | st.binary(max_size=12)), max_size=3
).map(tuple)
int32_st = st.integers(-(1 << 31), (1 << 31) - 1)
int64_st = st.integers(-(1 << 63), (1 << 63) - 1)
nullable_st = st.none() | st.binary(max_size=300)


@settings(max_examples=150, deadline=None)
@given(int32_st, int64_st, nullable_st, nullable_st, headers_st)
def test_encode_record_matches_the_construct_spec(offset_delta, timestamp_delta, key, value, hs):
    out = bytearray()
    encode_record(out, offset_delta, timestamp_delta, key, value, hs)
    assert bytes(out) == build_record(offset_delta, timestamp_delta, key, value, hs)
    assert record_size_bytes(offset_delta, timestamp_delta, key, value, hs) == len(out)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(nullable_st, nullable_st), min_size=1, max_size=20),
    st.none() | st.lists(st.integers(0, 1 << 42), min_size=20, max_size=20),
    st.sampled_from(list(CompressionType)),
)
def test_columns_build_the_same_bytes_as_records(pairs, timestamps, codec):
    keys = [k for k, _ in pairs]
    values = [v for _, v in pairs]
    timestamps = None if timestamps is None else timestamps[: len(pairs)]
    columns = build_batch_from_columns(
        keys, values, timestamps_ms=timestamps, timestamp_ms=77, compression_type=codec
    )
    records = [
        Record(v, key=k, timestamp_ms=77 if timestamps is None else timestamps[i])
        for i, (k, v) in enumerate(pairs)
    ]
    assert columns == build_batch(records, compression_type=codec)


def test_columns_with_headers_and_null_keys():
    headers = [(), (Header("a", b"1"),), ()]
    raw = build_batch_from_columns(None, [b"x", b"y", None], headers=headers, timestamp_ms=5)
    batch = decode_batch(raw)
    assert [(r.key, r.value, r.headers) for r in batch.records] == [
        (None, b"x", ()),
        (None, b"y", (Header("a", b"1"),)),
        (None, None, ()),
    ]
    assert [r.offset for r in batch.records] == [0, 1, 2]


def test_large_varints_take_the_slow_path_correctly():
    big = b"v" * 20_000  # length beyond the precomputed varint table
    raw = build_batch_from_columns([b"k"], [big], timestamps_ms=[1 << 40])
    (record,) = decode_batch(raw).records
    assert record.value == big and record.timestamp_ms == 1 << 40


def test_batch_builder_fills_up_to_batch_size_exactly():
    builder = BatchBuilder(batch_size_bytes=1000)
    assert builder.is_empty and builder.estimated_size_bytes == HEADER_BYTES
    timestamp_ms = 1_000
    while builder.try_append(b"v" * 50, key=b"k", timestamp_ms=timestamp_ms):
        timestamp_ms += 3
    count = builder.record_count
    assert count > 1
    raw = builder.build(base_offset=10, producer_id=7, producer_epoch=1, base_sequence=100)
    assert len(raw) == builder.estimated_size_bytes <= 1000
    assert len(raw) + record_size_bytes(count, 3 * count, b"k", b"v" * 50) > 1000
    header = validate_batch(raw)
    assert (header.base_offset, header.record_count, header.base_sequence) == (10, count, 100)
    assert header.base_timestamp == 1_000 and header.max_timestamp == 1_000 + 3 * (count - 1)
    assert decode_batch(raw) == parse_batch(raw)


def test_batch_builder_accepts_an_oversized_first_record_only():
    builder = BatchBuilder(batch_size_bytes=100)
    assert builder.try_append(b"x" * 500, timestamp_ms=0)
    assert not builder.try_append(b"y", timestamp_ms=0)
    assert [r.value for r in decode_batch(builder.build()).records] == [b"x" * 500]


def test_batch_builder_timestamps_may_go_backwards():
    builder = BatchBuilder(batch_size_bytes=10_000, compression_type=CompressionType.ZSTD)
    for timestamp_ms in (50, 20, 80):
        assert builder.try_append(b"v", timestamp_ms=timestamp_ms)
    batch = decode_batch(builder.build())
    assert [r.timestamp_ms for r in batch.records] == [50, 20, 80]
    assert batch.header.max_timestamp == 80 and batch.header.base_timestamp == 50
