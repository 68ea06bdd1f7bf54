import pytest

from log.common.errors import CorruptRecordError, ErrorCode
from log.records.batch_header import (
    HEADER_BYTES,
    iter_batches,
    read_header,
    set_base_offset,
    set_partition_leader_epoch,
    validate_batch,
)
from log.records.builder import Header, Record, build_batch


def test_built_batch_header_fields_and_crc():
    records = [Record(b"v%d" % i, key=b"k", timestamp_ms=1000 + i) for i in range(3)]
    raw = build_batch(records, base_offset=7, producer_id=5, producer_epoch=1, base_sequence=10)
    header = validate_batch(raw)
    assert header.base_offset == 7
    assert header.last_offset == 9
    assert header.record_count == 3
    assert header.base_timestamp == 1000 and header.max_timestamp == 1002
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (5, 1, 10)
    assert header.size_bytes == len(raw)


def test_patching_offsets_keeps_crc_valid():
    raw = bytearray(build_batch([Record(b"x", headers=(Header("h", b"1"),))]))
    set_base_offset(raw, 0, 1234)
    set_partition_leader_epoch(raw, 0, 9)
    header = validate_batch(raw)
    assert header.base_offset == 1234 and header.partition_leader_epoch == 9


def test_corruption_is_a_typed_error():
    raw = bytearray(build_batch([Record(b"payload")]))
    raw[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError) as excinfo:
        validate_batch(raw)
    assert excinfo.value.error_code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(CorruptRecordError):
        read_header(raw[: HEADER_BYTES - 1])


def test_iter_batches_walks_concatenated_batches():
    a = build_batch([Record(b"a")], base_offset=0)
    b = build_batch([Record(b"b"), Record(b"c")], base_offset=1)
    positions = [(p, h.base_offset) for p, h in iter_batches(a + b)]
    assert positions == [(0, 0), (len(a), 1)]
