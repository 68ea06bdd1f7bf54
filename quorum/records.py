"""Metadata records and the metadata batch: the only things the metadata log carries.

The active controller turns a request into a list of records, wraps them in one *batch* (one Raft
entry, applied all-or-nothing) and proposes the encoded bytes; every controller and broker replays
committed batches in order into a `MetadataImage` (see image.py). The frozen dataclasses below are
the public types; the codec stays inside this module.

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
         1     1  record_version         see RECORD_VERSIONS: a newer version appends fields
         2     4  payload_length         bytes of payload
         6     n  payload                the record's fields, in the dataclass's order

Payload field encodings: int8/16/32/64 signed; str = uint16 length + UTF-8 (<= 65535 bytes);
uuid = 16 raw bytes; list = int32 count + items (<= MAX_LIST_ITEMS); optional = 1 flag byte
(0 absent / 1 present) then the value when present.

Versions. A record that gains fields gets a new record_version whose payload is the old one's
followed by the new fields (RECORD_VERSIONS lists each version's field count). A record is
encoded at the lowest version that can carry it (new fields at their defaults: the old bytes,
so existing journals and checkpoints re-encode identically) and every version decodes, the
fields it lacks taking their defaults.

The CRC covers the whole batch after itself, so a torn or flipped byte is caught before any record
is looked at. Garbage of any kind decodes to `MetadataRecordError`, never an untyped exception.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import crc32c

from log.common.errors import CorruptRecordError, ErrorCode

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
class BrokerEndpoint:
    name: str  # listener name, e.g. "PLAINTEXT"
    host: str
    port: int


@dataclass(frozen=True)
class RegisterBrokerRecord:
    broker_id: int
    broker_epoch: int
    incarnation_id: uuid.UUID
    endpoints: tuple[BrokerEndpoint, ...]
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
    # KIP-966 (version 1): replicas that left the ISR while it was below min.insync.replicas and
    # still hold every acknowledged record; the last leader once the ISR became empty.
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    # Version 2 (KIP-455 reassignment): replicas being added (not yet in sync) and removed;
    # both are among `replicas` while a reassignment runs.
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    # Version 3: the broker-drawn id of the forwarded CreatePartitions request that added this
    # partition, on the last partition of its increase only: a retry of that request knows by
    # it that its first attempt was applied (quorum/controller.py create_partitions).
    request_id: uuid.UUID | None = None


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
    elr: tuple[int, ...] | None = None  # version 1 (KIP-966)
    last_known_elr: tuple[int, ...] | None = None  # version 1 (KIP-966)
    adding_replicas: tuple[int, ...] | None = None  # version 2 (reassignment)
    removing_replicas: tuple[int, ...] | None = None  # version 2 (reassignment)


@dataclass(frozen=True)
class RemoveTopicRecord:
    topic_id: uuid.UUID
    # Version 1: the broker-drawn id of the forwarded DeleteTopics request that removed it; the
    # image remembers the newest such deletions so a retry of the request knows its first
    # attempt was applied (quorum/controller.py delete_topics).
    request_id: uuid.UUID | None = None


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
class RegisterControllerRecord:
    """Where a controller listens (KIP-853's voter endpoints): its Raft address, which is its
    identity in the quorum's voter set, and its CONTROLLER listener, which brokers and tools
    call. Committed by `metadata-quorum add-controller` before the voter is added, so every
    broker can find a controller its own configuration never named. A later registration of
    the same id replaces the earlier one."""

    controller_id: int
    raft_host: str
    raft_port: int
    controller_host: str
    controller_port: int


@dataclass(frozen=True)
class NoOpRecord:
    """A barrier: proposing it and waiting for its apply gives a linearizable read point."""


@dataclass(frozen=True)
class BrokerRegistrationOffsetRecord:
    """Checkpoint-only: the metadata offset a broker's registration was applied at (a broker is
    'caught up' once its metadata offset reaches it). Rejected inside a live batch."""

    broker_id: int
    registered_offset: int


@dataclass(frozen=True)
class UserScramCredentialsRecord:
    """A user's SCRAM credential for one mechanism (Kafka's UserScramCredentialsRecord): what a
    server needs to check a SCRAM login, never the password. mechanism: 1 = SCRAM-SHA-256,
    2 = SCRAM-SHA-512 (Kafka's ScramMechanism type)."""

    name: str
    mechanism: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True)
