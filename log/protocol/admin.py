"""Admin APIs: CreateTopics (19), DeleteTopics (20), CreatePartitions (37), DescribeConfigs (32),
DescribeCluster (60), AlterConfigs (33), IncrementalAlterConfigs (44), DeleteRecords (21),
OffsetDelete (47).

Flexible: DescribeCluster (flexible-only), IncrementalAlterConfigs v1, DeleteRecords v2
(aiokafka's admin client sends DeleteRecords v2), CreateTopics v5-v7 (v5: the created topic's
partitions, replication factor and configs in the answer, KIP-525; v6 as v5; v7 its topic id),
DeleteTopics v4-v6 (v5 error messages, v6 topics by name or id), CreatePartitions v2-v3 (v3 as
v2), DescribeConfigs v4 (v3 config types and documentation, KIP-569), AlterConfigs v2.

Declarations transcribed from Apache Kafka's JSON message definitions (field, type, versions,
nullableVersions, default); see schema.py for the encodings. Field names are Kafka's in snake_case.
"""

from __future__ import annotations

import uuid

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
CREATE_TOPICS_REQUEST = message(
    "CreateTopicsRequest",
    api_key=19,
    versions="0-7",
    flexible_versions="5+",
    fields=(
        F("topics", ARRAY(STRUCT("CreatableTopic",
                F("name", STRING),
                F("num_partitions", INT32),
                F("replication_factor", INT16),
                F("assignments", ARRAY(STRUCT("CreatableReplicaAssignment",
                        F("partition_index", INT32),
                        F("broker_ids", ARRAY(INT32)),
                    ))),
                F("configs", ARRAY(STRUCT("CreatableTopicConfig",
                        F("name", STRING),
                        F("value", STRING, nullable="0+"),
                    ))),
            ))),
        F("timeout_ms", INT32, default=60000),
        F("validate_only", BOOL, "1+", default=False),
    ),
)

CREATE_TOPICS_RESPONSE = message(
    "CreateTopicsResponse",
    api_key=19,
    versions="0-7",
    flexible_versions="5+",
    fields=(
        F("throttle_time_ms", INT32, "2+"),
        F("topics", ARRAY(STRUCT("CreatableTopicResult",
                F("name", STRING),
                F("topic_id", UUID, "7+", default=uuid.UUID(int=0)),  # KIP-516
                F("error_code", INT16),
                F("error_message", STRING, "1+", nullable="0+"),
                # (TopicConfigErrorCode, tag 0, is only sent when configs could not be listed:
                # never here, so not declared; a reader skips unknown tags)
                # KIP-525: what the topic was created with (-1 / empty on an error)
                F("num_partitions", INT32, "5+", default=-1),
                F("replication_factor", INT16, "5+", default=-1),
                F("configs", ARRAY(STRUCT("CreatableTopicConfigs",
                        F("name", STRING),
                        F("value", STRING, nullable="5+"),
                        F("read_only", BOOL),
                        F("config_source", INT8, default=-1),
                        F("is_sensitive", BOOL),
                    )), "5+", nullable="5+", default=()),
            ))),
    ),
)

DELETE_TOPICS_REQUEST = message(
    "DeleteTopicsRequest",
    api_key=20,
    versions="0-6",
    flexible_versions="4+",
    fields=(
        F("topics", ARRAY(STRUCT("DeleteTopicState",
                F("name", STRING, nullable="6+", default=None),
                F("topic_id", UUID),
            )), "6+"),
        F("topic_names", ARRAY(STRING), "0-5"),
        F("timeout_ms", INT32),
    ),
)

DELETE_TOPICS_RESPONSE = message(
    "DeleteTopicsResponse",
    api_key=20,
    versions="0-6",
    flexible_versions="4+",
    fields=(
        F("throttle_time_ms", INT32, "1+"),
        F("responses", ARRAY(STRUCT("DeletableTopicResult",
                F("name", STRING, nullable="6+"),
                F("topic_id", UUID, "6+"),
                F("error_code", INT16),
                F("error_message", STRING, "5+", nullable="5+", default=None),
            ))),
    ),
)

