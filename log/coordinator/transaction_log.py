"""__transaction_state records: Kafka's TransactionLogKey and TransactionLogValue, byte for byte.

    TransactionLogKey, version 0 (never flexible)
      version          int16 = 0
      transactional_id string (int16 length)

    TransactionLogValue, version 0 (classic) and 1 (flexible, transaction.version >= 1)
      version                         int16
      producer_id                     int64
      producer_epoch                  int16
      transaction_timeout_ms          int32
      transaction_status              int8    TransactionState id
      transaction_partitions          nullable array (null when Empty), each:
        topic                         string
        partition_ids                 array of int32
        (v1: an empty tagged-field section)
      transaction_last_update_ms      int64
      transaction_start_timestamp_ms  int64
      (v1 only) tagged fields, ascending, each written only when not its default:
        0  previous_producer_id       int64   default -1
        1  next_producer_id           int64   default -1
        2  client_transaction_version int16   default 0

Version 0 uses int16-length strings and int32-count arrays (-1: null); version 1 uses Kafka's
compact forms, unsigned varint length + 1 (0: null), and the tagged-field sections (unsigned
varint count, then tag, size, bytes). Which value version is written is the cluster's
`transaction.version` feature, not the client's: 0 below TV1 (the tagged fields are then not
stored at all), 1 from TV1 on, as Kafka's TransactionVersion.transactionLogValueVersion.
A null value is a tombstone: the transactional id expired.

`last_producer_epoch` is not in the record (Kafka 4.x does not store it either): after a load
it is -1, so a client's retry of an epoch bump that spans a coordinator fail-over is fenced.

`partition_for` places a transactional id: Utils.abs(String.hashCode) % partition count, with
Java's hash over UTF-16 code units and Utils.abs mapping Integer.MIN_VALUE to 0.
"""

from __future__ import annotations

import dataclasses
import struct
from collections import defaultdict

from log.common.errors import CorruptRecordError
from log.coordinator.transaction_state import (
    NO_PRODUCER_EPOCH,
    TransactionMetadata,
    TransactionState,
    TransactionVersion,
    TxnTransitMetadata,
)

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
HIGHEST_VALUE_VERSION = 1
_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, status
_TIMES = struct.Struct(">qq")  # last update, start


@dataclasses.dataclass(frozen=True)
class TransactionLogKey:
    transactional_id: str


@dataclasses.dataclass(frozen=True)
class PartitionsSchema:
    """One topic of a transaction and its partitions (Kafka's PartitionsSchema)."""

    topic: str
    partition_ids: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: TransactionState
    transaction_partitions: tuple[PartitionsSchema, ...] | None
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    previous_producer_id: int = -1  # tagged, v1+
    next_producer_id: int = -1  # tagged, v1+
    client_transaction_version: int = 0  # tagged, v1+


def value_version_for(transaction_version_level: TransactionVersion) -> int:
    """The value version the cluster's transaction.version writes."""
    return 1 if transaction_version_level >= TransactionVersion.TV_1 else 0


# -- key -------------------------------------------------------------------------------------


def encode_key(key: TransactionLogKey) -> bytes:
    return _INT16.pack(KEY_VERSION) + _string(key.transactional_id)


def decode_key(data: bytes) -> TransactionLogKey | None:
    """The key, or None for a key version we do not know (skipped on load, as Kafka does)."""
    reader = _Reader(data)
    version = reader.int16()
    if version != KEY_VERSION:
        return None
    key = TransactionLogKey(reader.string())
    reader.end()
    return key


# -- value -----------------------------------------------------------------------------------


def encode_value(value: TransactionLogValue, version: int) -> bytes:
    if version not in (0, 1):
        raise ValueError(f"TransactionLogValue version {version}")
    flexible = version == 1
    out = [
        _HEAD.pack(
            version, value.producer_id, value.producer_epoch, value.transaction_timeout_ms,
            int(value.transaction_status),
        ),
        _partitions(value.transaction_partitions, flexible),
        _TIMES.pack(
            value.transaction_last_update_timestamp_ms, value.transaction_start_timestamp_ms
        ),
    ]  # fmt: skip
    if flexible:
        out.append(_value_tags(value))
    return b"".join(out)


