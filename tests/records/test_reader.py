"""The fast reader against the construct specification: round trips, agreement, strictness."""

import random

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from log.common.errors import CorruptRecordError, UnsupportedCompressionTypeError
from log.records.batch import parse_batch
from log.records.batch_header import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_BYTES,
    LOG_OVERHEAD,
    validate_batch,
)
from log.records.builder import Header, Record, build_batch
from log.records.compression import CompressionType
from log.records.reader import decode_batch, decode_batches, iter_records
from log.records.varint import encode_varint

CODECS = list(CompressionType)

headers_st = st.lists(
    st.builds(Header, st.text(max_size=6), st.none() | st.binary(max_size=12)), max_size=3
).map(tuple)
record_st = st.builds(
    Record,
    value=st.none() | st.binary(max_size=48),
    key=st.none() | st.binary(max_size=12),
    headers=headers_st,
    timestamp_ms=st.none() | st.integers(-1, 1 << 42),
)
records_st = st.lists(record_st, min_size=1, max_size=12)


def _expected_timestamps(records):
    given_ms = [r.timestamp_ms for r in records if r.timestamp_ms is not None]
    base_ms = min(given_ms) if given_ms else 0
    return [base_ms if r.timestamp_ms is None else r.timestamp_ms for r in records]


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
@settings(max_examples=60, deadline=None)
@given(records=records_st, base_offset=st.integers(0, (1 << 62)))
def test_round_trip_each_codec(codec, records, base_offset):
    raw = build_batch(records, base_offset=base_offset, compression_type=codec)
    batch = decode_batch(raw)
    assert batch == parse_batch(raw)
    assert batch.header.compression_type == codec
    assert batch.header.record_count == len(records)
    assert [r.offset for r in batch.records] == [base_offset + i for i in range(len(records))]
    assert [r.timestamp_ms for r in batch.records] == _expected_timestamps(records)
    assert [(r.key, r.value, r.headers) for r in batch.records] == [
        (r.key, r.value, r.headers) for r in records
    ]


def test_log_append_time_gives_every_record_the_max_timestamp():
    raw = build_batch(
        [Record(b"a", timestamp_ms=5), Record(b"b", timestamp_ms=9)], log_append_time=True
    )
    assert [r.timestamp_ms for r in iter_records(raw)] == [9, 9]
    assert [r.timestamp_type for r in iter_records(raw)] == [1, 1]
    assert parse_batch(raw) == decode_batch(raw)
    create_time = build_batch([Record(b"a", timestamp_ms=5), Record(b"b", timestamp_ms=9)])
    assert [(r.timestamp_ms, r.timestamp_type) for r in iter_records(create_time)] == [
        (5, 0),
        (9, 0),
    ]
    assert parse_batch(create_time) == decode_batch(create_time)


def test_decode_batches_walks_a_concatenation():
    a = build_batch([Record(b"a")], base_offset=0, compression_type=CompressionType.GZIP)
    b = build_batch([Record(b"b"), Record(b"c")], base_offset=1)
    assert [r.value for batch in decode_batches(a + b) for r in batch.records] == [b"a", b"b", b"c"]
    with pytest.raises(CorruptRecordError):
        list(decode_batches(a + b[:-1]))


def _sample_batches():
    rng = random.Random(1234)
    out = []
    for codec in CODECS:
        records = [
            Record(
                rng.randbytes(rng.randrange(20)) if i % 3 else None,
                key=rng.randbytes(4) if i % 2 else None,
                headers=(Header("h", rng.randbytes(3)), Header("n", None)) if i % 4 == 0 else (),
                timestamp_ms=1_700_000_000_000 + rng.randrange(1000),
            )
            for i in range(4)
        ]
        out.append(build_batch(records, base_offset=100, compression_type=codec))
    return out


def _assert_corrupt(raw):
    with pytest.raises(CorruptRecordError):
        validate_batch(raw)
    with pytest.raises(CorruptRecordError):
        decode_batch(raw)
    with pytest.raises(CorruptRecordError):
        parse_batch(raw)