CREATE_PARTITIONS_REQUEST = message(
    "CreatePartitionsRequest",
    api_key=37,
    versions="0-3",
    flexible_versions="2+",
    fields=(
        F("topics", ARRAY(STRUCT("CreatePartitionsTopic",
                F("name", STRING),
                F("count", INT32),
                F("assignments", ARRAY(STRUCT("CreatePartitionsAssignment",
                        F("broker_ids", ARRAY(INT32)),
                    )), nullable="0+"),
            ))),
        F("timeout_ms", INT32),
        F("validate_only", BOOL),
    ),
)

CREATE_PARTITIONS_RESPONSE = message(
    "CreatePartitionsResponse",
    api_key=37,
    versions="0-3",
    flexible_versions="2+",
    fields=(
        F("throttle_time_ms", INT32),
        F("results", ARRAY(STRUCT("CreatePartitionsTopicResult",
                F("name", STRING),
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+", default=None),
            ))),
    ),
)

DESCRIBE_CONFIGS_REQUEST = message(
    "DescribeConfigsRequest",
    api_key=32,
    versions="0-4",
    flexible_versions="4+",
    fields=(
        F("resources", ARRAY(STRUCT("DescribeConfigsResource",
                F("resource_type", INT8),
                F("resource_name", STRING),
                F("configuration_keys", ARRAY(STRING), nullable="0+"),
            ))),
        F("include_synonyms", BOOL, "1+", default=False),
        F("include_documentation", BOOL, "3+", default=False),
    ),
)

DESCRIBE_CONFIGS_RESPONSE = message(
    "DescribeConfigsResponse",
    api_key=32,
    versions="0-4",
    flexible_versions="4+",
    fields=(
        F("throttle_time_ms", INT32),
        F("results", ARRAY(STRUCT("DescribeConfigsResult",
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+"),
                F("resource_type", INT8),
                F("resource_name", STRING),
                F("configs", ARRAY(STRUCT("DescribeConfigsResourceResult",
                        F("name", STRING),
                        F("value", STRING, nullable="0+"),
                        F("read_only", BOOL),
                        F("config_source", INT8, "1+", default=-1),
                        F("is_default", BOOL, "0-0"),
                        F("is_sensitive", BOOL),
                        F("synonyms", ARRAY(STRUCT("DescribeConfigsSynonym",
                                F("name", STRING),
                                F("value", STRING, nullable="1+"),
                                F("source", INT8),
                            )), "1+"),
                        F("config_type", INT8, "3+", default=0),
                        F("documentation", STRING, "3+", nullable="0+", default=None),
                    ))),
            ))),
    ),
)

DESCRIBE_CLUSTER_REQUEST = message(
    "DescribeClusterRequest",
    api_key=60,
    versions="0-2",
    flexible_versions="0+",
    fields=(
        F("include_cluster_authorized_operations", BOOL),
        F("endpoint_type", INT8, "1+", default=1),
        F("include_fenced_brokers", BOOL, "2+"),  # KIP-1073
    ),
)

DESCRIBE_CLUSTER_RESPONSE = message(
    "DescribeClusterResponse",
    api_key=60,
    versions="0-2",
    flexible_versions="0+",
    fields=(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("endpoint_type", INT8, "1+", default=1),
        F("cluster_id", STRING),
        F("controller_id", INT32, default=-1),
        F("brokers", ARRAY(STRUCT("DescribeClusterBroker",
                F("broker_id", INT32),
                F("host", STRING),
                F("port", INT32),
                F("rack", STRING, nullable="0+", default=None),
                F("is_fenced", BOOL, "2+"),
            ))),
        F("cluster_authorized_operations", INT32, default=-2147483648),
    ),
)