def decode_value(data: bytes) -> TransactionLogValue:
    """CorruptRecordError for what Kafka's generated reader would refuse or misread: short
    data, trailing bytes, bad lengths, unknown versions or states, a known tagged field of the
    wrong size. Unknown tagged fields are skipped, as Kafka skips them."""
    reader = _Reader(data)
    version = reader.int16()
    if version not in (0, 1):
        raise CorruptRecordError(f"unknown TransactionLogValue version {version}")
    flexible = version == 1
    producer_id, producer_epoch, timeout_ms = reader.int64(), reader.int16(), reader.int32()
    status = reader.int8()
    try:
        state = TransactionState(status)
    except ValueError:
        raise CorruptRecordError(f"unknown transaction status {status}") from None
    partitions = _read_partitions(reader, flexible)
    last_update_ms, start_ms = reader.int64(), reader.int64()
    tags = _read_tags(reader) if flexible else {}
    reader.end()
    return TransactionLogValue(
        producer_id, producer_epoch, timeout_ms, state, partitions, last_update_ms, start_ms,
        previous_producer_id=_tag_int(tags, _TAG_PREVIOUS_PRODUCER_ID, 8, -1),
        next_producer_id=_tag_int(tags, _TAG_NEXT_PRODUCER_ID, 8, -1),
        client_transaction_version=_tag_int(tags, _TAG_CLIENT_TRANSACTION_VERSION, 2, 0),
    )  # fmt: skip


# -- state <-> record ------------------------------------------------------------------------


def value_for(transit: TxnTransitMetadata) -> TransactionLogValue:
    """The record of a prepared transition (Kafka's TransactionLog.valueToBytes)."""
    if transit.txn_state == TransactionState.EMPTY and transit.topic_partitions:
        raise ValueError(f"an Empty transaction with partitions: {transit}")
    partitions: tuple[PartitionsSchema, ...] | None = None
    if transit.txn_state != TransactionState.EMPTY:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in sorted(transit.topic_partitions):
            by_topic[topic].append(partition)
        partitions = tuple(PartitionsSchema(t, tuple(ids)) for t, ids in by_topic.items())
    return TransactionLogValue(
        producer_id=transit.producer_id,
        producer_epoch=transit.producer_epoch,
        transaction_timeout_ms=transit.txn_timeout_ms,
        transaction_status=transit.txn_state,
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=transit.txn_last_update_timestamp_ms,
        transaction_start_timestamp_ms=transit.txn_start_timestamp_ms,
        previous_producer_id=transit.prev_producer_id,
        next_producer_id=transit.next_producer_id,
        client_transaction_version=int(transit.client_transaction_version),
    )


def metadata_from(transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
    """The state a loaded record stands for (Kafka's readTxnRecordValue)."""
    partitions: set[tuple[str, int]] = set()
    if value.transaction_status != TransactionState.EMPTY:
        for schema in value.transaction_partitions or ():
            partitions.update((schema.topic, p) for p in schema.partition_ids)
    try:
        version = TransactionVersion(value.client_transaction_version)
    except ValueError:
        level = value.client_transaction_version
        raise CorruptRecordError(f"unknown client transaction version {level}") from None
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=value.producer_id,
        prev_producer_id=value.previous_producer_id,
        next_producer_id=value.next_producer_id,
        producer_epoch=value.producer_epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        txn_timeout_ms=value.transaction_timeout_ms,
        state=value.transaction_status,
        topic_partitions=partitions,
        txn_start_timestamp_ms=value.transaction_start_timestamp_ms,
        txn_last_update_timestamp_ms=value.transaction_last_update_timestamp_ms,
        client_transaction_version=version,
    )


# -- placement -------------------------------------------------------------------------------


def java_string_hash_code(value: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, int32 overflow."""
    h = 0
    data = value.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: Math.abs, except Integer.MIN_VALUE -> 0."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """The __transaction_state partition of a transactional id."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions {num_partitions}")
    return kafka_abs(java_string_hash_code(transactional_id)) % num_partitions


# -- primitives ------------------------------------------------------------------------------

MAX_INT16 = (1 << 15) - 1


def _uvarint(n: int) -> bytes:
    assert 0 <= n < 1 << 32
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string(value: str, flexible: bool = False) -> bytes:
    data = value.encode("utf-8")
    if len(data) > MAX_INT16:
        raise ValueError(f"string of {len(data)} bytes is longer than Kafka's int16 limit")
    return (_uvarint(len(data) + 1) if flexible else _INT16.pack(len(data))) + data


