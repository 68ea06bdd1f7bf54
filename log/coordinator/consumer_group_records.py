"""__consumer_offsets records of KIP-848 consumer groups, Kafka's layouts.

Keys are non-flexible: an int16 key version naming the record type, then strings (int16
length). Values are an int16 value version (0) then a flexible (KIP-482) body; a null value is
a tombstone. Declared with the schema DSL from Kafka's group-coordinator JSON definitions
(group-coordinator/src/main/resources/common/message/ConsumerGroup*.json):

    key version  record                                  key fields
    3            ConsumerGroupMetadata                   group_id        value: epoch
    4            ConsumerGroupPartitionMetadata          group_id        value: topics
    5            ConsumerGroupMemberMetadata             group_id, member_id
    6            ConsumerGroupTargetAssignmentMetadata   group_id        value: assignment_epoch
    7            ConsumerGroupTargetAssignmentMember     group_id, member_id
    8            ConsumerGroupCurrentMemberAssignment    group_id, member_id
    16           ConsumerGroupRegularExpression          group_id, regular_expression
                                                         value: topics, version, timestamp

Key versions 0-2 are the classic records (records.py); 9-15 (share groups) are not written.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

from log.common.errors import CorruptRecordError, InvalidRequestError
from log.protocol.schema import (
    ARRAY,
    INT8,
    INT32,
    INT64,
    STRING,
    STRUCT,
    UUID,
    F,
    Message,
    message,
)

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16
KEY_VERSIONS = frozenset(range(3, 9)) | {REGULAR_EXPRESSION}
_PER_MEMBER = frozenset({MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT})


def _value(name: str, *fields: Any) -> Message:
    return message(name, api_key=None, versions="0", flexible_versions="0+", fields=fields)


def _topic_partitions(name: str) -> Any:
    return ARRAY(STRUCT(name, F("topic_id", UUID), F("partitions", ARRAY(INT32))))


# fmt: off
VALUES: dict[int, Message] = {
    GROUP_METADATA: _value("ConsumerGroupMetadataValue", F("epoch", INT32)),
    PARTITION_METADATA: _value(
        "ConsumerGroupPartitionMetadataValue",
        F("topics", ARRAY(STRUCT("TopicMetadata",
            F("topic_id", UUID),
            F("topic_name", STRING),
            F("num_partitions", INT32),
            F("partition_metadata", ARRAY(STRUCT("PartitionMetadata",
                F("partition", INT32),
                F("racks", ARRAY(STRING)),
            ))),
        ))),
    ),
    MEMBER_METADATA: _value(
        "ConsumerGroupMemberMetadataValue",
        F("instance_id", STRING, nullable="0+", default=None),
        F("rack_id", STRING, nullable="0+", default=None),
        F("client_id", STRING),
        F("client_host", STRING),
        F("subscribed_topic_names", ARRAY(STRING)),
        F("subscribed_topic_regex", STRING, nullable="0+", default=None),
        F("rebalance_timeout_ms", INT32, default=-1),
        F("server_assignor", STRING, nullable="0+", default=None),
    ),
    TARGET_ASSIGNMENT_METADATA: _value(
        "ConsumerGroupTargetAssignmentMetadataValue", F("assignment_epoch", INT32)
    ),
    TARGET_ASSIGNMENT_MEMBER: _value(
        "ConsumerGroupTargetAssignmentMemberValue",
        F("topic_partitions", _topic_partitions("TopicPartition")),
    ),
    CURRENT_MEMBER_ASSIGNMENT: _value(
        "ConsumerGroupCurrentMemberAssignmentValue",
        F("member_epoch", INT32),
        F("previous_member_epoch", INT32),
        F("state", INT8),
        F("assigned_partitions", _topic_partitions("TopicPartitions")),
        F("partitions_pending_revocation", _topic_partitions("TopicPartitions")),
    ),
    REGULAR_EXPRESSION: _value(
        "ConsumerGroupRegularExpressionValue",
        F("topics", ARRAY(STRING)),
        F("version", INT64),  # the metadata offset the topics were listed at
        F("timestamp", INT64),  # when they were (ms)
    ),
}
# fmt: on


@dataclasses.dataclass(frozen=True)
class ConsumerGroupRecordKey:
    version: int  # the record type (3-8, 16)
    group_id: str
    member_id: str | None = None  # key versions 5, 7, 8
    regular_expression: str | None = None  # key version 16


def _string(value: str) -> bytes:
    data = value.encode("utf-8")
    return struct.pack(">h", len(data)) + data


def encode_key(key: ConsumerGroupRecordKey) -> bytes:
    out = struct.pack(">h", key.version) + _string(key.group_id)
    if key.version in _PER_MEMBER:
        assert key.member_id is not None
        out += _string(key.member_id)
    elif key.version == REGULAR_EXPRESSION:
        assert key.regular_expression is not None
        out += _string(key.regular_expression)
    return out


def encode_value(version: int, /, **fields: Any) -> bytes:
    layout = VALUES[version]
    return struct.pack(">h", 0) + layout.encode(layout.cls(**fields), 0)


def value_class(version: int, nested: str | None = None) -> Any:
    cls = VALUES[version].cls
    return cls if nested is None else getattr(cls, nested)


def key_version(data: bytes) -> int | None:
    return struct.unpack_from(">h", data)[0] if len(data) >= 2 else None


def decode_key(data: bytes) -> ConsumerGroupRecordKey:
    try:
        (version,) = struct.unpack_from(">h", data)
        if version not in KEY_VERSIONS:
            raise CorruptRecordError(f"not a consumer group record key: version {version}")
        strings = []
        position = 2
        for _ in range(2 if version in _PER_MEMBER or version == REGULAR_EXPRESSION else 1):
            (length,) = struct.unpack_from(">h", data, position)
            if length < 0 or position + 2 + length > len(data):
                raise CorruptRecordError("bad string in a consumer group record key")
            strings.append(data[position + 2 : position + 2 + length].decode("utf-8"))
            position += 2 + length
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"bad consumer group record key: {exc}") from exc
    if version == REGULAR_EXPRESSION:
        return ConsumerGroupRecordKey(version, strings[0], regular_expression=strings[1])
    return ConsumerGroupRecordKey(version, *strings)


def decode_value(key_version: int, data: bytes) -> Any:
    try:
        (version,) = struct.unpack_from(">h", data)
        if version != 0:
            raise CorruptRecordError(f"unsupported consumer group value version {version}")
        body, _ = VALUES[key_version].decode(data, 0, 2)
    except (struct.error, InvalidRequestError) as exc:
        raise CorruptRecordError(f"bad consumer group record value: {exc}") from exc
    return body
