"""ListOffsets (2) and OffsetForLeaderEpoch (23): offsets by timestamp, and epoch end offsets.

ListOffsets timestamps: -1 latest, -2 earliest, -3 max timestamp (v7+, KIP-734), -4 earliest
local (v8+), -5 latest tiered (v9+, KIP-1005) and -6 earliest pending upload (v11+, KIP-1023;
v11 is v10's layout). v0 (old_style_offsets) is declared but refused;
v2 isolation_level, v4 current_leader_epoch and leader_epoch, v6 flexible, v10 timeout_ms (for
tiered storage reads). OffsetForLeaderEpoch (followers' truncation, KIP-101/279): v1
leader_epoch in the response, v2 current_leader_epoch and throttle, v3 replica_id, v4 flexible.

Declarations transcribed from Apache Kafka's JSON message definitions (field, type, versions,
nullableVersions, default); see schema.py for the encodings. Field names are Kafka's in snake_case.
"""

from __future__ import annotations

from log.protocol.schema import (  # noqa: F401
    ARRAY,
    BOOL,
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    STRUCT,
    F,
    message,
)

# fmt: off
LIST_OFFSETS_REQUEST = message(
    "ListOffsetsRequest",
    api_key=2,
    versions="0-11",
    flexible_versions="6+",
    fields=(
        F("replica_id", INT32),
        F("isolation_level", INT8, "2+"),
        F("topics", ARRAY(STRUCT("ListOffsetsTopic",
                F("name", STRING),
                F("partitions", ARRAY(STRUCT("ListOffsetsPartition",
                        F("partition_index", INT32),
                        F("current_leader_epoch", INT32, "4+", default=-1),
                        F("timestamp", INT64),
                        F("max_num_offsets", INT32, "0-0", default=1),
                    ))),
            ))),
        F("timeout_ms", INT32, "10+"),
    ),
)

LIST_OFFSETS_RESPONSE = message(
    "ListOffsetsResponse",
    api_key=2,
    versions="0-11",
    flexible_versions="6+",
    fields=(
        F("throttle_time_ms", INT32, "2+"),
        F("topics", ARRAY(STRUCT("ListOffsetsTopicResponse",
                F("name", STRING),
                F("partitions", ARRAY(STRUCT("ListOffsetsPartitionResponse",
                        F("partition_index", INT32),
                        F("error_code", INT16),
                        F("old_style_offsets", ARRAY(INT64), "0-0"),
                        F("timestamp", INT64, "1+", default=-1),
                        F("offset", INT64, "1+", default=-1),
                        F("leader_epoch", INT32, "4+", default=-1),
                    ))),
            ))),
    ),
)

OFFSET_FOR_LEADER_EPOCH_REQUEST = message(
    "OffsetForLeaderEpochRequest",
    api_key=23,
    versions="0-4",
    flexible_versions="4+",
    fields=(
        F("replica_id", INT32, "3+", default=-2),
        F("topics", ARRAY(STRUCT("OffsetForLeaderTopic",
                F("topic", STRING),
                F("partitions", ARRAY(STRUCT("OffsetForLeaderPartition",
                        F("partition", INT32),
                        F("current_leader_epoch", INT32, "2+", default=-1),
                        F("leader_epoch", INT32),
                    ))),
            ))),
    ),
)

OFFSET_FOR_LEADER_EPOCH_RESPONSE = message(
    "OffsetForLeaderEpochResponse",
    api_key=23,
    versions="0-4",
    flexible_versions="4+",
    fields=(
        F("throttle_time_ms", INT32, "2+"),
        F("topics", ARRAY(STRUCT("OffsetForLeaderTopicResult",
                F("topic", STRING),
                F("partitions", ARRAY(STRUCT("EpochEndOffset",
                        F("error_code", INT16),
                        F("partition", INT32),
                        F("leader_epoch", INT32, "1+", default=-1),
                        F("end_offset", INT64, default=-1),
                    ))),
            ))),
    ),
)
# fmt: on
