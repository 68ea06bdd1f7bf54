"""__consumer_offsets record keys and values, Kafka's layouts (construct, big-endian).

    OffsetCommitKey (key versions 0, 1)    GroupMetadataKey (key version 2)
      version    int16 (we write 1)          version  int16 = 2
      group      string (int16 length)       group    string
      topic      string
      partition  int32

    OffsetCommitValue, versions 0-3 (we write 3, or 1 when the commit carries an expiry)
      version           int16
      offset            int64
      leader_epoch      int32   (v3 only)
      metadata          string
      commit_timestamp  int64
      expire_timestamp  int64   (v1 only: OffsetCommit v2-v4's retention_time_ms)

    GroupMetadataValue, versions 0-3 (we write 3)
      version                  int16
      protocol_type            string
      generation               int32
      protocol                 nullable string (-1)
      leader                   nullable string
      current_state_timestamp  int64   (v2+)
      members                  int32 count, then each:
        member_id          string
        group_instance_id  nullable string  (v3+)
        client_id          string
        client_host        string
        rebalance_timeout  int32   (v1+)
        session_timeout    int32
        subscription       bytes (int32 length)  the member's metadata for `protocol`
        assignment         bytes                 what the leader's SyncGroup gave it

A null value is a tombstone (offset deleted / group deleted). The key's version tells the two
key kinds apart (0 and 1: offset commit; 2: group metadata), as in Kafka's GroupMetadataManager,
so Kafka's own tools (kafka-console-consumer's GroupMetadataMessageFormatter) decode our records.
Values of versions we do not know (4+ is Kafka's flexible encoding) are refused with
CorruptRecordError, never guessed at.
"""

from __future__ import annotations

import dataclasses

import construct as c

from log.common.errors import CorruptRecordError

_STRING = c.PascalString(c.Int16sb, "utf-8")
_BYTES = c.Prefixed(c.Int32sb, c.GreedyBytes)

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
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


def _offset_commit_value(version: int) -> c.Struct:
    return c.Struct(
        "offset" / c.Int64sb,
        "leader_epoch" / (c.Int32sb if version >= 3 else c.Computed(-1)),
        "metadata" / _STRING,
        "commit_timestamp" / c.Int64sb,
        "expire_timestamp" / (c.Int64sb if version == 1 else c.Computed(-1)),
    )


def _group_metadata_value(version: int) -> c.Struct:
    member = c.Struct(
        "member_id" / _STRING,
        "group_instance_id" / (_NULLABLE if version >= 3 else c.Computed(None)),
        "client_id" / _STRING,
        "client_host" / _STRING,
        "rebalance_timeout" / (c.Int32sb if version >= 1 else c.Computed(-1)),
        "session_timeout" / c.Int32sb,
        "subscription" / _BYTES,
        "assignment" / _BYTES,
    )
    return c.Struct(
        "protocol_type" / _STRING,
        "generation" / c.Int32sb,
        "protocol" / _NULLABLE,
        "leader" / _NULLABLE,
        "current_state_timestamp" / (c.Int64sb if version >= 2 else c.Computed(-1)),
        "members" / c.PrefixedArray(c.Int32sb, member),
    )


OFFSET_COMMIT_VALUES = {version: _offset_commit_value(version) for version in range(4)}
GROUP_METADATA_VALUES = {version: _group_metadata_value(version) for version in range(4)}
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
    expire_timestamp_ms: int = -1  # -1: expires by offsets.retention.ms (KIP-211)


@dataclasses.dataclass(frozen=True)
class MemberMetadataValue:
    """One member as GroupMetadataValue stores it (Kafka's MemberMetadata common struct)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclasses.dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int = -1  # -1: unknown (value versions 0 and 1)
    members: tuple[MemberMetadataValue, ...] = ()


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
    """Version 3, or version 1 when the commit set an explicit expiry (as Kafka writes it)."""
    version = OFFSET_COMMIT_VALUE_VERSION
    if value.expire_timestamp_ms != -1:
        version = OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    return _VERSION.build(version) + OFFSET_COMMIT_VALUES[version].build(
        {
            "offset": value.offset,
            "leader_epoch": value.leader_epoch,
            "metadata": value.metadata,
            "commit_timestamp": value.commit_timestamp_ms,
            "expire_timestamp": value.expire_timestamp_ms,
        }
    )


def encode_group_value(value: GroupMetadataValue) -> bytes:
    members = [
        {
            "member_id": m.member_id,
            "group_instance_id": m.group_instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "rebalance_timeout": m.rebalance_timeout_ms,
            "session_timeout": m.session_timeout_ms,
            "subscription": m.subscription,
            "assignment": m.assignment,
        }
        for m in value.members
    ]
    version = GROUP_METADATA_VALUE_VERSION
    return _VERSION.build(version) + GROUP_METADATA_VALUES[version].build(
        {
            "protocol_type": value.protocol_type,
            "generation": value.generation,
            "protocol": value.protocol,
            "leader": value.leader,
            "current_state_timestamp": value.current_state_timestamp_ms,
            "members": members,
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
        layout = OFFSET_COMMIT_VALUES.get(version)
        if layout is not None:
            p = layout.parse(data[2:])
            return OffsetCommitValue(
                p.offset, p.leader_epoch, p.metadata, p.commit_timestamp, p.expire_timestamp
            )
    except (c.ConstructError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"bad offset commit value: {exc}") from exc
    raise CorruptRecordError(f"unsupported offset commit value version {version}")


def decode_group_value(data: bytes) -> GroupMetadataValue:
    try:
        version = _VERSION.parse(data)
        layout = GROUP_METADATA_VALUES.get(version)
        if layout is not None:
            p = layout.parse(data[2:])
            members = tuple(
                MemberMetadataValue(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout,
                    m.session_timeout,
                    m.subscription,
                    m.assignment,
                )  # fmt: skip
                for m in p.members
            )
            return GroupMetadataValue(
                p.protocol_type, p.generation, p.protocol, p.leader, p.current_state_timestamp,
                members,
            )  # fmt: skip
    except (c.ConstructError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"bad group metadata value: {exc}") from exc
    raise CorruptRecordError(f"unsupported group metadata value version {version}")
