"""Metadata (3): brokers, controller, cluster id, and topics with partition leaders and replicas.

Declared v0-13. v1 nullable topics (null = all topics), rack, controller_id, is_internal; v2
cluster_id; v3 throttle; v4 allow_auto_topic_creation; v5 offline_replicas; v7 leader_epoch; v8
authorized operations (INT32_MIN = not requested; the cluster's only through v10); v9 flexible;
v10 topic ids (KIP-516: a request may name a topic by id, its name null); v12 a topic's name is
null in the answer when it was asked by an id nobody knows; v13 a top-level error_code (KIP-1102:
REBOOTSTRAP_REQUIRED, which a broker without rebootstrap triggers never sends: always 0 here
but in whole-request error answers).

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
    UUID,
    F,
    message,
)

# fmt: off
METADATA_REQUEST = message(
    "MetadataRequest",
    api_key=3,
    versions="0-13",
    flexible_versions="9+",
    fields=(
        F("topics", ARRAY(STRUCT("MetadataRequestTopic",
                F("topic_id", UUID, "10+"),
                F("name", STRING, nullable="10+"),
            )), nullable="1+"),
        F("allow_auto_topic_creation", BOOL, "4+", default=True),
        F("include_cluster_authorized_operations", BOOL, "8-10"),
        F("include_topic_authorized_operations", BOOL, "8+"),
    ),
)

METADATA_RESPONSE = message(
    "MetadataResponse",
    api_key=3,
    versions="0-13",
    flexible_versions="9+",
    fields=(
        F("throttle_time_ms", INT32, "3+"),
        F("brokers", ARRAY(STRUCT("MetadataResponseBroker",
                F("node_id", INT32),
                F("host", STRING),
                F("port", INT32),
                F("rack", STRING, "1+", nullable="1+", default=None),
            ))),
        F("cluster_id", STRING, "2+", nullable="2+", default=None),
        F("controller_id", INT32, "1+", default=-1),
        F("topics", ARRAY(STRUCT("MetadataResponseTopic",
                F("error_code", INT16),
                F("name", STRING, nullable="12+"),
                F("topic_id", UUID, "10+"),
                F("is_internal", BOOL, "1+", default=False),
                F("partitions", ARRAY(STRUCT("MetadataResponsePartition",
                        F("error_code", INT16),
                        F("partition_index", INT32),
                        F("leader_id", INT32),
                        F("leader_epoch", INT32, "7+", default=-1),
                        F("replica_nodes", ARRAY(INT32)),
                        F("isr_nodes", ARRAY(INT32)),
                        F("offline_replicas", ARRAY(INT32), "5+"),
                    ))),
                F("topic_authorized_operations", INT32, "8+", default=-2147483648),
            ))),
        F("cluster_authorized_operations", INT32, "8-10", default=-2147483648),
        F("error_code", INT16, "13+"),
    ),
)
DESCRIBE_TOPIC_PARTITIONS_REQUEST = message(
    "DescribeTopicPartitionsRequest",
    api_key=75,
    versions="0",
    flexible_versions="0+",
    fields=(
        F("topics", ARRAY(STRUCT("TopicRequest",
                F("name", STRING),
            ))),
        F("response_partition_limit", INT32, default=2000),
        F("cursor", STRUCT("Cursor",
                F("topic_name", STRING),
                F("partition_index", INT32),
            ), nullable="0+", default=None),
    ),
)

DESCRIBE_TOPIC_PARTITIONS_RESPONSE = message(
    "DescribeTopicPartitionsResponse",
    api_key=75,
    versions="0",
    flexible_versions="0+",
    fields=(
        F("throttle_time_ms", INT32),
        F("topics", ARRAY(STRUCT("DescribeTopicPartitionsResponseTopic",
                F("error_code", INT16),
                F("name", STRING, nullable="0+"),
                F("topic_id", UUID),
                F("is_internal", BOOL, default=False),
                F("partitions", ARRAY(STRUCT("DescribeTopicPartitionsResponsePartition",
                        F("error_code", INT16),
                        F("partition_index", INT32),
                        F("leader_id", INT32),
                        F("leader_epoch", INT32, default=-1),
                        F("replica_nodes", ARRAY(INT32)),
                        F("isr_nodes", ARRAY(INT32)),
                        F("eligible_leader_replicas", ARRAY(INT32), nullable="0+", default=None),
                        F("last_known_elr", ARRAY(INT32), nullable="0+", default=None),
                        F("offline_replicas", ARRAY(INT32)),
                    ))),
                F("topic_authorized_operations", INT32, default=-2147483648),
            ))),
        F("next_cursor", STRUCT("Cursor",
                F("topic_name", STRING),
                F("partition_index", INT32),
            ), nullable="0+", default=None),
    ),
)
# fmt: on
