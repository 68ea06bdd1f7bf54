"""Metadata records and the metadata batch: the only things the metadata log carries.

The active controller turns a request into a list of records, wraps them in one *batch* (one Raft
entry, applied all-or-nothing) and proposes the encoded bytes; every controller and broker replays
committed batches in order into a `MetadataImage` (see image.py). The frozen dataclasses below are
the public types; the `construct` definitions stay inside this module.

Batch layout (all integers big-endian)::

    offset  size  field
         0     1  version (= 1)          \\ not covered by the CRC: read first to pick the layout
         1     4  crc                    / CRC-32C of bytes 5 .. end
         5     4  controller_epoch       the proposer's controller epoch (the Raft term)
         9     8  proposal_id            chosen by the proposer, echoed in the apply result
        17     4  record_count           at most MAX_RECORDS_PER_BATCH
        21        records...

Record layout::

         0     1  record_type            see RECORD_TYPES
         1     1  record_version         (= 0 for every record so far)
         2     4  payload_length         bytes of payload
         6     n  payload                the record's own construct Struct, fields in order

Payload field encodings: int8/16/32/64 signed; str = uint16 length + UTF-8 (<= 65535 bytes);
uuid = 16 raw bytes; list = int32 count + items (<= MAX_LIST_ITEMS); optional = 1 flag byte
(0 absent / 1 present) then the value when present.

The CRC covers the whole batch after itself, so a torn or flipped byte is caught before any record
is looked at. Garbage of any kind decodes to `MetadataRecordError`, never an untyped exception.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from typing import Any

import construct as c
import crc32c

from log.protocol.errors import CorruptRecordError, ErrorCode

BATCH_VERSION = 1
MAX_BATCH_BYTES = 8 * 1024 * 1024  # a metadata batch is a handful of records; bound it anyway
MAX_RECORDS_PER_BATCH = 100_000  # a create of many partitions still fits
MAX_LIST_ITEMS = 100_000
NO_LEADER = -1

# Kafka's ConfigResource.Type codes.
CONFIG_RESOURCE_TOPIC = 2
CONFIG_RESOURCE_BROKER = 4


class MetadataRecordError(CorruptRecordError):
    """A metadata batch or record that cannot be encoded or decoded (CORRUPT_MESSAGE)."""

    error_code = ErrorCode.CORRUPT_MESSAGE


# -- public record types --------------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    name: str  # listener name, e.g. "PLAINTEXT"
    host: str
    port: int


@dataclass(frozen=True)
class RegisterBrokerRecord:
    broker_id: int
    broker_epoch: int
    incarnation_id: uuid.UUID
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    fenced: bool = True


@dataclass(frozen=True)
class UnregisterBrokerRecord:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class FenceBrokerRecord:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class UnfenceBrokerRecord:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class TopicRecord:
    name: str
    topic_id: uuid.UUID


@dataclass(frozen=True)
class PartitionRecord:
    topic_id: uuid.UUID
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0


@dataclass(frozen=True)
class PartitionChangeRecord:
    """A delta to one partition. It carries the NEW epochs explicitly so replay is a pure check:
    partition_epoch must be the current one + 1; leader_epoch must be the current one + 1 when the
    leader changes and unchanged otherwise. None means "unchanged"."""

    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    partition_epoch: int
    leader: int | None = None
    isr: tuple[int, ...] | None = None
    replicas: tuple[int, ...] | None = None


@dataclass(frozen=True)
class RemoveTopicRecord:
    topic_id: uuid.UUID


@dataclass(frozen=True)
class ConfigRecord:
    resource_type: int  # CONFIG_RESOURCE_TOPIC / CONFIG_RESOURCE_BROKER
    resource_name: str  # topic name; broker id as a string, or "" for the cluster default
    key: str
    value: str | None  # None deletes the key


@dataclass(frozen=True)
class ProducerIdsRecord:
    broker_id: int
    broker_epoch: int
    next_producer_id: int  # first id of the NEXT block; strictly increases on replay


@dataclass(frozen=True)
class ActiveControllerRecord:
    """Committed first by a new active controller: from this batch on, only batches proposed with
    this controller_epoch are applied; older in-flight proposals are rejected on replay."""

    controller_id: int
    controller_epoch: int


@dataclass(frozen=True)
class NoOpRecord:
    """A barrier: proposing it and waiting for its apply gives a linearizable read point."""


@dataclass(frozen=True)
class BrokerRegistrationOffsetRecord:
    """Checkpoint-only: the metadata offset a broker's registration was applied at (a broker is
    'caught up' once its metadata offset reaches it). Rejected inside a live batch."""

    broker_id: int
    registered_offset: int


MetadataRecord = (
    RegisterBrokerRecord
    | UnregisterBrokerRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | TopicRecord
    | PartitionRecord
    | PartitionChangeRecord
    | RemoveTopicRecord
    | ConfigRecord
    | ProducerIdsRecord
    | ActiveControllerRecord
    | NoOpRecord
    | BrokerRegistrationOffsetRecord
)


@dataclass(frozen=True)
class MetadataBatch:
    controller_epoch: int
    proposal_id: int
    records: tuple[MetadataRecord, ...]


# -- construct definitions (private) --------------------------------------------------------------


class _DataclassAdapter(c.Adapter):
    """Container <-> frozen dataclass; lists become tuples, so no construct type leaks out."""

    def __init__(self, cls: type, subcon: c.Construct) -> None:
        super().__init__(subcon)
        self._cls = cls

    def _decode(self, obj: Any, context: Any, path: Any) -> Any:
        return self._cls(**{f.name: obj[f.name] for f in dataclasses.fields(self._cls)})

    def _encode(self, obj: Any, context: Any, path: Any) -> Any:
        if not isinstance(obj, self._cls):
            raise c.ConstructError(f"expected {self._cls.__name__}, got {type(obj).__name__}")
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(self._cls)}


class _TupleAdapter(c.Adapter):
    def _decode(self, obj: Any, context: Any, path: Any) -> Any:
        return tuple(obj)

    def _encode(self, obj: Any, context: Any, path: Any) -> Any:
        if len(obj) > MAX_LIST_ITEMS:
            raise c.ConstructError("list too long")
        return list(obj)


class _OptionalAdapter(c.Adapter):
    def __init__(self, subcon: c.Construct) -> None:
        super().__init__(c.Struct("present" / c.Flag, "value" / c.If(c.this.present, subcon)))

    def _decode(self, obj: Any, context: Any, path: Any) -> Any:
        return obj.value if obj.present else None

    def _encode(self, obj: Any, context: Any, path: Any) -> Any:
        return {"present": obj is not None, "value": obj}


class _UuidAdapter(c.Adapter):
    def _decode(self, obj: Any, context: Any, path: Any) -> Any:
        return uuid.UUID(bytes=bytes(obj))

    def _encode(self, obj: Any, context: Any, path: Any) -> Any:
        return obj.bytes


def _list(subcon: c.Construct) -> c.Construct:
    count = c.ExprValidator(c.Int32ub, lambda n, ctx: n <= MAX_LIST_ITEMS)
    return _TupleAdapter(c.PrefixedArray(count, subcon))


_String = c.PascalString(c.Int16ub, "utf8")
_Uuid = _UuidAdapter(c.Bytes(16))
_Int32s = c.Int32sb
_Int64s = c.Int64sb

_Endpoint = _DataclassAdapter(
    Endpoint, c.Struct("name" / _String, "host" / _String, "port" / c.Int32ub)
)

_PAYLOADS: dict[type, c.Construct] = {
    RegisterBrokerRecord: c.Struct(
        "broker_id" / _Int32s,
        "broker_epoch" / _Int64s,
        "incarnation_id" / _Uuid,
        "endpoints" / _list(_Endpoint),
        "rack" / _OptionalAdapter(_String),
        "fenced" / c.Flag,
    ),
    UnregisterBrokerRecord: c.Struct("broker_id" / _Int32s, "broker_epoch" / _Int64s),
    FenceBrokerRecord: c.Struct("broker_id" / _Int32s, "broker_epoch" / _Int64s),
    UnfenceBrokerRecord: c.Struct("broker_id" / _Int32s, "broker_epoch" / _Int64s),
    TopicRecord: c.Struct("name" / _String, "topic_id" / _Uuid),
    PartitionRecord: c.Struct(
        "topic_id" / _Uuid,
        "partition" / _Int32s,
        "replicas" / _list(_Int32s),
        "isr" / _list(_Int32s),
        "leader" / _Int32s,
        "leader_epoch" / _Int32s,
        "partition_epoch" / _Int32s,
    ),
    PartitionChangeRecord: c.Struct(
        "topic_id" / _Uuid,
        "partition" / _Int32s,
        "leader_epoch" / _Int32s,
        "partition_epoch" / _Int32s,
        "leader" / _OptionalAdapter(_Int32s),
        "isr" / _OptionalAdapter(_list(_Int32s)),
        "replicas" / _OptionalAdapter(_list(_Int32s)),
    ),
    RemoveTopicRecord: c.Struct("topic_id" / _Uuid),
    ConfigRecord: c.Struct(
        "resource_type" / c.Int8sb,
        "resource_name" / _String,
        "key" / _String,
        "value" / _OptionalAdapter(_String),
    ),
    ProducerIdsRecord: c.Struct(
        "broker_id" / _Int32s, "broker_epoch" / _Int64s, "next_producer_id" / _Int64s
    ),
    ActiveControllerRecord: c.Struct("controller_id" / _Int32s, "controller_epoch" / _Int32s),
    NoOpRecord: c.Struct(),
    BrokerRegistrationOffsetRecord: c.Struct("broker_id" / _Int32s, "registered_offset" / _Int64s),
}

# record_type byte -> (dataclass, record_version). Type numbers are forever: append, never reuse.
RECORD_TYPES: dict[int, tuple[type, int]] = {
    1: (RegisterBrokerRecord, 0),
    2: (UnregisterBrokerRecord, 0),
    3: (FenceBrokerRecord, 0),
    4: (UnfenceBrokerRecord, 0),
    5: (TopicRecord, 0),
    6: (PartitionRecord, 0),
    7: (PartitionChangeRecord, 0),
    8: (RemoveTopicRecord, 0),
    9: (ConfigRecord, 0),
    10: (ProducerIdsRecord, 0),
    11: (ActiveControllerRecord, 0),
    12: (NoOpRecord, 0),
    13: (BrokerRegistrationOffsetRecord, 0),
}
_TYPE_OF: dict[type, int] = {cls: type_id for type_id, (cls, _) in RECORD_TYPES.items()}
_CODECS: dict[type, c.Construct] = {
    cls: c.FocusedSeq("record", "record" / _DataclassAdapter(cls, struct), c.Terminated)
    for cls, struct in _PAYLOADS.items()
}

_RecordFrame = c.Struct(
    "record_type" / c.Int8ub,
    "record_version" / c.Int8ub,
    "payload" / c.Prefixed(c.Int32ub, c.GreedyBytes),
)
_BatchBody = c.Struct(
    "controller_epoch" / c.Int32sb,
    "proposal_id" / c.Int64sb,
    "records" / c.PrefixedArray(c.Int32ub, _RecordFrame),
    c.Terminated,
)
_RecordList = c.Struct("records" / c.PrefixedArray(c.Int32ub, _RecordFrame), c.Terminated)


# -- public functions -----------------------------------------------------------------------------


def encode_record(record: MetadataRecord) -> bytes:
    """One record frame (type, version, length, payload)."""
    type_id = _TYPE_OF.get(type(record))
    if type_id is None:
        raise MetadataRecordError(f"not a metadata record: {type(record).__name__}")
    try:
        payload = _CODECS[type(record)].build(record)
        return _RecordFrame.build(
            {"record_type": type_id, "record_version": RECORD_TYPES[type_id][1], "payload": payload}
        )
    except Exception as e:  # construct raises many kinds on bad values
        raise MetadataRecordError(f"cannot encode {type(record).__name__}: {e}") from e


def _decode_frame(frame: Any) -> MetadataRecord:
    entry = RECORD_TYPES.get(frame.record_type)
    if entry is None:
        raise MetadataRecordError(f"unknown record type {frame.record_type}")
    cls, version = entry
    if frame.record_version != version:
        raise MetadataRecordError(f"unknown {cls.__name__} version {frame.record_version}")
    return _CODECS[cls].parse(frame.payload)


def encode_records(records: tuple[MetadataRecord, ...] | list[MetadataRecord]) -> bytes:
    """A count-prefixed list of record frames (the checkpoint body)."""
    frames = [encode_record(r) for r in records]
    return len(frames).to_bytes(4, "big") + b"".join(frames)


def decode_records(data: bytes) -> tuple[MetadataRecord, ...]:
    try:
        parsed = _RecordList.parse(data)
        return tuple(_decode_frame(f) for f in parsed.records)
    except MetadataRecordError:
        raise
    except Exception as e:  # any construct/UTF-8/value failure is corrupt input
        raise MetadataRecordError(f"undecodable record list: {e}") from e


def encode_batch(
    records: tuple[MetadataRecord, ...] | list[MetadataRecord],
    controller_epoch: int,
    proposal_id: int,
) -> bytes:
    """The bytes a controller proposes to the Raft log (one Raft entry)."""
    if len(records) > MAX_RECORDS_PER_BATCH:
        raise MetadataRecordError(f"{len(records)} records exceed {MAX_RECORDS_PER_BATCH}")
    try:
        head = _BatchBody.build(
            {"controller_epoch": controller_epoch, "proposal_id": proposal_id, "records": []}
        )
    except Exception as e:
        raise MetadataRecordError(f"cannot encode batch header: {e}") from e
    body = head[:12] + encode_records(records)
    if len(body) + 5 > MAX_BATCH_BYTES:
        raise MetadataRecordError(f"batch of {len(body) + 5} bytes exceeds {MAX_BATCH_BYTES}")
    return bytes([BATCH_VERSION]) + crc32c.crc32c(body).to_bytes(4, "big") + body


def decode_batch(data: bytes) -> MetadataBatch:
    """Parse and verify a batch; any defect raises MetadataRecordError."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise MetadataRecordError(f"batch must be bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) < 5:
        raise MetadataRecordError(f"batch of {len(data)} bytes is shorter than its header")
    if len(data) > MAX_BATCH_BYTES:
        raise MetadataRecordError(f"batch of {len(data)} bytes exceeds {MAX_BATCH_BYTES}")
    if data[0] != BATCH_VERSION:
        raise MetadataRecordError(f"unknown batch version {data[0]}")
    body = data[5:]
    if crc32c.crc32c(body) != int.from_bytes(data[1:5], "big"):
        raise MetadataRecordError("batch CRC mismatch")
    try:
        parsed = _BatchBody.parse(body)
        if len(parsed.records) > MAX_RECORDS_PER_BATCH:
            raise MetadataRecordError("too many records in batch")
        records = tuple(_decode_frame(f) for f in parsed.records)
    except MetadataRecordError:
        raise
    except Exception as e:
        raise MetadataRecordError(f"undecodable batch: {e}") from e
    return MetadataBatch(parsed.controller_epoch, parsed.proposal_id, records)
