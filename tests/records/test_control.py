"""Control records (transaction markers): build, decode, parse, refuse malformed ones."""

import pytest
from kafka.record.default_records import DefaultRecordBatch

from log.common.errors import CorruptRecordError
from log.records.batch import parse_batch
from log.records.control import (
    ControlRecordType,
    EndTransactionMarker,
    build_control_batch,
    build_control_key,
    build_control_value,
    parse_control_key,
    parse_control_record,
)
from log.records.reader import decode_batch


@pytest.mark.parametrize("control_type", list(ControlRecordType))
def test_control_batch_round_trip(control_type):
    raw = build_control_batch(
        control_type,
        producer_id=4242,
        producer_epoch=3,
        coordinator_epoch=17,
        timestamp_ms=1_700_000_000_000,
        base_offset=50,
    )
    batch = decode_batch(raw)
    assert batch == parse_batch(raw)
    header = batch.header
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4242, 3, -1)
    assert header.record_count == 1 and header.base_offset == 50
    (record,) = batch.records
    assert record.key == b"\x00\x00" + bytes([0, control_type])
    assert record.value == b"\x00\x00" + (17).to_bytes(4, "big")
    assert parse_control_record(record.key, record.value) == EndTransactionMarker(control_type, 17)


def test_kafka_python_reads_our_markers():
    raw = build_control_batch(
        ControlRecordType.COMMIT,
        producer_id=1,
        producer_epoch=0,
        coordinator_epoch=2,
        timestamp_ms=10,
    )
    batch = DefaultRecordBatch(bytearray(raw))
    assert batch.validate_crc() and batch.is_control_batch and batch.is_transactional
    (record,) = list(batch)
    assert record.commit and not record.abort and record.version == 0


def test_newer_versions_parse_as_version_zero():
    key = b"\x00\x01\x00\x00" + b"future"
    value = b"\x00\x01\x00\x00\x00\x09" + b"more"
    assert parse_control_key(key) == (1, 0)
    assert parse_control_record(key, value) == EndTransactionMarker(ControlRecordType.ABORT, 9)


@pytest.mark.parametrize(
    "key, value",
    [
        (None, build_control_value(1)),
        (build_control_key(ControlRecordType.COMMIT), None),
        (b"\x00\x00\x00", build_control_value(1)),  # short key
        (build_control_key(ControlRecordType.COMMIT), b"\x00\x00\x00\x01"),  # short value
        (b"\x00\x00\x00\x01" + b"x", build_control_value(1)),  # version 0 with extra bytes
        (b"\xff\xff\x00\x01", build_control_value(1)),  # negative version
        (b"\x00\x00\x00\x02", build_control_value(1)),  # LEADER_CHANGE is not a marker
    ],
)
def test_malformed_control_records_are_corrupt(key, value):
    with pytest.raises(CorruptRecordError):
        parse_control_record(key, value)