ALTER_CONFIGS_REQUEST = message(
    "AlterConfigsRequest",
    api_key=33,
    versions="0-2",
    flexible_versions="2+",
    fields=(
        F("resources", ARRAY(STRUCT("AlterConfigsResource",
                F("resource_type", INT8),
                F("resource_name", STRING),
                F("configs", ARRAY(STRUCT("AlterableConfig",
                        F("name", STRING),
                        F("value", STRING, nullable="0+"),
                    ))),
            ))),
        F("validate_only", BOOL),
    ),
)

ALTER_CONFIGS_RESPONSE = message(
    "AlterConfigsResponse",
    api_key=33,
    versions="0-2",
    flexible_versions="2+",
    fields=(
        F("throttle_time_ms", INT32),
        F("responses", ARRAY(STRUCT("AlterConfigsResourceResponse",
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+"),
                F("resource_type", INT8),
                F("resource_name", STRING),
            ))),
    ),
)

INCREMENTAL_ALTER_CONFIGS_REQUEST = message(
    "IncrementalAlterConfigsRequest",
    api_key=44,
    versions="0-1",
    flexible_versions="1+",
    fields=(
        F("resources", ARRAY(STRUCT("AlterConfigsResource",
                F("resource_type", INT8),
                F("resource_name", STRING),
                F("configs", ARRAY(STRUCT("AlterableConfig",
                        F("name", STRING),
                        F("config_operation", INT8),
                        F("value", STRING, nullable="0+"),
                    ))),
            ))),
        F("validate_only", BOOL),
    ),
)

INCREMENTAL_ALTER_CONFIGS_RESPONSE = message(
    "IncrementalAlterConfigsResponse",
    api_key=44,
    versions="0-1",
    flexible_versions="1+",
    fields=(
        F("throttle_time_ms", INT32),
        F("responses", ARRAY(STRUCT("AlterConfigsResourceResponse",
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+"),
                F("resource_type", INT8),
                F("resource_name", STRING),
            ))),
    ),
)

DELETE_RECORDS_REQUEST = message(
    "DeleteRecordsRequest",
    api_key=21,
    versions="0-2",
    flexible_versions="2+",
    fields=(
        F("topics", ARRAY(STRUCT("DeleteRecordsTopic",
                F("name", STRING),
                F("partitions", ARRAY(STRUCT("DeleteRecordsPartition",
                        F("partition_index", INT32),
                        F("offset", INT64),
                    ))),
            ))),
        F("timeout_ms", INT32),
    ),
)

DELETE_RECORDS_RESPONSE = message(
    "DeleteRecordsResponse",
    api_key=21,
    versions="0-2",
    flexible_versions="2+",
    fields=(
        F("throttle_time_ms", INT32),
        F("topics", ARRAY(STRUCT("DeleteRecordsTopicResult",
                F("name", STRING),
                F("partitions", ARRAY(STRUCT("DeleteRecordsPartitionResult",
                        F("partition_index", INT32),
                        F("low_watermark", INT64),
                        F("error_code", INT16),
                    ))),
            ))),
    ),
)

OFFSET_DELETE_REQUEST = message(
    "OffsetDeleteRequest",
    api_key=47,
    versions="0-0",
    flexible_versions="none",
    fields=(
        F("group_id", STRING),
        F("topics", ARRAY(STRUCT("OffsetDeleteRequestTopic",
                F("name", STRING),
                F("partitions", ARRAY(STRUCT("OffsetDeleteRequestPartition",
                        F("partition_index", INT32),
                    ))),
            ))),
    ),
)

