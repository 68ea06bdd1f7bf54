"""varint.py (hot path) agrees with the construct ZigZagVarInt definition in batch.py."""

import pytest
from construct import ConstructError
from hypothesis import given, settings
from hypothesis import strategies as st

from log.common.errors import CorruptRecordError
from log.records.batch import VARINT, VARLONG
from log.records.varint import (
    MAX_VARINT_BYTES,
    MAX_VARLONG_BYTES,
    decode_varint,
    encode_varint,
    varint_size,
)


@settings(max_examples=150, deadline=None)
@given(st.integers(-(1 << 63), (1 << 63) - 1))
def test_varlong_encodings_agree(value):
    out = bytearray()
    encode_varint(value, out)
    assert bytes(out) == VARLONG.build(value)
    assert len(out) == varint_size(value)
    assert decode_varint(out, 0, MAX_VARLONG_BYTES) == (value, len(out))
    assert VARLONG.parse(bytes(out)) == value


@settings(max_examples=150, deadline=None)
@given(st.integers(-(1 << 31), (1 << 31) - 1))
def test_varint_encodings_agree(value):
    out = bytearray()
    encode_varint(value, out)
    assert bytes(out) == VARINT.build(value)
    assert decode_varint(out, 0, MAX_VARINT_BYTES) == (value, len(out))
    assert VARINT.parse(bytes(out)) == value


@pytest.mark.parametrize(
    "raw, max_bytes",
    [
        (b"", MAX_VARINT_BYTES),  # empty
        (b"\x80", MAX_VARINT_BYTES),  # runs off the end
        (b"\x80\x80\x80\x80\x80\x00", MAX_VARINT_BYTES),  # six bytes for an int32
        (b"\xff\xff\xff\xff\x1f", MAX_VARINT_BYTES),  # 35 bits do not fit an int32
        (b"\xff" * 9 + b"\x02", MAX_VARLONG_BYTES),  # 65 bits do not fit an int64
        (b"\x80" * 10 + b"\x00", MAX_VARLONG_BYTES),  # eleven bytes
    ],
)
def test_bad_varints_are_refused_by_both(raw, max_bytes):
    with pytest.raises(CorruptRecordError):
        decode_varint(raw, 0, max_bytes)
    definition = VARINT if max_bytes == MAX_VARINT_BYTES else VARLONG
    with pytest.raises(ConstructError):
        definition.parse(raw)


def test_construct_refuses_to_build_out_of_range():
    with pytest.raises(ConstructError):
        VARINT.build(1 << 31)
    with pytest.raises(ConstructError):
        VARLONG.build(-(1 << 63) - 1)
