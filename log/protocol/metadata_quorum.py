"""DescribeQuorum (55): the metadata quorum's leader, epoch, high watermark and voters, as
`kafka-metadata-quorum.sh --bootstrap-server` asks a broker (which forwards it to the active
controller).

Request: topics [topic_name, partitions [partition_index]] (the metadata log:
__cluster_metadata, partition 0). Response: per partition the leader id and epoch, the high
watermark, current_voters and observers (replica_id, log_end_offset); v1 (KIP-836) each
replica's last_fetch_timestamp and last_caught_up_timestamp; v2 (KIP-853) error messages, each
replica's replica_directory_id and the voters' controller endpoints in `nodes`.

Declarations transcribed from Apache Kafka's JSON message definitions (field, type, versions,
nullableVersions, default); see schema.py for the encodings. Field names are Kafka's in snake_case.
"""

from __future__ import annotations

from log.protocol.schema import (
    ARRAY,
    INT16,
    INT32,
    INT64,
    STRING,
    STRUCT,
    UINT16,
    UUID,
    F,
    message,
)

# fmt: off
DESCRIBE_QUORUM_REQUEST = message(
    "DescribeQuorumRequest",
    api_key=55,
    versions="0-2",
    flexible_versions="0+",
    fields=(
        F("topics", ARRAY(STRUCT("TopicData",
                F("topic_name", STRING),
                F("partitions", ARRAY(STRUCT("PartitionData",
                        F("partition_index", INT32),
                    ))),
            ))),
    ),
)

_REPLICA_STATE = STRUCT("ReplicaState",  # Kafka's common struct: voters and observers
    F("replica_id", INT32),
    F("replica_directory_id", UUID, "2+"),
    F("log_end_offset", INT64),
    F("last_fetch_timestamp", INT64, "1+", default=-1),
    F("last_caught_up_timestamp", INT64, "1+", default=-1),
)


DESCRIBE_QUORUM_RESPONSE = message(
    "DescribeQuorumResponse",
    api_key=55,
    versions="0-2",
    flexible_versions="0+",
    fields=(
        F("error_code", INT16),
        F("error_message", STRING, "2+", nullable="2+", default=None),
        F("topics", ARRAY(STRUCT("TopicData",
                F("topic_name", STRING),
                F("partitions", ARRAY(STRUCT("PartitionData",
                        F("partition_index", INT32),
                        F("error_code", INT16),
                        F("error_message", STRING, "2+", nullable="2+", default=None),
                        F("leader_id", INT32),
                        F("leader_epoch", INT32),
                        F("high_watermark", INT64),
                        F("current_voters", ARRAY(_REPLICA_STATE)),
                        F("observers", ARRAY(_REPLICA_STATE)),
                    ))),
            ))),
        F("nodes", ARRAY(STRUCT("Node",
                F("node_id", INT32, "2+"),
                F("listeners", ARRAY(STRUCT("Listener",
                        F("name", STRING, "2+"),
                        F("host", STRING, "2+"),
                        F("port", UINT16, "2+"),
                    )), "2+"),
            )), "2+"),
    ),
)
# fmt: on
