"""Decoding RecordBatch v2 bytes into records, fast (the consumer's and the tools' side).

The broker never calls this on its hot path (it only reads headers); clients, dump-log and tests
do. The layout is specified by the construct definitions in batch.py; this module decodes the
same bytes with a hand-inlined varint loop over `bytes`, which is several times faster, and the
tests prove the two agree.

Strict: the CRC must match (unless the caller already checked it), the section must hold exactly
`recordCount` records, every record's fields must fill exactly its declared length, and nothing
may follow the last record. Anything else is CorruptRecordError, never an IndexError or the like.
"""

from __future__ import annotations

from collections.abc import Iterator

from log.common.errors import CorruptRecordError
from log.records.batch import DecodedBatch, DecodedRecord
from log.records.batch_header import (
    HEADER_BYTES,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    read_header,
    validate_batch,
)
from log.records.builder import Header
from log.records.compression import decompress

# Smallest record: length + attributes + timestampDelta + offsetDelta + key + value + headerCount,
# each one byte. Used to refuse absurd recordCounts before looping.
MIN_RECORD_BYTES = 7
_INT32_UNSIGNED_LIMIT = 1 << 32
_INT64_UNSIGNED_LIMIT = 1 << 64


def _varint(data: bytes, position: int, end: int, limit: int, max_bytes: int) -> tuple[int, int]:
    """Zigzag varint at `position`, which must end before `end`; (value, next position)."""
    unsigned = 0
    shift = 0
    stop = min(end, position + max_bytes)
    while position < stop:
        byte = data[position]
        position += 1
        unsigned |= (byte & 0x7F) << shift
        if byte < 0x80:
            if unsigned >= limit:
                raise CorruptRecordError("varint value overflows its width")
            return (unsigned >> 1) ^ -(unsigned & 1), position
        shift += 7
    raise CorruptRecordError("varint runs past the end of its record or is overlong")


def _var32(data: bytes, position: int, end: int) -> tuple[int, int]:
    if position < end:
        byte = data[position]
        if byte < 0x80:  # the common case: one byte
            return (byte >> 1) ^ -(byte & 1), position + 1
    return _varint(data, position, end, _INT32_UNSIGNED_LIMIT, 5)


def _nullable_bytes(data: bytes, position: int, end: int) -> tuple[bytes | None, int]:
    length, position = _var32(data, position, end)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"invalid length {length}")
        return None, position
    stop = position + length
    if stop > end:
        raise CorruptRecordError(f"field of {length} bytes overruns its record")
    return data[position:stop], stop


def decode_records(
    data: bytes, record_count: int
) -> Iterator[tuple[int, int, bytes | None, bytes | None, tuple[Header, ...]]]:
    """Decompressed records section -> (offset_delta, timestamp_delta, key, value, headers)...

    Raises CorruptRecordError as soon as something does not fit. Each varint takes an inlined
    one-byte fast path (almost every length and delta in practice) before the general decoder.
    """
    total = len(data)
    if record_count < 0 or record_count * MIN_RECORD_BYTES > total:
        raise CorruptRecordError(f"{record_count} records cannot fit in {total} bytes")
    varint = _varint
    limit32 = _INT32_UNSIGNED_LIMIT
    position = 0
    for _ in range(record_count):
        if position < total and (byte := data[position]) < 0x80:
            length = (byte >> 1) ^ -(byte & 1)
            position += 1
        else:
            length, position = varint(data, position, total, limit32, 5)
        end = position + length
        if length <= 0 or end > total:
            raise CorruptRecordError(f"record of {length} bytes does not fit the records section")
        position += 1  # attributes (int8, unused)
        if position < end and (byte := data[position]) < 0x80:
            timestamp_delta = (byte >> 1) ^ -(byte & 1)
            position += 1
        else:
            timestamp_delta, position = varint(data, position, end, _INT64_UNSIGNED_LIMIT, 10)
        if position < end and (byte := data[position]) < 0x80:
            offset_delta = (byte >> 1) ^ -(byte & 1)
            position += 1
        else:
            offset_delta, position = varint(data, position, end, limit32, 5)
        if position < end and (byte := data[position]) < 0x80 and not byte & 1:
            stop = position + 1 + (byte >> 1)  # even one-byte zigzag: a length 0..63
            if stop > end:
                raise CorruptRecordError("key overruns its record")
            key: bytes | None = data[position + 1 : stop]
            position = stop
        else:
            key, position = _nullable_bytes(data, position, end)
        if position < end and (byte := data[position]) < 0x80 and not byte & 1:
            stop = position + 1 + (byte >> 1)
            if stop > end:
                raise CorruptRecordError("value overruns its record")
            value: bytes | None = data[position + 1 : stop]
            position = stop
        else:
            value, position = _nullable_bytes(data, position, end)
        if position < end and data[position] == 0:  # no headers: the common case
            position += 1
            if position != end:
                raise CorruptRecordError(f"record has {end - position} unexplained trailing bytes")
            yield offset_delta, timestamp_delta, key, value, ()
            continue
        header_count, position = _var32(data, position, end)
        if header_count < 0 or header_count * 2 > end - position:
            raise CorruptRecordError(f"invalid header count {header_count}")
        headers = tuple(_headers(data, position, end, header_count))
        position = end
        yield offset_delta, timestamp_delta, key, value, headers
    if position != total:
        raise CorruptRecordError(f"{total - position} bytes of garbage after the last record")


