"""Building RecordBatch v2 bytes from records (the producer's and the tests' side).

A record inside a batch (all integers zigzag varints unless noted)::

    length, attributes (int8, unused = 0), timestampDelta, offsetDelta,
    keyLength (-1 = null), key, valueLength (-1 = null), value,
    headerCount, [headerKeyLength, headerKey (utf-8), headerValueLength (-1 = null), value]...

The records section is compressed as a whole when the batch's compression bits say so; the CRC is
computed last, over attributes .. end (see batch.py for the full layout, which is the spec).

Three ways in:
- `build_batch(records)`: a list of `Record`s to one batch (tests, tools, control batches).
- `BatchBuilder`: the producer accumulator's unit; `try_append` one record at a time, refused once
  the batch would exceed `batch_size_bytes` (batch.size), then `build()` with the producer
  state the sender assigns at drain time (base_sequence etc.).
- `build_batch_from_columns(keys, values)`: many records at once with little per-record work
  (precomputed varints, one join), for bulk writers such as the Spark sink.
"""

from __future__ import annotations

import itertools
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
from log.records.varint import encode_varint, varint_size

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


class BatchParts:
    """A built batch as its pieces, the header's bytes and then the records as they were
    given (not copied): len() is the batch's size, `parts` go out as they are in a vectored
    send (ClientCodec.encode_request_parts), bytes() joins them."""

    __slots__ = ("parts", "_size")

    def __init__(self, parts: tuple[bytes | bytearray | memoryview, ...]) -> None:
        self.parts = parts
        self._size = sum(len(part) for part in parts)

    def __len__(self) -> int:
        return self._size

    def __bytes__(self) -> bytes:
        return b"".join(self.parts)