class RemoveUserScramCredentialsRecord:
    name: str
    mechanism: int


@dataclass(frozen=True)
class AccessControlEntryRecord:
    """One ACL binding (Kafka's AccessControlEntryRecord), named by its id; the codes are
    log/common/acl.py's (Kafka's): resource_type, pattern_type, operation, permission_type."""

    id: uuid.UUID
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True)
class RemoveAccessControlEntryRecord:
    id: uuid.UUID


@dataclass(frozen=True)
class FeatureLevelRecord:
    """A finalized feature's level (Kafka's FeatureLevelRecord, e.g. transaction.version = 2):
    what every broker answers in ApiVersions' finalized_features and acts on. Level 0 removes
    the feature (Kafka's meaning: not finalized, its oldest behaviour)."""

    name: str
    feature_level: int


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
    | UserScramCredentialsRecord
    | RemoveUserScramCredentialsRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
    | RegisterControllerRecord
    | FeatureLevelRecord
)


@dataclass(frozen=True)
class MetadataBatch:
    controller_epoch: int
    proposal_id: int
    records: tuple[MetadataRecord, ...]


# -- the codec (private) ----------------------------------------------------------------------------
#
# Hand-written over `struct` rather than the `construct` library it was first written with: a
# broker starting on a checkpoint of 200,000 records spent ~9 s in construct's parser (87 % of
# its start, bench.restart); this reads the same bytes ~20x faster. The layout is unchanged
# (tests/quorum_core/records_reference.py keeps the construct definition, and the tests check
# both agree byte for byte).

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_FRAME_HEAD = struct.Struct(">BBI")  # record_type, record_version, payload_length
_BATCH_HEAD = struct.Struct(">iqI")  # controller_epoch, proposal_id, record_count

Reader = Callable[[bytes, int], tuple[Any, int]]
Writer = Callable[[Any, list], None]


def _fixed(fmt: struct.Struct) -> tuple[Reader, Writer]:
    unpack_from, pack, size = fmt.unpack_from, fmt.pack, fmt.size

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        return unpack_from(buf, pos)[0], pos + size

    def write(value: Any, out: list) -> None:
        out.append(pack(value))

    return read, write


def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    (length,) = _U16.unpack_from(buf, pos)
    end = pos + 2 + length
    if end > len(buf):
        raise MetadataRecordError("string runs past the end of its record")
    return buf[pos + 2 : end].decode("utf-8"), end


def _write_string(value: str, out: list) -> None:
    data = value.encode("utf-8")
    out.append(_U16.pack(len(data)))
    out.append(data)


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes, int]:
    (length,) = _U16.unpack_from(buf, pos)
    end = pos + 2 + length
    if end > len(buf):
        raise MetadataRecordError("bytes run past the end of their record")
    return bytes(buf[pos + 2 : end]), end


def _write_bytes(value: bytes, out: list) -> None:
    if len(value) > 0xFFFF:
        raise MetadataRecordError("bytes field too long")
    out.append(_U16.pack(len(value)))
    out.append(bytes(value))


def _read_uuid(buf: bytes, pos: int) -> tuple[uuid.UUID, int]:
    end = pos + 16
    if end > len(buf):
        raise MetadataRecordError("uuid runs past the end of its record")
    return uuid.UUID(bytes=buf[pos:end]), end


def _write_uuid(value: uuid.UUID, out: list) -> None:
    out.append(value.bytes)


def _read_flag(buf: bytes, pos: int) -> tuple[bool, int]:
    if pos >= len(buf):
        raise MetadataRecordError("flag runs past the end of its record")
    return buf[pos] != 0, pos + 1


def _write_flag(value: bool, out: list) -> None:
    out.append(b"\x01" if value else b"\x00")


