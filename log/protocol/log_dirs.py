"""DescribeLogDirs (35): each broker describes its own log directories and the replicas in them;
AlterReplicaLogDirs (34): moves replicas between a broker's log directories.

A broker answers only for itself (a client asks every broker it cares about): per log dir its
path, then per hosted partition `partition_size` (bytes of all segments), `offset_lag` and
`is_future_key`. Kafka's `offset_lag` for a current log is `max(high_watermark -
log_end_offset, 0)`; for a future log (AlterReplicaLogDirs, which we lack) it is the current
log's LEO minus the future log's. `topics` null asks for every hosted partition.

v0 = v1 (Kafka 4.0 removed v0; older clients still send it), v2+ flexible, v3 adds the
top-level `error_code`, v4 the volume's `total_bytes`/`usable_bytes` (-1 when unknown),
v5 `is_cordoned` (KIP-1066; we never cordon).

AlterReplicaLogDirs: per destination path, the topics and partition indexes to move there; the
answer, per topic, each partition's error. v0 = v1 (Kafka 4.0 removed v0), v2 flexible.

Declarations transcribed from Apache Kafka's JSON message definitions (field, type, versions,
nullableVersions, default); see schema.py for the encodings. Field names are Kafka's in snake_case.
"""

from __future__ import annotations

from log.protocol.schema import ARRAY, BOOL, INT16, INT32, INT64, STRING, STRUCT, F, message

# fmt: off
DESCRIBE_LOG_DIRS_REQUEST = message(
    "DescribeLogDirsRequest",
    api_key=35,
    versions="0-5",
    flexible_versions="2+",
    fields=(
        F("topics", ARRAY(STRUCT("DescribableLogDirTopic",
                F("topic", STRING),
                F("partitions", ARRAY(INT32)),
            )), nullable="0+", default=None),
    ),
)

DESCRIBE_LOG_DIRS_RESPONSE = message(
    "DescribeLogDirsResponse",
    api_key=35,
    versions="0-5",
    flexible_versions="2+",
    fields=(
        F("throttle_time_ms", INT32),
        F("error_code", INT16, "3+"),
        F("results", ARRAY(STRUCT("DescribeLogDirsResult",
                F("error_code", INT16),
                F("log_dir", STRING),
                F("topics", ARRAY(STRUCT("DescribeLogDirsTopic",
                        F("name", STRING),
                        F("partitions", ARRAY(STRUCT("DescribeLogDirsPartition",
                                F("partition_index", INT32),
                                F("partition_size", INT64),
                                F("offset_lag", INT64),
                                F("is_future_key", BOOL),
                            ))),
                    ))),
                F("total_bytes", INT64, "4+", default=-1),
                F("usable_bytes", INT64, "4+", default=-1),
                F("is_cordoned", BOOL, "5+", default=False),
            ))),
    ),
)
# fmt: on

# fmt: off
ALTER_REPLICA_LOG_DIRS_REQUEST = message(
    "AlterReplicaLogDirsRequest",
    api_key=34,
    versions="0-2",
    flexible_versions="2+",
    fields=(
        F("dirs", ARRAY(STRUCT("AlterReplicaLogDir",
                F("path", STRING),
                F("topics", ARRAY(STRUCT("AlterReplicaLogDirTopic",
                        F("name", STRING),
                        F("partitions", ARRAY(INT32)),
                    ))),
            ))),
    ),
)

ALTER_REPLICA_LOG_DIRS_RESPONSE = message(
    "AlterReplicaLogDirsResponse",
    api_key=34,
    versions="0-2",
    flexible_versions="2+",
    fields=(
        F("throttle_time_ms", INT32),
        F("results", ARRAY(STRUCT("AlterReplicaLogDirTopicResult",
                F("topic_name", STRING),
                F("partitions", ARRAY(STRUCT("AlterReplicaLogDirPartitionResult",
                        F("partition_index", INT32),
                        F("error_code", INT16),
                    ))),
            ))),
    ),
)
# fmt: on
