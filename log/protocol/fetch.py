"""Fetch (1): read record batches from partitions; response records are raw stored bytes.

Request: v3 max_bytes, v4 isolation_level, v5 log_start_offset, v7 session_id/session_epoch and
forgotten_topics_data (KIP-227), v9 current_leader_epoch, v11 rack_id. Response: v1 throttle,
v4 last_stable_offset and aborted_transactions, v5 log_start_offset, v7 error_code and
session_id, v11 preferred_read_replica. v12 is flexible (not declared).

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
FETCH_REQUEST = message(
    "FetchRequest",
    api_key=1,
    versions="0-11",
    flexible_versions="12+",
    fields=(
        F("replica_id", INT32, default=-1),
        F("max_wait_ms", INT32),
        F("min_bytes", INT32),
        F("max_bytes", INT32, "3+", default=0x7FFFFFFF),
        F("isolation_level", INT8, "4+"),
        F("session_id", INT32, "7+"),
        F("session_epoch", INT32, "7+", default=-1),
        F("topics", ARRAY(STRUCT("FetchTopic",
                F("topic", STRING),
                F("partitions", ARRAY(STRUCT("FetchPartition",
                        F("partition", INT32),
                        F("current_leader_epoch", INT32, "9+", default=-1),
                        F("fetch_offset", INT64),
                        F("log_start_offset", INT64, "5+", default=-1),
                        F("partition_max_bytes", INT32),
                    ))),
            ))),
        F("forgotten_topics_data", ARRAY(STRUCT("ForgottenTopic",
                F("topic", STRING),
                F("partitions", ARRAY(INT32)),
            )), "7+"),
        F("rack_id", STRING, "11+"),
    ),
)

FETCH_RESPONSE = message(
    "FetchResponse",
    api_key=1,
    versions="0-11",
    flexible_versions="12+",
    fields=(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16, "7+"),
        F("session_id", INT32, "7+"),
        F("responses", ARRAY(STRUCT("FetchableTopicResponse",
                F("topic", STRING),
                F("partitions", ARRAY(STRUCT("PartitionData",
                        F("partition_index", INT32),
                        F("error_code", INT16),
                        F("high_watermark", INT64),
                        F("last_stable_offset", INT64, "4+", default=-1),
                        F("log_start_offset", INT64, "5+", default=-1),
                        F("aborted_transactions", ARRAY(STRUCT("AbortedTransaction",
                                F("producer_id", INT64),
                                F("first_offset", INT64),
                            )), "4+", nullable="4+"),
                        F("preferred_read_replica", INT32, "11+", default=-1),
                        F("records", RECORDS, nullable="0+"),
                    ))),
            ))),
    ),
)
# fmt: on