def _count(buf: bytes, pos: int, min_item_bytes: int) -> tuple[int, int]:
    (count,) = _U32.unpack_from(buf, pos)
    pos += 4
    if count > MAX_LIST_ITEMS or count * min_item_bytes > len(buf) - pos:
        raise MetadataRecordError(f"a list of {count} items cannot fit its record")
    return count, pos


def _write_count(items: Any, out: list) -> None:
    if len(items) > MAX_LIST_ITEMS:
        raise MetadataRecordError("list too long")
    out.append(_U32.pack(len(items)))


def _read_int32s(buf: bytes, pos: int) -> tuple[tuple[int, ...], int]:
    count, pos = _count(buf, pos, 4)
    end = pos + 4 * count
    return struct.unpack_from(f">{count}i", buf, pos), end


def _write_int32s(values: Any, out: list) -> None:
    _write_count(values, out)
    out.append(struct.pack(f">{len(values)}i", *values))


def _read_endpoints(buf: bytes, pos: int) -> tuple[tuple[BrokerEndpoint, ...], int]:
    count, pos = _count(buf, pos, 8)
    endpoints = []
    for _ in range(count):
        name, pos = _read_string(buf, pos)
        host, pos = _read_string(buf, pos)
        (port,) = _U32.unpack_from(buf, pos)
        endpoints.append(BrokerEndpoint(name, host, port))
        pos += 4
    return tuple(endpoints), pos


def _write_endpoints(values: Any, out: list) -> None:
    _write_count(values, out)
    for endpoint in values:
        _write_string(endpoint.name, out)
        _write_string(endpoint.host, out)
        out.append(_U32.pack(endpoint.port))


def _optional(codec: tuple[Reader, Writer]) -> tuple[Reader, Writer]:
    read_value, write_value = codec

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        present, pos = _read_flag(buf, pos)
        return read_value(buf, pos) if present else (None, pos)

    def write(value: Any, out: list) -> None:
        if value is None:
            out.append(b"\x00")
        else:
            out.append(b"\x01")
            write_value(value, out)

    return read, write


_INT8, _INT16, _INT32, _INT64 = _fixed(_I8), _fixed(_I16), _fixed(_I32), _fixed(_I64)
_STRING = (_read_string, _write_string)
_BYTES = (_read_bytes, _write_bytes)
_UUID = (_read_uuid, _write_uuid)
_FLAG = (_read_flag, _write_flag)
_INT32S = (_read_int32s, _write_int32s)
_ENDPOINTS = (_read_endpoints, _write_endpoints)

# Each record's payload: its fields in declaration order (the dataclass's own order).
_PAYLOADS: dict[type, tuple[tuple[Reader, Writer], ...]] = {
    RegisterBrokerRecord: (_INT32, _INT64, _UUID, _ENDPOINTS, _optional(_STRING), _FLAG),
    UnregisterBrokerRecord: (_INT32, _INT64),
    FenceBrokerRecord: (_INT32, _INT64),
    UnfenceBrokerRecord: (_INT32, _INT64),
    TopicRecord: (_STRING, _UUID),
    PartitionRecord: (
        _UUID,
        _INT32,
        _INT32S,
        _INT32S,
        _INT32,
        _INT32,
        _INT32,
        _INT32S,
        _INT32S,
        _INT32S,
        _INT32S,
        _optional(_UUID),
    ),
    PartitionChangeRecord: (
        _UUID,
        _INT32,
        _INT32,
        _INT32,
        _optional(_INT32),
        _optional(_INT32S),
        _optional(_INT32S),
        _optional(_INT32S),
        _optional(_INT32S),
        _optional(_INT32S),
        _optional(_INT32S),
    ),  # fmt: skip
    RemoveTopicRecord: (_UUID, _optional(_UUID)),
    ConfigRecord: (_INT8, _STRING, _STRING, _optional(_STRING)),
    ProducerIdsRecord: (_INT32, _INT64, _INT64),
    ActiveControllerRecord: (_INT32, _INT32),
    NoOpRecord: (),
    BrokerRegistrationOffsetRecord: (_INT32, _INT64),
    UserScramCredentialsRecord: (_STRING, _INT8, _BYTES, _BYTES, _BYTES, _INT32),
    RemoveUserScramCredentialsRecord: (_STRING, _INT8),
    AccessControlEntryRecord: (_UUID, _INT8, _STRING, _INT8, _STRING, _STRING, _INT8, _INT8),
    RemoveAccessControlEntryRecord: (_UUID,),
    RegisterControllerRecord: (_INT32, _STRING, _INT32, _STRING, _INT32),
    FeatureLevelRecord: (_STRING, _INT16),
}

