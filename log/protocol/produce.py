"""Produce (0): record batches for topic partitions; records stay raw bytes (a memoryview).

Request v3-10 share one layout: transactional_id, acks, timeout_ms, topic_data [name,
partition_data [index, records]] (v9+ flexible); v0-2 lack transactional_id (declared so that a
v0-2 request, advertised for old librdkafka but refused, can be answered UNSUPPORTED_VERSION per
partition). Response: v1 throttle, v2 log_append_time_ms, v5 log_start_offset, v8 record_errors
and error_message, v10 (KIP-951) the tagged current_leader per partition and node_endpoints of
those leaders, so a client told NOT_LEADER_OR_FOLLOWER goes to the new leader without a
metadata request. v11 knows TRANSACTION_ABORTABLE, v12 is v11 for transaction version 2;
v13 (KIP-516) names topics by topic_id instead of name, in the request and the response.
acks=0 gets no response frame at all.

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
PRODUCE_REQUEST = message(
    "ProduceRequest",
    api_key=0,
    versions="0-13",
    flexible_versions="9+",
    fields=(
        F("transactional_id", STRING, "3+", nullable="3+", default=None),
        F("acks", INT16),
        F("timeout_ms", INT32),
        F("topic_data", ARRAY(STRUCT("TopicProduceData",
                F("name", STRING, "0-12"),
                F("topic_id", UUID, "13+"),
                F("partition_data", ARRAY(STRUCT("PartitionProduceData",
                        F("index", INT32),
                        F("records", RECORDS, nullable="0+"),
                    ))),
            ))),
    ),
)

PRODUCE_RESPONSE = message(
    "ProduceResponse",
    api_key=0,
    versions="0-13",
    flexible_versions="9+",
    fields=(
        F("responses", ARRAY(STRUCT("TopicProduceResponse",
                F("name", STRING, "0-12"),
                F("topic_id", UUID, "13+"),
                F("partition_responses", ARRAY(STRUCT("PartitionProduceResponse",
                        F("index", INT32),
                        F("error_code", INT16),
                        F("base_offset", INT64),
                        F("log_append_time_ms", INT64, "2+", default=-1),
                        F("log_start_offset", INT64, "5+", default=-1),
                        F("record_errors", ARRAY(STRUCT("BatchIndexAndErrorMessage",
                                F("batch_index", INT32),
                                F("batch_index_error_message", STRING, nullable="8+", default=None),
                            )), "8+"),
                        F("error_message", STRING, "8+", nullable="8+", default=None),
                        F("current_leader", STRUCT("LeaderIdAndEpoch",
                                F("leader_id", INT32, "10+", default=-1),
                                F("leader_epoch", INT32, "10+", default=-1),
                            ), "10+", tag=0),
                    ))),
            ))),
        F("throttle_time_ms", INT32, "1+"),
        F("node_endpoints", ARRAY(STRUCT("NodeEndpoint",
                F("node_id", INT32, "10+"),
                F("host", STRING, "10+"),
                F("port", INT32, "10+"),
                F("rack", STRING, "10+", nullable="10+", default=None),
            )), "10+", tag=0),
    ),
)
# fmt: on