OFFSET_DELETE_RESPONSE = message(
    "OffsetDeleteResponse",
    api_key=47,
    versions="0-0",
    flexible_versions="none",
    fields=(
        F("error_code", INT16),
        F("throttle_time_ms", INT32),
        F("topics", ARRAY(STRUCT("OffsetDeleteResponseTopic",
                F("name", STRING),
                F("partitions", ARRAY(STRUCT("OffsetDeleteResponsePartition",
                        F("partition_index", INT32),
                        F("error_code", INT16),
                    ))),
            ))),
    ),
)
ELECT_LEADERS_REQUEST = message(
    "ElectLeadersRequest",
    api_key=43,
    versions="0-2",
    flexible_versions="2+",
    fields=(
        F("election_type", INT8, "1+", default=0),  # 0 PREFERRED, 1 UNCLEAN; v0: preferred
        F("topic_partitions", ARRAY(STRUCT("TopicPartitions",
                F("topic", STRING),
                F("partitions", ARRAY(INT32)),
            )), nullable="0+"),  # null: every partition
        F("timeout_ms", INT32, default=60000),
    ),
)

ELECT_LEADERS_RESPONSE = message(
    "ElectLeadersResponse",
    api_key=43,
    versions="0-2",
    flexible_versions="2+",
    fields=(
        F("throttle_time_ms", INT32),
        F("error_code", INT16, "1+"),
        F("replica_election_results", ARRAY(STRUCT("ReplicaElectionResult",
                F("topic", STRING),
                F("partition_result", ARRAY(STRUCT("PartitionResult",
                        F("partition_id", INT32),
                        F("error_code", INT16),
                        F("error_message", STRING, nullable="0+"),
                    ))),
            ))),
    ),
)
ALTER_PARTITION_REASSIGNMENTS_REQUEST = message(
    "AlterPartitionReassignmentsRequest",
    api_key=45,
    versions="0-1",
    flexible_versions="0+",
    fields=(
        F("timeout_ms", INT32, default=60000),
        F("allow_replication_factor_change", BOOL, "1+", default=True),  # KIP-860
        F("topics", ARRAY(STRUCT("ReassignableTopic",
                F("name", STRING),
                F("partitions", ARRAY(STRUCT("ReassignablePartition",
                        F("partition_index", INT32),
                        F("replicas", ARRAY(INT32), nullable="0+", default=None),  # null: cancel
                    ))),
            ))),
    ),
)

ALTER_PARTITION_REASSIGNMENTS_RESPONSE = message(
    "AlterPartitionReassignmentsResponse",
    api_key=45,
    versions="0-1",
    flexible_versions="0+",
    fields=(
        F("throttle_time_ms", INT32),
        F("allow_replication_factor_change", BOOL, "1+", default=True),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+"),
        F("responses", ARRAY(STRUCT("ReassignableTopicResponse",
                F("name", STRING),
                F("partitions", ARRAY(STRUCT("ReassignablePartitionResponse",
                        F("partition_index", INT32),
                        F("error_code", INT16),
                        F("error_message", STRING, nullable="0+"),
                    ))),
            ))),
    ),
)

LIST_PARTITION_REASSIGNMENTS_REQUEST = message(
    "ListPartitionReassignmentsRequest",
    api_key=46,
    versions="0",
    flexible_versions="0+",
    fields=(
        F("timeout_ms", INT32, default=60000),
        F("topics", ARRAY(STRUCT("ListPartitionReassignmentsTopics",
                F("name", STRING),
                F("partition_indexes", ARRAY(INT32)),
            )), nullable="0+", default=None),  # null: every ongoing reassignment
    ),
)

LIST_PARTITION_REASSIGNMENTS_RESPONSE = message(
    "ListPartitionReassignmentsResponse",
    api_key=46,
    versions="0",
    flexible_versions="0+",
    fields=(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+"),
        F("topics", ARRAY(STRUCT("OngoingTopicReassignment",
                F("name", STRING),
                F("partitions", ARRAY(STRUCT("OngoingPartitionReassignment",
                        F("partition_index", INT32),
                        F("replicas", ARRAY(INT32)),
                        F("adding_replicas", ARRAY(INT32)),
                        F("removing_replicas", ARRAY(INT32)),
                    ))),
            ))),
    ),
)
# fmt: on