# record_type byte -> (dataclass, newest record_version). Type numbers are forever: append,
# never reuse.
RECORD_TYPES: dict[int, tuple[type, int]] = {
    1: (RegisterBrokerRecord, 0),
    2: (UnregisterBrokerRecord, 0),
    3: (FenceBrokerRecord, 0),
    4: (UnfenceBrokerRecord, 0),
    5: (TopicRecord, 0),
    6: (PartitionRecord, 3),
    7: (PartitionChangeRecord, 2),
    8: (RemoveTopicRecord, 1),
    9: (ConfigRecord, 0),
    10: (ProducerIdsRecord, 0),
    11: (ActiveControllerRecord, 0),
    12: (NoOpRecord, 0),
    13: (BrokerRegistrationOffsetRecord, 0),
    14: (UserScramCredentialsRecord, 0),
    15: (RemoveUserScramCredentialsRecord, 0),
    16: (AccessControlEntryRecord, 0),
    17: (RemoveAccessControlEntryRecord, 0),
    18: (RegisterControllerRecord, 0),
    19: (FeatureLevelRecord, 0),  # Kafka's type 12; ours is taken by NoOpRecord
}
_TYPE_OF: dict[type, int] = {cls: type_id for type_id, (cls, _) in RECORD_TYPES.items()}
_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in _PAYLOADS
}
# Payload field count of every version of every record (index = record_version).
RECORD_VERSIONS: dict[type, tuple[int, ...]] = {cls: (len(_FIELDS[cls]),) for cls in _PAYLOADS} | {
    PartitionRecord: (7, 9, 11, 12),
    PartitionChangeRecord: (7, 9, 11),
    RemoveTopicRecord: (1, 2),
}
_DEFAULTS: dict[type, tuple[Any, ...]] = {
    cls: tuple(f.default for f in dataclasses.fields(cls)) for cls in _PAYLOADS
}
# (record_type, record_version) -> (dataclass, readers of that version's fields)
_READERS: dict[tuple[int, int], tuple[type, tuple[Reader, ...]]] = {
    (type_id, version): (cls, tuple(r for r, _ in _PAYLOADS[cls][:field_count]))
    for type_id, (cls, _) in RECORD_TYPES.items()
    for version, field_count in enumerate(RECORD_VERSIONS[cls])
}
assert all(RECORD_TYPES[t][1] == len(RECORD_VERSIONS[c]) - 1 for t, (c, _) in RECORD_TYPES.items())


def record_version_of(record: MetadataRecord) -> int:
    """The lowest version that carries `record`: every field it lacks is at its default."""
    cls = type(record)
    counts = RECORD_VERSIONS[cls]
    defaults = _DEFAULTS[cls]
    for version, field_count in enumerate(counts[:-1]):
        names = _FIELDS[cls][field_count:]
        if all(getattr(record, n) == d for n, d in zip(names, defaults[field_count:], strict=True)):
            return version
    return len(counts) - 1


