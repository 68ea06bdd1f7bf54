"""__consumer_offsets record keys and values, Kafka's layouts (construct, big-endian).

    OffsetCommitKey (key version 1)      GroupMetadataKey (key version 2)
      version    int16 = 1                 version  int16 = 2
      group      string (int16 length)     group    string
      topic      string
      partition  int32

    OffsetCommitValue (version 3)        GroupMetadataValue (version 3)
      version              int16 = 3       version                 int16 = 3
      offset               int64           protocol_type           string
      leader_epoch         int32           generation              int32
      metadata             string          protocol                nullable string (-1)
      commit_timestamp     int64           leader                  nullable string
                                           current_state_timestamp int64
                                           members                 int32 count, then each:
                                             member_id, group_instance_id (nullable),
                                             client_id, client_host: string;
                                             rebalance_timeout, session_timeout: int32;
                                             subscription, assignment: bytes (int32 length)

A null value is a tombstone (offset deleted / group deleted). The key's version tells the two
key kinds apart (0 and 1: offset commit; 2: group metadata), as in Kafka's GroupMetadataManager.
Values of versions we do not know are refused with CorruptRecordError, never guessed at.
"""

from __future__ import annotations

import dataclasses

import construct as c

from log.protocol.errors import CorruptRecordError

_STRING = c.PascalString(c.Int16sb, "utf-8")
_BYTES = c.Prefixed(c.Int32sb, c.GreedyBytes)

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3


class _NullableString(c.Construct):
    """Kafka's nullable string: int16 length, -1 for null."""

    def _parse(self, stream, context, path):  # noqa: ANN001, ANN202
        length = c.Int16sb._parsereport(stream, context, path)
        if length == -1:
            return None
        if length < 0:
            raise c.ExplicitError(f"negative string length {length}", path=path)
        return c.stream_read(stream, length, path).decode("utf-8")

    def _build(self, obj, stream, context, path):  # noqa: ANN001, ANN202
        if obj is None:
            c.Int16sb._build(-1, stream, context, path)
        else:
            data = obj.encode("utf-8")
            c.Int16sb._build(len(data), stream, context, path)
            c.stream_write(stream, data, len(data), path)
        return obj


_NULLABLE = _NullableString()

OFFSET_COMMIT_KEY = c.Struct("group" / _STRING, "topic" / _STRING, "partition" / c.Int32sb)
GROUP_METADATA_KEY = c.Struct("group" / _STRING)
OFFSET_COMMIT_VALUE = c.Struct(
    "offset" / c.Int64sb,
    "leader_epoch" / c.Int32sb,
    "metadata" / _STRING,
    "commit_timestamp" / c.Int64sb,
)
_MEMBER = c.Struct(
    "member_id" / _STRING,
    "group_instance_id" / _NULLABLE,
    "client_id" / _STRING,
    "client_host" / _STRING,
    "rebalance_timeout" / c.Int32sb,
    "session_timeout" / c.Int32sb,
    "subscription" / _BYTES,
    "assignment" / _BYTES,
)
GROUP_METADATA_VALUE = c.Struct(
    "protocol_type" / _STRING,
    "generation" / c.Int32sb,
    "protocol" / _NULLABLE,
    "leader" / _NULLABLE,
    "current_state_timestamp" / c.Int64sb,
    "members" / c.PrefixedArray(c.Int32sb, _MEMBER),
)
_VERSION = c.Int16sb


@dataclasses.dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclasses.dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclasses.dataclass(frozen=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


@dataclasses.dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    member_count: int = 0  # members are written empty: they rejoin after a coordinator move


def encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    if isinstance(key, OffsetCommitKey):
        body = OFFSET_COMMIT_KEY.build(
            {"group": key.group, "topic": key.topic, "partition": key.partition}
        )
        return _VERSION.build(OFFSET_COMMIT_KEY_VERSION) + body
    return _VERSION.build(GROUP_METADATA_KEY_VERSION) + GROUP_METADATA_KEY.build(
        {"group": key.group}
    )


def encode_offset_value(value: OffsetCommitValue) -> bytes:
    return _VERSION.build(OFFSET_COMMIT_VALUE_VERSION) + OFFSET_COMMIT_VALUE.build(
        {
            "offset": value.offset,
            "leader_epoch": value.leader_epoch,
            "metadata": value.metadata,
            "commit_timestamp": value.commit_timestamp_ms,
        }
    )


def encode_group_value(value: GroupMetadataValue) -> bytes:
    return _VERSION.build(GROUP_METADATA_VALUE_VERSION) + GROUP_METADATA_VALUE.build(
        {
            "protocol_type": value.protocol_type,
            "generation": value.generation,
            "protocol": value.protocol,
            "leader": value.leader,
            "current_state_timestamp": value.current_state_timestamp_ms,
            "members": [],
        }
    )


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey:
    try:
        version = _VERSION.parse(data)
        if version in (0, 1):
            parsed = OFFSET_COMMIT_KEY.parse(data[2:])
            return OffsetCommitKey(parsed.group, parsed.topic, parsed.partition)
        if version == 2:
            return GroupMetadataKey(GROUP_METADATA_KEY.parse(data[2:]).group)
    except (c.ConstructError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"bad __consumer_offsets key: {exc}") from exc
    raise CorruptRecordError(f"unknown __consumer_offsets key version {version}")


def decode_offset_value(data: bytes) -> OffsetCommitValue:
    try:
        version = _VERSION.parse(data)
        if version == OFFSET_COMMIT_VALUE_VERSION:
            parsed = OFFSET_COMMIT_VALUE.parse(data[2:])
            return OffsetCommitValue(
                parsed.offset, parsed.leader_epoch, parsed.metadata, parsed.commit_timestamp
            )
    except (c.ConstructError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"bad offset commit value: {exc}") from exc
    raise CorruptRecordError(f"unsupported offset commit value version {version}")


def decode_group_value(data: bytes) -> GroupMetadataValue:
    try:
        version = _VERSION.parse(data)
        if version == GROUP_METADATA_VALUE_VERSION:
            p = GROUP_METADATA_VALUE.parse(data[2:])
            return GroupMetadataValue(
                p.protocol_type, p.generation, p.protocol, p.leader, p.current_state_timestamp,
                len(p.members),
            )  # fmt: skip
    except (c.ConstructError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"bad group metadata value: {exc}") from exc
    raise CorruptRecordError(f"unsupported group metadata value version {version}")