@pytest.mark.parametrize("raw", _sample_batches(), ids=[c.name for c in CODECS])
def test_truncation_at_every_position_is_corrupt(raw):
    for length in range(len(raw)):
        _assert_corrupt(raw[:length])


@pytest.mark.parametrize("raw", _sample_batches(), ids=[c.name for c in CODECS])
def test_every_single_bit_flip_is_corrupt_unless_outside_the_crc(raw):
    original = decode_batch(raw)
    for bit in range(len(raw) * 8):
        flipped = bytearray(raw)
        flipped[bit // 8] ^= 1 << (bit % 8)
        position = bit // 8
        if position < 8 or 12 <= position < 16:
            # baseOffset / partitionLeaderEpoch: outside the CRC by design, still a valid batch
            batch = decode_batch(flipped)
            assert [(r.key, r.value) for r in batch.records] == [
                (r.key, r.value) for r in original.records
            ]
            continue
        _assert_corrupt(bytes(flipped))


def _with_fixed_crc(raw: bytearray) -> bytes:
    """Rewrite batchLength and the CRC so only the records section's own checks can object."""
    raw[8:12] = (len(raw) - LOG_OVERHEAD).to_bytes(4, "big", signed=True)
    raw[CRC_OFFSET:ATTRIBUTES_OFFSET] = crc32c.crc32c(raw[ATTRIBUTES_OFFSET:]).to_bytes(4, "big")
    return bytes(raw)


@pytest.mark.parametrize("raw", _sample_batches(), ids=[c.name for c in CODECS])
def test_truncated_records_section_with_valid_crc_is_corrupt(raw):
    for length in range(HEADER_BYTES, len(raw)):
        data = _with_fixed_crc(bytearray(raw[:length]))
        validate_batch(data)  # header and CRC are fine: only the records can tell
        with pytest.raises(CorruptRecordError):
            decode_batch(data)
        with pytest.raises(CorruptRecordError):
            parse_batch(data)


def _outcome(decode, raw):
    try:
        return decode(raw)
    except (CorruptRecordError, UnsupportedCompressionTypeError) as exc:
        return type(exc)


@settings(max_examples=150, deadline=None)
@given(
    raw=st.sampled_from(_sample_batches()),
    edits=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.integers(0, 8),
)
def test_mutations_behind_a_valid_crc_agree_with_the_spec(raw, edits, cut):
    """Random edits after the CRC (CRC recomputed): reader and spec agree, errors are typed."""
    mutated = bytearray(raw[: len(raw) - cut])
    for index, byte in edits:
        mutated[ATTRIBUTES_OFFSET + index % (len(mutated) - ATTRIBUTES_OFFSET)] = byte
    data = _with_fixed_crc(mutated)
    assert _outcome(decode_batch, data) == _outcome(parse_batch, data)


@settings(max_examples=150, deadline=None)
@given(st.binary(min_size=0, max_size=200))
def test_arbitrary_bytes_never_raise_untyped_errors(data):
    fixed = _with_fixed_crc(bytearray(data)) if len(data) >= HEADER_BYTES else data
    for candidate in (data, fixed):
        assert _outcome(decode_batch, candidate) == _outcome(parse_batch, candidate)


@pytest.mark.parametrize("field", ["key", "value", "header value"])
@pytest.mark.parametrize("length_byte", [0x03, 0x05, 0x7F])  # zigzag -2, -3, -64
def test_negative_lengths_other_than_minus_one_are_corrupt(field, length_byte):
    # One record: attributes, timestampDelta 0, offsetDelta 0, then key, value, headers.
    key, value, headers = b"\x01", b"\x01", b"\x00"  # null key, null value, no headers
    if field == "key":
        key = bytes([length_byte]) + b"xy"
    elif field == "value":
        value = bytes([length_byte]) + b"xy"
    else:
        headers = b"\x02\x02h" + bytes([length_byte]) + b"xy"  # one header "h"
    body = b"\x00\x00\x00" + key + value + headers
    section = bytes([len(body) * 2]) + body
    raw = bytearray(build_batch([Record(None)]))
    raw = _with_fixed_crc(raw[:HEADER_BYTES] + section)
    with pytest.raises(CorruptRecordError):
        decode_batch(raw)
    with pytest.raises(CorruptRecordError):
        parse_batch(raw)


def test_hand_built_section_decodes_like_the_spec():
    body = b"\x00\x00\x00" + b"\x04ab" + b"\x01" + b"\x02\x02h\x01"  # key b"ab", null value
    raw = _with_fixed_crc(
        bytearray(build_batch([Record(None)]))[:HEADER_BYTES] + bytes([len(body) * 2]) + body
    )
    (record,) = decode_batch(raw).records
    assert (record.key, record.value, record.headers) == (b"ab", None, (Header("h", None),))
    assert decode_batch(raw) == parse_batch(raw)


def _zigzag_byte_strings(value):
    out = bytearray()
    encode_varint(value, out)
    return bytes(out)


# Structure-aware fuzzing: records built field by field, where a length may be any small value
# (negative ones included) followed by that many bytes, and any field may be replaced by a random
# token. These reach far deeper into the record parser than random bytes do.
token_st = st.one_of(
    st.integers(-4, 70).map(_zigzag_byte_strings),
    st.just(b"\x01"),  # null
    st.integers(-(1 << 33), 1 << 33).map(_zigzag_byte_strings),
    st.binary(min_size=0, max_size=4),
    st.just(b"\x80\x80\x80\x80\x80\x01"),  # overlong
)
# A length, then usually that many bytes, sometimes a count that disagrees with it.
length_prefixed_st = st.tuples(
    st.integers(-3, 6), st.integers(0, 3), st.sampled_from([True, True, False])
).map(lambda t: _zigzag_byte_strings(t[0]) + b"k" * (t[0] if t[2] and t[0] >= 0 else t[1]))
field_st = st.one_of(length_prefixed_st, token_st)
mostly_zero_st = st.sampled_from([0, 0, 0, 0, -1, 1])  # an error in a derived count or length
record_fields_st = st.tuples(
    st.sampled_from([b"\x00", b"\x00", b"\x02", b"\x81\x01"]),  # timestampDelta
    st.sampled_from([b"\x00", b"\x02", b"\x01"]),  # offsetDelta
    field_st,  # key
    field_st,  # value
    st.lists(st.tuples(field_st, field_st), max_size=2),  # headers
    mostly_zero_st,  # error in headerCount
    mostly_zero_st,  # error in the record's length prefix
)


@settings(max_examples=150, deadline=None)
@given(st.lists(record_fields_st, max_size=3), mostly_zero_st)
def test_structure_fuzzed_sections_agree_with_the_spec(records, count_error):
    section = bytearray()
    for timestamp_delta, offset_delta, key, value, headers, header_error, length_error in records:
        body = b"\x00" + timestamp_delta + offset_delta + key + value
        body += _zigzag_byte_strings(len(headers) + header_error)
        body += b"".join(k + v for k, v in headers)
        section += _zigzag_byte_strings(len(body) + length_error) + body
    raw = bytearray(build_batch([Record(None)]))[:HEADER_BYTES]
    raw[57:61] = max(len(records) + count_error, 0).to_bytes(4, "big")
    data = _with_fixed_crc(raw + section)
    assert _outcome(decode_batch, data) == _outcome(parse_batch, data)


@pytest.mark.parametrize("field", range(4), ids=["key", "value", "header key", "header value"])
def test_every_one_byte_length_with_following_bytes_agrees_with_the_spec(field):
    """Exhaustive over the byte that starts a length field (and 0-3 bytes after it)."""
    for first in range(256):
        for extra in range(4):
            fields = [b"\x02k", b"\x02v", b"\x02h", b"\x01"]  # key, value, header key/value
            fields[field] = bytes([first]) + b"z" * extra
            body = b"\x00\x00\x00" + fields[0] + fields[1] + b"\x02" + fields[2] + fields[3]
            raw = bytearray(build_batch([Record(None)]))[:HEADER_BYTES]
            data = _with_fixed_crc(raw + _zigzag_byte_strings(len(body)) + body)
            assert _outcome(decode_batch, data) == _outcome(parse_batch, data), (first, extra)
