"""The metadata record layout as first written with the `construct` library: the reference the
hand-written codec in quorum/records.py is checked against byte for byte (that codec replaced
this one for speed; see its comment). PartitionRecord and PartitionChangeRecord have a version 1
that appends KIP-966's elr and last_known_elr and a version 2 that appends a reassignment's
adding and removing replicas, and a version 3 that appends the id of the CreatePartitions request
that added the partition; RemoveTopicRecord has a version 1 that appends the id of the
DeleteTopics request that removed the topic. Older versions (without them) still decode."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import construct as c

from quorum.records import (
    MAX_LIST_ITEMS,
    RECORD_TYPES,
    AccessControlEntryRecord,
    ActiveControllerRecord,
    BrokerEndpoint,
    BrokerRegistrationOffsetRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialsRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialsRecord,
)


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
    BrokerEndpoint, c.Struct("name" / _String, "host" / _String, "port" / c.Int32ub)
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
    UserScramCredentialsRecord: c.Struct(
        "name" / _String,
        "mechanism" / c.Int8sb,
        "salt" / c.Prefixed(c.Int16ub, c.GreedyBytes),
        "stored_key" / c.Prefixed(c.Int16ub, c.GreedyBytes),
        "server_key" / c.Prefixed(c.Int16ub, c.GreedyBytes),
        "iterations" / _Int32s,
    ),
    RemoveUserScramCredentialsRecord: c.Struct("name" / _String, "mechanism" / c.Int8sb),
    AccessControlEntryRecord: c.Struct(
        "id" / _Uuid,
        "resource_type" / c.Int8sb,
        "resource_name" / _String,
        "pattern_type" / c.Int8sb,
        "principal" / _String,
        "host" / _String,
        "operation" / c.Int8sb,
        "permission_type" / c.Int8sb,
    ),
    RemoveAccessControlEntryRecord: c.Struct("id" / _Uuid),
    RegisterControllerRecord: c.Struct(
        "controller_id" / _Int32s,
        "raft_host" / _String,
        "raft_port" / _Int32s,
        "controller_host" / _String,
        "controller_port" / _Int32s,
    ),
    FeatureLevelRecord: c.Struct("name" / _String, "feature_level" / c.Int16sb),
}

# Version 1 (KIP-966): version 0's fields, then the eligible leader replicas.
_PAYLOADS_V1: dict[type, c.Construct] = {
    PartitionRecord: c.Struct(
        *_PAYLOADS[PartitionRecord].subcons,
        "elr" / _list(_Int32s),
        "last_known_elr" / _list(_Int32s),
    ),
    PartitionChangeRecord: c.Struct(
        *_PAYLOADS[PartitionChangeRecord].subcons,
        "elr" / _OptionalAdapter(_list(_Int32s)),
        "last_known_elr" / _OptionalAdapter(_list(_Int32s)),
    ),
}


# Version 2 (reassignment): version 1's fields, then the replicas being added and removed.
_PAYLOADS_V2: dict[type, c.Construct] = {
    PartitionRecord: c.Struct(
        *_PAYLOADS_V1[PartitionRecord].subcons,
        "adding_replicas" / _list(_Int32s),
        "removing_replicas" / _list(_Int32s),
    ),
    PartitionChangeRecord: c.Struct(
        *_PAYLOADS_V1[PartitionChangeRecord].subcons,
        "adding_replicas" / _OptionalAdapter(_list(_Int32s)),
        "removing_replicas" / _OptionalAdapter(_list(_Int32s)),
    ),
}


# Version 3 of PartitionRecord and version 1 of RemoveTopicRecord: then the id of the forwarded
# request that added the partition / removed the topic.
_VERSIONS: dict[type, tuple[c.Construct, ...]] = {
    cls: (struct,) for cls, struct in _PAYLOADS.items()
} | {
    PartitionRecord: (
        _PAYLOADS[PartitionRecord],
        _PAYLOADS_V1[PartitionRecord],
        _PAYLOADS_V2[PartitionRecord],
        c.Struct(*_PAYLOADS_V2[PartitionRecord].subcons, "request_id" / _OptionalAdapter(_Uuid)),
    ),
    PartitionChangeRecord: tuple(
        p[PartitionChangeRecord] for p in (_PAYLOADS, _PAYLOADS_V1, _PAYLOADS_V2)
    ),
    RemoveTopicRecord: (
        _PAYLOADS[RemoveTopicRecord],
        c.Struct(*_PAYLOADS[RemoveTopicRecord].subcons, "request_id" / _OptionalAdapter(_Uuid)),
    ),
}


class _DataclassDefaultsAdapter(_DataclassAdapter):
    """An older version: the fields it does not carry take their defaults."""

    def _decode(self, obj: Any, context: Any, path: Any) -> Any:
        return self._cls(
            **{f.name: obj[f.name] for f in dataclasses.fields(self._cls) if f.name in obj}
        )


def _codec(cls: type, struct: c.Construct) -> c.Construct:
    return c.FocusedSeq("record", "record" / _DataclassDefaultsAdapter(cls, struct), c.Terminated)


_CODECS: dict[tuple[type, int], c.Construct] = {
    (cls, version): _codec(cls, struct)
    for cls, structs in _VERSIONS.items()
    for version, struct in enumerate(structs)
}


def _version(record: Any) -> int:
    if isinstance(record, PartitionRecord):
        if record.request_id is not None:
            return 3
        if record.adding_replicas or record.removing_replicas:
            return 2
        return 1 if record.elr or record.last_known_elr else 0
    if isinstance(record, PartitionChangeRecord):
        if record.adding_replicas is not None or record.removing_replicas is not None:
            return 2
        return 0 if record.elr is None and record.last_known_elr is None else 1
    if isinstance(record, RemoveTopicRecord):
        return 0 if record.request_id is None else 1
    return 0


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


_TYPE_OF = {cls: type_id for type_id, (cls, _) in RECORD_TYPES.items()}


def reference_encode_record(record: Any) -> bytes:
    type_id = _TYPE_OF[type(record)]
    version = _version(record)
    payload = _CODECS[type(record), version].build(record)
    return _RecordFrame.build(
        {"record_type": type_id, "record_version": version, "payload": payload}
    )


def reference_decode_records(data: bytes) -> tuple:
    parsed = _RecordList.parse(data)
    return tuple(
        _CODECS[RECORD_TYPES[f.record_type][0], f.record_version].parse(f.payload)
        for f in parsed.records
    )
