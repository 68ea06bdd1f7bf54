"""Building RecordBatch v2 bytes from records (the producer's and the tests' side).

A record inside a batch (all integers zigzag varints unless noted)::

    length, attributes (int8, unused = 0), timestampDelta, offsetDelta,
    keyLength (-1 = null), key, valueLength (-1 = null), value,
    headerCount, [headerKeyLength, headerKey (utf-8), headerValueLength (-1 = null), value]...

The records section is compressed as a whole when the batch's compression bits say so; the CRC is
computed last, over attributes .. end (see batch_header.py for the header layout).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import crc32c

from log.records.batch_header import (
    ATTRIBUTES_OFFSET,
    CONTROL_FLAG,
    HEADER_BYTES,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
)
from log.records.compression import CompressionType, compress
from log.records.varint import encode_varint

_HEADER_AFTER_CRC = struct.Struct(">hiqqqhii")
_HEADER_BEFORE_CRC = struct.Struct(">qiib")
_UINT32 = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class Header:
    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    value: bytes | None
    key: bytes | None = None
    headers: tuple[Header, ...] = field(default_factory=tuple)
    timestamp_ms: int | None = None


def encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] = (),
) -> None:
    """Append one length-prefixed record to `out`."""
    body = bytearray(b"\x00")  # attributes
    encode_varint(timestamp_delta, body)
    encode_varint(offset_delta, body)
    _encode_bytes(key, body)
    _encode_bytes(value, body)
    encode_varint(len(headers), body)
    for header in headers:
        key_bytes = header.key.encode()
        encode_varint(len(key_bytes), body)
        body += key_bytes
        _encode_bytes(header.value, body)
    encode_varint(len(body), out)
    out += body


def _encode_bytes(data: bytes | None, out: bytearray) -> None:
    if data is None:
        encode_varint(-1, out)
    else:
        encode_varint(len(data), out)
        out += data


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    base_timestamp_ms: int | None = None,
    compression_type: int = CompressionType.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    is_control: bool = False,
    log_append_time: bool = False,
) -> bytes:
    """Encode `records` as one RecordBatch v2; offsets are base_offset + index."""
    assert records, "a batch holds at least one record"
    timestamps = [r.timestamp_ms for r in records if r.timestamp_ms is not None]
    if base_timestamp_ms is None:
        base_timestamp_ms = min(timestamps) if timestamps else 0
    max_timestamp_ms = max(timestamps) if timestamps else base_timestamp_ms
    body = bytearray()
    for offset_delta, record in enumerate(records):
        timestamp_ms = base_timestamp_ms if record.timestamp_ms is None else record.timestamp_ms
        encode_record(
            body,
            offset_delta,
            timestamp_ms - base_timestamp_ms,
            record.key,
            record.value,
            record.headers,
        )
    return assemble_batch(
        bytes(body),
        record_count=len(records),
        base_offset=base_offset,
        base_timestamp_ms=base_timestamp_ms,
        max_timestamp_ms=max_timestamp_ms,
        compression_type=compression_type,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=is_transactional,
        is_control=is_control,
        log_append_time=log_append_time,
    )


def assemble_batch(
    records_bytes: bytes,
    *,
    record_count: int,
    base_offset: int,
    base_timestamp_ms: int,
    max_timestamp_ms: int,
    compression_type: int = CompressionType.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    is_control: bool = False,
    log_append_time: bool = False,
) -> bytes:
    """Wrap already-encoded (uncompressed) records in a batch header, compressing if asked."""
    payload = compress(compression_type, records_bytes)
    attributes = int(compression_type)
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG
    if is_control:
        attributes |= CONTROL_FLAG
    after_crc = (
        _HEADER_AFTER_CRC.pack(
            attributes,
            record_count - 1,
            base_timestamp_ms,
            max_timestamp_ms,
            producer_id,
            producer_epoch,
            base_sequence,
            record_count,
        )
        + payload
    )
    batch_length = HEADER_BYTES - LOG_OVERHEAD + len(payload)
    crc = crc32c.crc32c(after_crc)
    head = _HEADER_BEFORE_CRC.pack(base_offset, batch_length, partition_leader_epoch, MAGIC_V2)
    out = head + _UINT32.pack(crc) + after_crc
    assert len(head) + 4 == ATTRIBUTES_OFFSET
    return out