def _count(n: int, flexible: bool) -> bytes:
    """An array's length; -1 is null."""
    return _uvarint(n + 1) if flexible else _INT32.pack(n)


def _partitions(partitions: tuple[PartitionsSchema, ...] | None, flexible: bool) -> bytes:
    if partitions is None:
        return _count(-1, flexible)
    out = [_count(len(partitions), flexible)]
    for schema in partitions:
        out.append(_string(schema.topic, flexible))
        out.append(_count(len(schema.partition_ids), flexible))
        out.append(struct.pack(f">{len(schema.partition_ids)}i", *schema.partition_ids))
        if flexible:
            out.append(_uvarint(0))  # no tagged fields in PartitionsSchema
    return b"".join(out)


def _value_tags(value: TransactionLogValue) -> bytes:
    fields = []
    if value.previous_producer_id != -1:
        fields.append((_TAG_PREVIOUS_PRODUCER_ID, struct.pack(">q", value.previous_producer_id)))
    if value.next_producer_id != -1:
        fields.append((_TAG_NEXT_PRODUCER_ID, struct.pack(">q", value.next_producer_id)))
    if value.client_transaction_version != 0:
        tv = _INT16.pack(value.client_transaction_version)
        fields.append((_TAG_CLIENT_TRANSACTION_VERSION, tv))
    out = [_uvarint(len(fields))]
    for tag, data in fields:
        out += [_uvarint(tag), _uvarint(len(data)), data]
    return b"".join(out)


class _Reader:
    """Reads Kafka's primitives from `data`; every shortfall is a CorruptRecordError."""

    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.position = 0

    def take(self, size: int) -> bytes:
        end = self.position + size
        if size < 0 or end > len(self.data):
            raise CorruptRecordError(f"record ends before byte {end} ({len(self.data)} bytes)")
        chunk = bytes(self.data[self.position : end])
        self.position = end
        return chunk

    def _fixed(self, fmt: str, size: int) -> int:
        return struct.unpack(fmt, self.take(size))[0]

    def int8(self) -> int:
        return self._fixed(">b", 1)

    def int16(self) -> int:
        return self._fixed(">h", 2)

    def int32(self) -> int:
        return self._fixed(">i", 4)

    def int64(self) -> int:
        return self._fixed(">q", 8)

    def uvarint(self) -> int:
        result = 0
        for shift in range(0, 35, 7):
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
        raise CorruptRecordError("unsigned varint longer than 5 bytes")

    def count(self, flexible: bool) -> int:
        """An array's or string's length, -1 for null."""
        n = self.uvarint() - 1 if flexible else self.int32()
        if n < -1:
            raise CorruptRecordError(f"negative length {n}")
        return n

    def string(self, flexible: bool = False) -> str:
        n = self.uvarint() - 1 if flexible else self.int16()
        if n < 0:
            raise CorruptRecordError("null or negative length for a non-nullable string")
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"string is not UTF-8: {exc}") from exc

    def end(self) -> None:
        if self.position != len(self.data):
            raise CorruptRecordError(f"{len(self.data) - self.position} bytes after the record")


def _read_partitions(reader: _Reader, flexible: bool) -> tuple[PartitionsSchema, ...] | None:
    count = reader.count(flexible)
    if count == -1:
        return None
    schemas = []
    for _ in range(count):
        topic = reader.string(flexible)
        ids = reader.count(flexible)
        if ids == -1:
            raise CorruptRecordError("null partition_ids")
        partition_ids = struct.unpack(f">{ids}i", reader.take(4 * ids))
        if flexible:
            _read_tags(reader)  # none defined; unknown ones are skipped, as Kafka does
        schemas.append(PartitionsSchema(topic, partition_ids))
    return tuple(schemas)


def _read_tags(reader: _Reader) -> dict[int, bytes]:
    tags: dict[int, bytes] = {}
    for _ in range(reader.uvarint()):
        tag = reader.uvarint()
        tags[tag] = reader.take(reader.uvarint())
    return tags


def _tag_int(tags: dict[int, bytes], tag: int, size: int, default: int) -> int:
    data = tags.get(tag)
    if data is None:
        return default
    if len(data) != size:
        raise CorruptRecordError(f"tagged field {tag} has {len(data)} bytes, not {size}")
    return int.from_bytes(data, "big", signed=True)
