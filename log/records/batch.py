"""RecordBatch v2 (magic 2): the single `construct` definition of a batch and of its records.

A batch, big-endian (sizes in bytes; "var" = zigzag varint, "varlong" = zigzag varlong)::

    offset  size  field                  covered by CRC?
         0     8  baseOffset             no  \\ LOG_OVERHEAD: the broker assigns offsets by
         8     4  batchLength            no  / patching baseOffset in place
        12     4  partitionLeaderEpoch   no  patched in place by the leader on append
        16     1  magic (= 2)            no  read before the CRC to know the format
        17     4  crc                    --  CRC-32C (Castagnoli) of bytes 21 .. end of batch
        21     2  attributes             yes compression:3 timestampType:1 transactional:1
                                             control:1 deleteHorizon:1 (rest unused)
        23     4  lastOffsetDelta        yes
        27     8  baseTimestamp          yes
        35     8  maxTimestamp           yes
        43     8  producerId             yes
        51     2  producerEpoch          yes
        53     4  baseSequence           yes
        57     4  recordCount            yes
        61     *  records                yes compressed as one stream when compression != 0

The CRC covers attributes .. end and nothing before it: baseOffset and partitionLeaderEpoch are
only known to the leader when it appends, so it patches them in place without recomputing the
CRC over a possibly large batch (batchLength and magic never change after the producer).

A record (inside the possibly compressed records section)::

    length              var      bytes after this field
    attributes          int8     unused, 0
    timestampDelta      varlong  timestamp - baseTimestamp
    offsetDelta         var      offset - baseOffset
    keyLength           var      -1 = null key
    key                 bytes
    valueLength         var      -1 = null value
    value               bytes
    headerCount         var
    headers             [headerKeyLength var, headerKey utf-8,
                         headerValueLength var (-1 = null), headerValue bytes]...

With LogAppendTime (timestampType = 1) every record's timestamp is the batch's maxTimestamp.

This module is the specification; it is clear rather than fast. The broker's hot path reads
headers with `batch_header.read_header` (struct) and clients decode records with `reader.py`
(memoryview + varint.py); tests prove both agree with the definitions here. Everything converts
to frozen dataclasses (`BatchHeader`, `DecodedRecord`, `DecodedBatch`) so construct containers
never leak, and every construct error becomes CorruptRecordError.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import crc32c
from construct import (
    Array,
    Bytes,
    Const,
    Construct,
    ConstructError,
    Int8sb,
    Int16sb,
    Int32sb,
    Int32ub,
    Int64sb,
    IntegerError,
    PascalString,
    Prefixed,
    PrefixedArray,
    SizeofError,
    StreamError,
    Struct,
    Terminated,
    this,
)
from construct.core import stream_read, stream_write

from log.common.errors import CorruptRecordError
from log.records.batch_header import (
    ATTRIBUTES_OFFSET,
    HEADER_BYTES,
    LOG_OVERHEAD,
    MAGIC_V2,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
)
from log.records.builder import Header
from log.records.compression import decompress
from log.records.varint import MAX_VARINT_BYTES, MAX_VARLONG_BYTES


class ZigZagVarInt(Construct):
    """Kafka's zigzag varint: `max_bytes` 5 holds an int32 ("varint"), 10 an int64 ("varlong").

    construct's own ZigZag is unbounded; Kafka's widths are part of the format, so overlong
    encodings and out-of-range values are errors here.
    """

    def __init__(self, max_bytes: int) -> None:
        super().__init__()
        assert max_bytes in (MAX_VARINT_BYTES, MAX_VARLONG_BYTES)
        self.max_bytes = max_bytes
        self.bits = 32 if max_bytes == MAX_VARINT_BYTES else 64

    def _parse(self, stream, context, path):
        unsigned = 0
        for index in range(self.max_bytes):
            byte = stream_read(stream, 1, path)[0]
            unsigned |= (byte & 0x7F) << (7 * index)
            if byte < 0x80:
                break
        else:
            raise StreamError(f"varint longer than {self.max_bytes} bytes", path=path)
        if unsigned >> self.bits:
            raise IntegerError(f"varint value overflows int{self.bits}", path=path)
        return (unsigned >> 1) ^ -(unsigned & 1)

    def _build(self, obj, stream, context, path):
        if not isinstance(obj, int) or not -(1 << (self.bits - 1)) <= obj < 1 << (self.bits - 1):
            raise IntegerError(f"{obj!r} is not an int{self.bits}", path=path)
        unsigned = ((obj << 1) ^ (obj >> (self.bits - 1))) & ((1 << self.bits) - 1)
        out = bytearray()
        while unsigned > 0x7F:
            out.append((unsigned & 0x7F) | 0x80)
            unsigned >>= 7
        out.append(unsigned)
        stream_write(stream, bytes(out), len(out), path)
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("a varint has no fixed size", path=path)


class NullableVarBytes(Construct):
    """A varint length then that many bytes; length -1 is null (None), below -1 is corrupt."""

    def _parse(self, stream, context, path):
        length = VARINT._parsereport(stream, context, path)
        if length == -1:
            return None
        if length < 0:
            raise StreamError(f"negative length {length}", path=path)
        return stream_read(stream, length, path)

    def _build(self, obj, stream, context, path):
        if obj is None:
            VARINT._build(-1, stream, context, path)
            return obj
        data = bytes(obj)
        VARINT._build(len(data), stream, context, path)
        stream_write(stream, data, len(data), path)
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("variable size", path=path)


VARINT = ZigZagVarInt(MAX_VARINT_BYTES)
VARLONG = ZigZagVarInt(MAX_VARLONG_BYTES)
NULLABLE_BYTES = NullableVarBytes()

RECORD_HEADER = Struct(
    "key" / PascalString(VARINT, "utf8"),  # never null: Kafka rejects a negative key length
    "value" / NULLABLE_BYTES,
)

RECORD = Prefixed(
    VARINT,  # length of everything below
    Struct(
        "attributes" / Int8sb,
        "timestamp_delta" / VARLONG,
        "offset_delta" / VARINT,
        "key" / NULLABLE_BYTES,
        "value" / NULLABLE_BYTES,
        "headers" / PrefixedArray(VARINT, RECORD_HEADER),
        Terminated,  # the length must match the fields exactly
    ),
)

# The (decompressed) records section: exactly recordCount records, nothing after them.
# Parse with `RECORDS.parse(data, record_count=n)`.
RECORDS = Struct(
    "records" / Array(this._.record_count, RECORD),
    Terminated,
)

BATCH_HEADER = Struct(
    "base_offset" / Int64sb,
    "batch_length" / Int32sb,
    "partition_leader_epoch" / Int32sb,
    "magic" / Const(MAGIC_V2, Int8sb),
    "crc" / Int32ub,
    "attributes" / Int16sb,
    "last_offset_delta" / Int32sb,
    "base_timestamp" / Int64sb,
    "max_timestamp" / Int64sb,
    "producer_id" / Int64sb,
    "producer_epoch" / Int16sb,
    "base_sequence" / Int32sb,
    "record_count" / Int32sb,
)
assert BATCH_HEADER.sizeof() == HEADER_BYTES

RECORD_BATCH = Struct(
    "header" / BATCH_HEADER,
    # batchLength counts from partitionLeaderEpoch on: the header's last 49 bytes + records.
    "records_payload" / Bytes(this.header.batch_length - (HEADER_BYTES - LOG_OVERHEAD)),
)

_HEADER_FIELDS = tuple(sc.name for sc in BATCH_HEADER.subcons)


@dataclass(frozen=True, slots=True)
class DecodedRecord:
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = field(default_factory=tuple)
    # The batch's timestamp type: 0 = CreateTime (the producer's), 1 = LogAppendTime (the
    # broker's append time, the batch's max_timestamp, stamped on every record of the batch).
    timestamp_type: int = 0


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    header: BatchHeader
    records: tuple[DecodedRecord, ...]


def _corrupt(what: str, exc: Exception) -> CorruptRecordError:
    error = CorruptRecordError(f"{what}: {exc}")
    error.__cause__ = exc
    return error


def parse_header(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """The 61-byte header at `position` per the specification (no length or CRC checks)."""
    try:
        parsed = BATCH_HEADER.parse(bytes(buf[position : position + HEADER_BYTES]))
    except ConstructError as exc:
        raise _corrupt(f"batch header at position {position}", exc) from exc
    return BatchHeader(**{name: parsed[name] for name in _HEADER_FIELDS})


def build_header(header: BatchHeader) -> bytes:
    """The 61 header bytes for `header`'s fields exactly as given (the CRC is not computed)."""
    try:
        return BATCH_HEADER.build({name: getattr(header, name) for name in _HEADER_FIELDS})
    except ConstructError as exc:
        raise ValueError(f"header fields out of range: {exc}") from exc