def _headers(data: bytes, position: int, end: int, header_count: int) -> Iterator[Header]:
    for _ in range(header_count):
        key_bytes, position = _nullable_bytes(data, position, end)
        if key_bytes is None:
            raise CorruptRecordError("null header key")
        try:
            key = key_bytes.decode()
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"header key is not UTF-8: {exc}") from exc
        value, position = _nullable_bytes(data, position, end)
        yield Header(key, value)
    if position != end:
        raise CorruptRecordError(f"record has {end - position} unexplained trailing bytes")


def records_bytes(buf: bytes | bytearray | memoryview, position: int, header: BatchHeader) -> bytes:
    """The batch's records section, decompressed (the batch must be bounds-checked already)."""
    payload = memoryview(buf)[position + HEADER_BYTES : position + header.size_bytes]
    return decompress(header.compression_type, payload)


def iter_records(
    buf: bytes | bytearray | memoryview, position: int = 0, *, check_crc: bool = True
) -> Iterator[DecodedRecord]:
    """Yield the records of the batch at `position` with absolute offsets and timestamps.

    Lazy: a corrupt record (or trailing garbage) raises only when reached, after the records
    before it were yielded. Use `decode_batch` to accept a batch all or nothing.
    """
    header = _checked_header(buf, position, check_crc)
    data = records_bytes(buf, position, header)
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    timestamp_type = (header.attributes & TIMESTAMP_TYPE_MASK) >> 3
    for offset_delta, timestamp_delta, key, value, headers in decode_records(
        data, header.record_count
    ):
        timestamp_ms = header.max_timestamp if timestamp_type else base_timestamp + timestamp_delta
        yield DecodedRecord(
            base_offset + offset_delta, timestamp_ms, key, value, headers, timestamp_type
        )


def _checked_header(
    buf: bytes | bytearray | memoryview, position: int, check_crc: bool
) -> BatchHeader:
    if check_crc:
        return validate_batch(buf, position)
    header = read_header(buf, position)
    if position + header.size_bytes > len(buf):
        raise CorruptRecordError(f"batch at position {position} truncated")
    return header


def decode_batch(
    buf: bytes | bytearray | memoryview, position: int = 0, *, check_crc: bool = True
) -> DecodedBatch:
    """The batch at `position`, header and all records; bytes after it are not looked at."""
    header = _checked_header(buf, position, check_crc)
    return DecodedBatch(header, tuple(iter_records(buf, position, check_crc=False)))


def decode_batches(
    buf: bytes | bytearray | memoryview, *, check_crc: bool = True
) -> Iterator[DecodedBatch]:
    """Every batch in `buf` (e.g. a fetch response's records or a segment); no partial tail."""
    position = 0
    end = len(buf)
    while position < end:
        batch = decode_batch(buf, position, check_crc=check_crc)
        yield batch
        position += batch.header.size_bytes