def assemble_batch(
    records_bytes: bytes | bytearray | memoryview,
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
    """assemble_batch_parts, joined: the records are copied once (into the result)."""
    return bytes(
        assemble_batch_parts(
            records_bytes,
            record_count=record_count,
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
    )


def assemble_batch_parts(
    records_bytes: bytes | bytearray | memoryview,
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
) -> BatchParts:
    """Wrap already-encoded (uncompressed) records in a batch header, compressing if asked,
    without copying them: the CRC is computed over the header's tail and then continued
    over the payload where it lies; the batch is (header bytes, payload)."""
    assert 0 < record_count < 1 << 31, "a built batch holds 1 .. 2**31-1 records"
    payload = (
        records_bytes
        if compression_type == CompressionType.NONE
        else compress(compression_type, records_bytes)
    )
    attributes = int(compression_type)
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG
    if is_control:
        attributes |= CONTROL_FLAG
    after_crc = _HEADER_AFTER_CRC.pack(
        attributes,
        record_count - 1,
        base_timestamp_ms,
        max_timestamp_ms,
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
    )
    batch_length = HEADER_BYTES - LOG_OVERHEAD + len(payload)
    crc = crc32c.crc32c(payload, crc32c.crc32c(after_crc))
    head = _HEADER_BEFORE_CRC.pack(base_offset, batch_length, partition_leader_epoch, MAGIC_V2)
    assert len(head) + 4 == ATTRIBUTES_OFFSET
    return BatchParts((b"".join((head, _UINT32.pack(crc), after_crc)), payload))


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    encode_varint(value, out)
    return bytes(out)


# Zigzag varints of -1 .. 16382 precomputed: lengths, offset deltas and small timestamp deltas
# of bulk records almost always fall here, and a tuple lookup beats an encoding loop.
_SMALL_VARINT_LIMIT = 1 << 14
_SMALL_VARINTS = tuple(_varint_bytes(v) for v in range(-1, _SMALL_VARINT_LIMIT - 1))
_NULL_LENGTH = _SMALL_VARINTS[0]  # -1
_ZERO = _SMALL_VARINTS[1]
_NO_HEADERS = _ZERO  # headerCount 0


def _fast_varint(value: int) -> bytes:
    if -1 <= value < _SMALL_VARINT_LIMIT - 1:
        return _SMALL_VARINTS[value + 1]
    return _varint_bytes(value)


def build_batch_from_columns(
    keys: Sequence[bytes | None] | None,
    values: Sequence[bytes | None],
    *,
    timestamps_ms: Sequence[int] | None = None,
    timestamp_ms: int = 0,
    headers: Sequence[Sequence[Header]] | None = None,
    base_offset: int = 0,
    compression_type: int = CompressionType.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
) -> bytes:
    """One batch from parallel columns: record i is (keys[i], values[i], timestamps_ms[i]).

    `keys` None means every key is null; `timestamps_ms` None means every record has
    `timestamp_ms`; `headers` None means no record has headers. Same bytes as `build_batch`.
    """
    record_count = len(values)
    assert record_count > 0, "a batch holds at least one record"
    assert keys is None or len(keys) == record_count
    assert timestamps_ms is None or len(timestamps_ms) == record_count
    assert headers is None or len(headers) == record_count
    if timestamps_ms is None:
        base_timestamp_ms = max_timestamp_ms = timestamp_ms
    else:
        base_timestamp_ms, max_timestamp_ms = min(timestamps_ms), max(timestamps_ms)
    if headers is None:
        records_bytes = None
        if keys is None:
            records_bytes = _records_of_equal_values(values, timestamps_ms, base_timestamp_ms)
        if records_bytes is None:
            records_bytes = _records_without_headers(keys, values, timestamps_ms, base_timestamp_ms)
    else:
        records_bytes = _records_with_headers(
            keys, values, timestamps_ms, base_timestamp_ms, headers
        )
    return assemble_batch(
        records_bytes,
        record_count=record_count,
        base_offset=base_offset,
        base_timestamp_ms=base_timestamp_ms,
        max_timestamp_ms=max_timestamp_ms,
        compression_type=compression_type,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=is_transactional,
    )


def _records_with_headers(
    keys: Sequence[bytes | None] | None,
    values: Sequence[bytes | None],
    timestamps_ms: Sequence[int] | None,
    base_timestamp_ms: int,
    headers: Sequence[Sequence[Header]],
) -> bytes:
    """The records section, record by record (some records may carry headers)."""
    record_count = len(values)
    parts: list[bytes] = []
    append = parts.append
    timestamp_delta_bytes = _ZERO
    for offset_delta in range(record_count):
        key = None if keys is None else keys[offset_delta]
        value = values[offset_delta]
        if timestamps_ms is not None:
            timestamp_delta_bytes = _fast_varint(timestamps_ms[offset_delta] - base_timestamp_ms)
        if headers is not None and headers[offset_delta]:
            body = bytearray()
            encode_record(
                body,
                offset_delta,
                0 if timestamps_ms is None else timestamps_ms[offset_delta] - base_timestamp_ms,
                key,
                value,
                headers[offset_delta],
            )
            append(bytes(body))
            continue
        offset_delta_bytes = _fast_varint(offset_delta)
        key_length_bytes = _NULL_LENGTH if key is None else _fast_varint(len(key))
        value_length_bytes = _NULL_LENGTH if value is None else _fast_varint(len(value))
        body_bytes = (
            2  # attributes + headerCount
            + len(timestamp_delta_bytes)
            + len(offset_delta_bytes)
            + len(key_length_bytes)
            + (0 if key is None else len(key))
            + len(value_length_bytes)
            + (0 if value is None else len(value))
        )
        append(_fast_varint(body_bytes))
        append(b"\x00")
        append(timestamp_delta_bytes)
        append(offset_delta_bytes)
        append(key_length_bytes)
        if key is not None:
            append(key)
        append(value_length_bytes)
        if value is not None:
            append(value)
        append(_NO_HEADERS)
    return b"".join(parts)


def _records_of_equal_values(
    values: Sequence[bytes | None],
    timestamps_ms: Sequence[int] | None,
    base_timestamp_ms: int,
) -> bytes | None:
    """The records section for null keys, no headers and values all of one length (what
    `send` of same-size records builds), with no per-record Python step; None for any other
    shape. Records differ only in offsetDelta and, by runs, in timestampDelta, so the list
    to join is made with slice assignments: record i is parts[4i:4i+4] = head, offsetDelta,
    lengths (keyLength -1, valueLength), value; `head` (the previous record's headerCount 0,
    length, attributes, timestampDelta) is constant between the edges where the timestamp
    changes or the offsetDelta varint widens (64, 8192)."""
    count = len(values)
    try:
        value_lengths = set(map(len, values))  # type: ignore[arg-type]  # len(None) raises: no second pass
    except TypeError:  # a null value
        return None
    if len(value_lengths) != 1 or count >= _SMALL_VARINT_LIMIT - 1:
        return None
    (value_length,) = value_lengths
    lengths = _NULL_LENGTH + _fast_varint(value_length)
    edges = {0, 1, count} | {edge for edge in (64, 8192) if edge < count}
    if timestamps_ms is not None:
        position = 0
        for _timestamp_ms, run in itertools.groupby(timestamps_ms):
            position += len(list(run))
            edges.add(position)
    ordered = sorted(edges)
    heads: list[bytes] = []
    for start, end in zip(ordered, ordered[1:], strict=False):
        timestamp_delta = 0 if timestamps_ms is None else timestamps_ms[start] - base_timestamp_ms
        timestamp_delta_bytes = _fast_varint(timestamp_delta)
        body_bytes = (
            2  # attributes + headerCount
            + len(timestamp_delta_bytes)
            + len(_SMALL_VARINTS[start + 1])  # offsetDelta, the same width up to `end`
            + len(lengths)
            + value_length
        )
        head = _fast_varint(body_bytes) + b"\x00" + timestamp_delta_bytes
        heads.extend([_NO_HEADERS + head] * (end - start) if start else [head])
    parts: list[bytes] = [_NO_HEADERS] * (4 * count + 1)
    end = 4 * count
    parts[0:end:4] = heads
    parts[1:end:4] = _SMALL_VARINTS[1 : count + 1]
    parts[2:end:4] = [lengths] * count
    parts[3:end:4] = values  # type: ignore[assignment]  # no None: len() took every value above
    return b"".join(parts)


def _records_without_headers(
    keys: Sequence[bytes | None] | None,
    values: Sequence[bytes | None],
    timestamps_ms: Sequence[int] | None,
    base_timestamp_ms: int,
) -> bytes:
    """The records section when no record has headers: the common, hot case.

    A record is `length, 0 (attributes), timestampDelta, offsetDelta, keyLength, key,
    valueLength, value, 0 (headerCount)`. In a typical batch only offsetDelta changes from
    one record to the next (no key or same-size keys, same-size values, few distinct
    timestamps), so the bytes around it are made once per change of what they depend on:
    `head` = the previous record's headerCount 0 (none before the first record), length,
    attributes, timestampDelta; `lengths` = keyLength [then key], valueLength. A record is
    then four list items: head, offsetDelta, lengths (or keyLength, key, valueLength), value.
    """
    small = _SMALL_VARINTS
    small_limit = _SMALL_VARINT_LIMIT - 1
    parts: list[bytes] = []
    extend = parts.extend
    timestamp_delta = 0
    cached: tuple[int, int, int, int] | None = None
    head = key_length_bytes = value_length_bytes = lengths = b""
    separator = b""  # the previous record's headerCount
    for offset_delta, value in enumerate(values):
        key = None if keys is None else keys[offset_delta]
        if timestamps_ms is not None:
            timestamp_delta = timestamps_ms[offset_delta] - base_timestamp_ms
        offset_delta_bytes = (
            small[offset_delta + 1] if offset_delta < small_limit else _varint_bytes(offset_delta)
        )
        key_length = -1 if key is None else len(key)
        value_length = -1 if value is None else len(value)
        record_shape = (timestamp_delta, len(offset_delta_bytes), key_length, value_length)
        if record_shape != cached or not separator:
            cached = record_shape
            timestamp_delta_bytes = _fast_varint(timestamp_delta)
            key_length_bytes = _fast_varint(key_length)
            value_length_bytes = _fast_varint(value_length)
            body_bytes = (
                2  # attributes + headerCount
                + len(timestamp_delta_bytes)
                + len(offset_delta_bytes)
                + len(key_length_bytes)
                + max(key_length, 0)
                + len(value_length_bytes)
                + max(value_length, 0)
            )
            head = separator + _fast_varint(body_bytes) + b"\x00" + timestamp_delta_bytes
            lengths = key_length_bytes + value_length_bytes
            separator = _NO_HEADERS
        if key is None:
            extend((head, offset_delta_bytes, lengths))
        else:
            extend((head, offset_delta_bytes, key_length_bytes, key, value_length_bytes))
        if value is not None:
            parts.append(value)
        if offset_delta == 0:  # later records' heads start with the previous headerCount
            cached = None
    parts.append(_NO_HEADERS)
    return b"".join(parts)


def record_size_bytes(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] = (),
) -> int:
    """Exact encoded size of one record, its length prefix included."""
    body_bytes = 1 + varint_size(timestamp_delta) + varint_size(offset_delta)
    body_bytes += 1 if key is None else varint_size(len(key)) + len(key)
    body_bytes += 1 if value is None else varint_size(len(value)) + len(value)
    body_bytes += varint_size(len(headers))
    for header in headers:
        key_bytes = len(header.key.encode())
        body_bytes += varint_size(key_bytes) + key_bytes
        body_bytes += (
            1 if header.value is None else varint_size(len(header.value)) + len(header.value)
        )
    return varint_size(body_bytes) + body_bytes


class BatchBuilder:
    """Collects records for one future batch and knows how big it is getting.

    The producer's accumulator keeps one open builder per partition: `try_append` returns False
    once the record would push the batch past `batch_size_bytes` (Kafka's batch.size), and the
    caller then closes this builder and opens a new one. The first record is always accepted, so
    a record larger than batch.size still gets a batch of its own (max.request.size is the
    caller's check). The size is exact for uncompressed batches and an upper estimate for
    compressed ones (the uncompressed size; codecs rarely expand real data).

    Offsets, producer id/epoch and base_sequence are given to `build`, because the sender
    assigns sequences when it drains the batch, not when records are appended.
    """

    def __init__(
        self,
        *,
        batch_size_bytes: int,
        compression_type: int = CompressionType.NONE,
        is_transactional: bool = False,
    ) -> None:
        assert batch_size_bytes > HEADER_BYTES, "batch.size must exceed the 61-byte header"
        self.batch_size_bytes = batch_size_bytes
        self.compression_type = compression_type
        self.is_transactional = is_transactional
        self._records = bytearray()
        self._record_count = 0
        self._base_timestamp_ms = 0
        self._max_timestamp_ms = 0

    @property
    def record_count(self) -> int:
        return self._record_count

    @property
    def is_empty(self) -> bool:
        return self._record_count == 0

    @property
    def estimated_size_bytes(self) -> int:
        return HEADER_BYTES + len(self._records)

    @property
    def base_timestamp_ms(self) -> int:
        return self._base_timestamp_ms

    @property
    def max_timestamp_ms(self) -> int:
        return self._max_timestamp_ms

    def try_append(
        self,
        value: bytes | None,
        key: bytes | None = None,
        headers: Sequence[Header] = (),
        *,
        timestamp_ms: int,
    ) -> bool:
        """Append one record unless it would make a non-empty batch exceed batch.size."""
        if self._record_count == 0:
            self._base_timestamp_ms = self._max_timestamp_ms = timestamp_ms
        timestamp_delta = timestamp_ms - self._base_timestamp_ms
        if self._record_count and (
            self.estimated_size_bytes
            + record_size_bytes(self._record_count, timestamp_delta, key, value, headers)
            > self.batch_size_bytes
        ):
            return False
        encode_record(self._records, self._record_count, timestamp_delta, key, value, headers)
        self._record_count += 1
        self._max_timestamp_ms = max(self._max_timestamp_ms, timestamp_ms)
        return True

    def build(
        self,
        *,
        base_offset: int = 0,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> bytes:
        """The batch's bytes (compressed and CRC'd); the builder stays usable for retries."""
        assert self._record_count > 0, "a batch holds at least one record"
        return assemble_batch(
            bytes(self._records),
            record_count=self._record_count,
            base_offset=base_offset,
            base_timestamp_ms=self._base_timestamp_ms,
            max_timestamp_ms=self._max_timestamp_ms,
            compression_type=self.compression_type,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            partition_leader_epoch=partition_leader_epoch,
            is_transactional=self.is_transactional,
        )
