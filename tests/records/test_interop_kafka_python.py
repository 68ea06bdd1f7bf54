"""Wire compatibility without a network: kafka-python's own v2 implementation and ours.

kafka-python ships an independent RecordBatch v2 builder and reader
(kafka.record.default_records). Batches it builds must decode with our reader (and our spec);
batches we build must pass its CRC check and decode to the same keys, values, headers, offsets
and timestamps.
"""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from log.records.batch import parse_batch
from log.records.builder import BatchBuilder, Header, Record, build_batch, build_batch_from_columns
from log.records.compression import CompressionType
from log.records.reader import decode_batch

pytestmark = pytest.mark.interop

CODECS = list(CompressionType)

headers_st = st.lists(
    st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=12)), max_size=3
)
# Values repeat a pattern so that kafka-python keeps the compression it was asked for (it falls
# back to none when compressing does not pay off).
entry_st = st.tuples(
    st.none() | st.binary(max_size=12),
    st.none() | st.sampled_from([b"", b"abc" * 40, b"kafka" * 100]),
    headers_st,
    st.integers(0, 1 << 20),
)


def _kafka_python_batch(codec, entries, base_timestamp_ms, producer=(-1, -1, -1)):
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        batch_size=1 << 20,
    )
    for offset, (key, value, headers, delta_ms) in enumerate(entries):
        builder.append(offset, base_timestamp_ms + delta_ms, key, value, headers)
    return bytes(builder.build())


def _compressible(entries):
    return sum(len(v or b"") for _, v, _, _ in entries) > 200


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
@settings(max_examples=40, deadline=None)
@given(entries=st.lists(entry_st, min_size=1, max_size=10))
def test_kafka_python_batches_decode_with_our_reader(codec, entries):
    base_ms = 1_700_000_000_000
    raw = _kafka_python_batch(codec, entries, base_ms, producer=(99, 2, 7))
    batch = decode_batch(raw)
    assert batch == parse_batch(raw)
    if _compressible(entries):
        assert batch.header.compression_type == codec
    assert (batch.header.producer_id, batch.header.producer_epoch) == (99, 2)
    assert batch.header.base_sequence == 7
    assert [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in batch.records] == [
        (i, base_ms + delta_ms, key, value, tuple(Header(k, v) for k, v in headers))
        for i, (key, value, headers, delta_ms) in enumerate(entries)
    ]


def _their_view(raw):
    theirs = DefaultRecordBatch(bytearray(raw))
    assert theirs.validate_crc()
    return theirs, [
        (r.offset, r.timestamp, r.key, r.value, tuple(Header(k, v) for k, v in r.headers))
        for r in theirs
    ]


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
@settings(max_examples=40, deadline=None)
@given(entries=st.lists(entry_st, min_size=1, max_size=10), base_offset=st.integers(0, 1 << 40))
def test_our_batches_decode_with_kafka_python(codec, entries, base_offset):
    records = [
        Record(value, key=key, headers=tuple(Header(k, v) for k, v in headers), timestamp_ms=ms)
        for key, value, headers, ms in entries
    ]
    raw = build_batch(
        records,
        base_offset=base_offset,
        compression_type=codec,
        producer_id=5,
        producer_epoch=1,
        base_sequence=40,
    )
    theirs, decoded = _their_view(raw)
    assert theirs.compression_type == codec
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (5, 1, 40)
    assert theirs.last_offset == base_offset + len(records) - 1
    assert decoded == [
        (base_offset + i, ms, key, value, tuple(Header(k, v) for k, v in headers))
        for i, (key, value, headers, ms) in enumerate(entries)
    ]


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
def test_our_incremental_and_columnar_builders_decode_with_kafka_python(codec):
    rng = random.Random(31)
    keys = [rng.randbytes(8) if i % 5 else None for i in range(300)]
    values = [b"payload-%d " % i * rng.randrange(1, 40) for i in range(300)]
    timestamps = [1_000 + rng.randrange(-50, 50) for _ in range(300)]
    builder = BatchBuilder(batch_size_bytes=1 << 20, compression_type=codec)
    for key, value, ms in zip(keys, values, timestamps, strict=True):
        assert builder.try_append(value, key=key, timestamp_ms=ms)
    expected = [(i, timestamps[i], keys[i], values[i], ()) for i in range(300)]
    assert _their_view(builder.build())[1] == expected
    columnar = build_batch_from_columns(
        keys, values, timestamps_ms=timestamps, compression_type=codec
    )
    assert _their_view(columnar)[1] == expected


def test_large_compressed_batches_cross_block_boundaries_both_ways():
    """Over 64 KiB (lz4) and 32 KiB (snappy) blocks: framing must match across blocks."""
    rng = random.Random(5)
    values = [rng.randbytes(200) + b"z" * 800 for _ in range(400)]  # ~400 KB uncompressed
    for codec in CODECS[1:]:
        raw = build_batch_from_columns(None, values, timestamp_ms=3, compression_type=codec)
        assert [v for _, _, _, v, _ in _their_view(raw)[1]] == values
        entries = [(None, v, [], 0) for v in values]
        theirs = _kafka_python_batch(codec, entries, 3)
        assert [r.value for r in decode_batch(theirs).records] == values