def parse_records(
    data: bytes, record_count: int
) -> list[tuple[int, int, bytes | None, bytes | None, tuple[Header, ...]]]:
    """Decompressed records section -> [(offset_delta, timestamp_delta, key, value, headers)]."""
    try:
        parsed = RECORDS.parse(data, record_count=record_count)
    except (ConstructError, UnicodeDecodeError) as exc:
        raise _corrupt("records section", exc) from exc
    return [
        (
            r.offset_delta,
            r.timestamp_delta,
            r.key,
            r.value,
            tuple(Header(h.key, h.value) for h in r.headers),
        )
        for r in parsed.records
    ]


def build_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[Header, ...] = (),
) -> bytes:
    """One length-prefixed record per the specification."""
    return RECORD.build(
        {
            "attributes": 0,
            "timestamp_delta": timestamp_delta,
            "offset_delta": offset_delta,
            "key": key,
            "value": value,
            "headers": [{"key": h.key, "value": h.value} for h in headers],
        }
    )


def parse_batch(buf: bytes | bytearray | memoryview, position: int = 0) -> DecodedBatch:
    """Decode the whole batch at `position` per the specification: CRC, decompression, records.

    Bytes after the batch are not looked at (they may be the next batch).
    """
    data = bytes(buf[position:])
    try:
        parsed = RECORD_BATCH.parse(data)
    except ConstructError as exc:
        raise _corrupt(f"batch at position {position}", exc) from exc
    header = BatchHeader(**{name: parsed.header[name] for name in _HEADER_FIELDS})
    if header.record_count < 0 or header.last_offset_delta < 0:
        raise CorruptRecordError(f"negative record count or last offset delta at {position}")
    if crc32c.crc32c(data[ATTRIBUTES_OFFSET : header.size_bytes]) != header.crc:
        raise CorruptRecordError(f"CRC mismatch in batch at position {position}")
    records_bytes = decompress(header.compression_type, parsed.records_payload)
    log_append_time = bool(header.attributes & TIMESTAMP_TYPE_MASK)
    records = tuple(
        DecodedRecord(
            offset=header.base_offset + offset_delta,
            timestamp_ms=(
                header.max_timestamp if log_append_time else header.base_timestamp + ts_delta
            ),
            key=key,
            value=value,
            headers=headers,
            timestamp_type=header.timestamp_type,
        )
        for offset_delta, ts_delta, key, value, headers in parse_records(
            records_bytes, header.record_count
        )
    )
    return DecodedBatch(header, records)
