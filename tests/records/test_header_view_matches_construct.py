"""The hot-path struct header view (batch_header.read_header) equals the construct definition."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from log.common.errors import CorruptRecordError
from log.records import batch_header
from log.records.batch import BATCH_HEADER, build_header, parse_header
from log.records.batch_header import HEADER_BYTES, MIN_BATCH_LENGTH, BatchHeader, read_header


def _signed(bits):
    return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


header_st = st.builds(
    BatchHeader,
    base_offset=_signed(64),
    batch_length=st.integers(MIN_BATCH_LENGTH, (1 << 31) - 1),
    partition_leader_epoch=_signed(32),
    magic=st.just(2),
    crc=st.integers(0, (1 << 32) - 1),
    attributes=_signed(16),
    last_offset_delta=st.integers(0, (1 << 31) - 1),
    base_timestamp=_signed(64),
    max_timestamp=_signed(64),
    producer_id=_signed(64),
    producer_epoch=_signed(16),
    base_sequence=_signed(32),
    record_count=st.integers(0, (1 << 31) - 1),
)


@settings(max_examples=150, deadline=None)
@given(header_st)
def test_struct_view_reads_what_construct_builds(header):
    raw = build_header(header)
    assert len(raw) == HEADER_BYTES
    assert read_header(raw) == header == parse_header(raw)


@settings(max_examples=150, deadline=None)
@given(st.binary(min_size=HEADER_BYTES, max_size=HEADER_BYTES), st.integers(0, 255))
def test_struct_view_and_construct_agree_on_arbitrary_bytes(raw, magic_byte):
    raw = raw[:16] + bytes([magic_byte % 3]) + raw[17:]
    try:
        view = read_header(raw)
    except CorruptRecordError:
        view = None
    try:
        spec = parse_header(raw)
    except CorruptRecordError:
        assert view is None  # the view is at least as strict as the spec
        return
    if view is not None:
        assert view == spec


def test_field_order_and_offsets_match():
    names = [sc.name for sc in BATCH_HEADER.subcons]
    assert names == [f.name for f in dataclasses.fields(BatchHeader)]
    # The named offsets of the view are where construct puts those fields.
    offsets = {}
    position = 0
    for sc in BATCH_HEADER.subcons:
        offsets[sc.name] = position
        position += sc.sizeof()
    assert offsets["partition_leader_epoch"] == batch_header.PARTITION_LEADER_EPOCH_OFFSET
    assert offsets["magic"] == batch_header.MAGIC_OFFSET
    assert offsets["crc"] == batch_header.CRC_OFFSET
    assert offsets["attributes"] == batch_header.ATTRIBUTES_OFFSET
    assert offsets["batch_length"] + 4 == batch_header.LOG_OVERHEAD


def test_build_header_refuses_out_of_range_fields():
    header = BatchHeader(0, 49, 0, 2, 0, 0, 0, 0, 0, 0, 1 << 15, 0, 0)
    with pytest.raises(ValueError):
        build_header(header)