def _decode_frames(buf: bytes, pos: int, count: int) -> tuple[tuple[MetadataRecord, ...], int]:
    """`count` record frames from `pos`; the records and where they end."""
    records: list[MetadataRecord] = []
    append = records.append
    size = len(buf)
    for _ in range(count):
        if pos + 6 > size:
            raise MetadataRecordError("record frame runs past the end")
        type_id, version, length = _FRAME_HEAD.unpack_from(buf, pos)
        pos += 6
        end = pos + length
        if end > size:
            raise MetadataRecordError("record payload runs past the end")
        entry = _READERS.get((type_id, version))
        if entry is None:
            if type_id not in RECORD_TYPES:
                raise MetadataRecordError(f"unknown record type {type_id}")
            name = RECORD_TYPES[type_id][0].__name__
            raise MetadataRecordError(f"unknown {name} version {version}")
        cls, readers = entry
        payload = buf[pos:end]
        values = []
        at = 0
        for read in readers:
            value, at = read(payload, at)
            values.append(value)
        if at != length:
            raise MetadataRecordError(f"{cls.__name__}: {length - at} trailing payload bytes")
        append(cls(*values))
        pos = end
    return tuple(records), pos


def _decode(decode: Callable[[], Any]) -> Any:
    """Run a decode; any malformation is a MetadataRecordError, never an untyped exception."""
    try:
        return decode()
    except MetadataRecordError:
        raise
    except (struct.error, UnicodeDecodeError, ValueError, IndexError) as e:
        raise MetadataRecordError(f"undecodable metadata: {e}") from e


# -- public functions -----------------------------------------------------------------------------


def encode_record(record: MetadataRecord) -> bytes:
    """One record frame (type, version, length, payload)."""
    type_id = _TYPE_OF.get(type(record))
    if type_id is None:
        raise MetadataRecordError(f"not a metadata record: {type(record).__name__}")
    out: list = []
    try:
        version = record_version_of(record)
        field_count = RECORD_VERSIONS[type(record)][version]
        names = _FIELDS[type(record)][:field_count]
        for name, (_, write) in zip(names, _PAYLOADS[type(record)][:field_count], strict=True):
            write(getattr(record, name), out)
    except MetadataRecordError:
        raise
    except (struct.error, TypeError, AttributeError, UnicodeEncodeError) as e:
        raise MetadataRecordError(f"cannot encode {type(record).__name__}: {e}") from e
    payload = b"".join(out)
    return _FRAME_HEAD.pack(type_id, version, len(payload)) + payload


def encode_records(records: tuple[MetadataRecord, ...] | list[MetadataRecord]) -> bytes:
    """A count-prefixed list of record frames (the checkpoint body)."""
    frames = [encode_record(r) for r in records]
    return _U32.pack(len(frames)) + b"".join(frames)


def decode_records(data: bytes) -> tuple[MetadataRecord, ...]:
    def decode() -> tuple[MetadataRecord, ...]:
        buf = bytes(data)
        (count,) = _U32.unpack_from(buf, 0)
        if count * 6 > len(buf) - 4:
            raise MetadataRecordError(f"{count} records cannot fit {len(buf)} bytes")
        records, end = _decode_frames(buf, 4, count)
        if end != len(buf):
            raise MetadataRecordError(f"{len(buf) - end} bytes after the last record")
        return records

    return _decode(decode)


def encode_batch(
    records: tuple[MetadataRecord, ...] | list[MetadataRecord],
    controller_epoch: int,
    proposal_id: int,
) -> bytes:
    """The bytes a controller proposes to the Raft log (one Raft entry)."""
    if len(records) > MAX_RECORDS_PER_BATCH:
        raise MetadataRecordError(f"{len(records)} records exceed {MAX_RECORDS_PER_BATCH}")
    try:
        head = _BATCH_HEAD.pack(controller_epoch, proposal_id, len(records))
    except struct.error as e:
        raise MetadataRecordError(f"cannot encode batch header: {e}") from e
    body = head + b"".join(encode_record(r) for r in records)
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

    def decode() -> MetadataBatch:
        controller_epoch, proposal_id, count = _BATCH_HEAD.unpack_from(body, 0)
        if count > MAX_RECORDS_PER_BATCH or count * 6 > len(body) - _BATCH_HEAD.size:
            raise MetadataRecordError(f"{count} records in a batch of {len(body)} bytes")
        records, end = _decode_frames(body, _BATCH_HEAD.size, count)
        if end != len(body):
            raise MetadataRecordError(f"{len(body) - end} bytes after the last record")
        return MetadataBatch(controller_epoch, proposal_id, records)

    return _decode(decode)
