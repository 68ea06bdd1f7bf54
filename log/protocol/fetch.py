"""Fetch (1): read record batches from partitions; response records are raw stored bytes.

Request: v3 max_bytes, v4 isolation_level, v5 log_start_offset, v7 session_id/session_epoch and
forgotten_topics_data (KIP-227), v9 current_leader_epoch, v11 rack_id, v12 flexible with
last_fetched_epoch (the leader detects divergence in the fetch) and the tagged cluster_id, v13
topic ids instead of names (KIP-516), v15 the tagged replica_state (replica id and broker epoch,
KIP-903) instead of replica_id, v17 the tagged replica_directory_id, v18 the tagged
high_watermark a follower knows (KIP-1166; the maximum int64 when it does not say). Response: v1 throttle, v4
last_stable_offset and aborted_transactions, v5 log_start_offset, v7 error_code and session_id,
v11 preferred_read_replica, v12 the tagged diverging_epoch, current_leader and snapshot_id, v13
topic ids, v16 the tagged node_endpoints (KIP-951); v18 changes nothing in the response.

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
FETCH_REQUEST = message(
    "FetchRequest",
    api_key=1,
    versions="0-18",
    flexible_versions="12+",
    fields=(
        F("cluster_id", STRING, "12+", nullable="12+", default=None, tag=0),
        F("replica_id", INT32, "0-14", default=-1),
        F("replica_state", STRUCT("ReplicaState",
                F("replica_id", INT32, "15+", default=-1),
                F("replica_epoch", INT64, "15+", default=-1),
            ), "15+", tag=1),
        F("max_wait_ms", INT32),
        F("min_bytes", INT32),
        F("max_bytes", INT32, "3+", default=0x7FFFFFFF),
        F("isolation_level", INT8, "4+"),
        F("session_id", INT32, "7+"),
        F("session_epoch", INT32, "7+", default=-1),
        F("topics", ARRAY(STRUCT("FetchTopic",
                F("topic", STRING, "0-12"),
                F("topic_id", UUID, "13+"),
                F("partitions", ARRAY(STRUCT("FetchPartition",
                        F("partition", INT32),
                        F("current_leader_epoch", INT32, "9+", default=-1),
                        F("fetch_offset", INT64),
                        F("last_fetched_epoch", INT32, "12+", default=-1),
                        F("log_start_offset", INT64, "5+", default=-1),
                        F("partition_max_bytes", INT32),
                        F("replica_directory_id", UUID, "17+", tag=0),
                        F("high_watermark", INT64, "18+", default=0x7FFFFFFFFFFFFFFF, tag=1),
                    ))),
            ))),
        F("forgotten_topics_data", ARRAY(STRUCT("ForgottenTopic",
                F("topic", STRING, "7-12"),
                F("topic_id", UUID, "13+"),
                F("partitions", ARRAY(INT32)),
            )), "7+"),
        F("rack_id", STRING, "11+"),
    ),
)

FETCH_RESPONSE = message(
    "FetchResponse",
    api_key=1,
    versions="0-18",
    flexible_versions="12+",
    fields=(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16, "7+"),
        F("session_id", INT32, "7+"),
        F("responses", ARRAY(STRUCT("FetchableTopicResponse",
                F("topic", STRING, "0-12"),
                F("topic_id", UUID, "13+"),
                F("partitions", ARRAY(STRUCT("PartitionData",
                        F("partition_index", INT32),
                        F("error_code", INT16),
                        F("high_watermark", INT64),
                        F("last_stable_offset", INT64, "4+", default=-1),
                        F("log_start_offset", INT64, "5+", default=-1),
                        F("diverging_epoch", STRUCT("EpochEndOffset",
                                F("epoch", INT32, "12+", default=-1),
                                F("end_offset", INT64, "12+", default=-1),
                            ), "12+", tag=0),
                        F("current_leader", STRUCT("LeaderIdAndEpoch",
                                F("leader_id", INT32, "12+", default=-1),
                                F("leader_epoch", INT32, "12+", default=-1),
                            ), "12+", tag=1),
                        F("snapshot_id", STRUCT("SnapshotId",
                                F("end_offset", INT64, "0+", default=-1),
                                F("epoch", INT32, "0+", default=-1),
                            ), "12+", tag=2),
                        F("aborted_transactions", ARRAY(STRUCT("AbortedTransaction",
                                F("producer_id", INT64),
                                F("first_offset", INT64),
                            )), "4+", nullable="4+"),
                        F("preferred_read_replica", INT32, "11+", default=-1),
                        F("records", RECORDS, nullable="0+"),
                    ))),
            ))),
        F("node_endpoints", ARRAY(STRUCT("NodeEndpoint",
                F("node_id", INT32, "16+"),
                F("host", STRING, "16+"),
                F("port", INT32, "16+"),
                F("rack", STRING, "16+", nullable="16+", default=None),
            )), "16+", tag=0),
    ),
)
# fmt: on
