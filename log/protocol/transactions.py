"""Transaction APIs: AddPartitionsToTxn (24, v0-5, flexible from v3), AddOffsetsToTxn (25, v0-4,
flexible from v3), EndTxn (26, v0-5, flexible from v3), TxnOffsetCommit (28, v0-5, flexible from
v3); and WriteTxnMarkers (27, coordinator -> partition leaders, v0-1, flexible from v1).

AddPartitionsToTxn v4+ (KIP-890 part 1) is the broker-to-broker form: a batch of
`transactions`, each with `verify_only` (a partition leader asking whether its partition is in
the transaction); Kafka renamed the v0-3 single-transaction fields with a v3_and_below_ prefix,
the names are kept verbatim. v5 only says the sender knows TRANSACTION_ABORTABLE; EndTxn v4,
AddOffsetsToTxn v4, TxnOffsetCommit v4 and InitProducerId v5 likewise (same layouts).

Transaction version 2 (KIP-890 part 2): EndTxn v5's response carries the producer id and epoch
the producer continues with; TxnOffsetCommit v5 (layout of v3) adds the group's offsets
partition to the transaction itself. TxnOffsetCommit v3 (KIP-447) carries the consumer's
generation, member id and group instance id.

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
# Kafka's commonStructs: one declaration each, shared by the v0-3 and v4+ fields.
_ADD_TOPIC = STRUCT("AddPartitionsToTxnTopic",
    F("name", STRING),
    F("partitions", ARRAY(INT32)),
)
_TOPIC_RESULT = STRUCT("AddPartitionsToTxnTopicResult",
    F("name", STRING),
    F("results_by_partition", ARRAY(STRUCT("AddPartitionsToTxnPartitionResult",
            F("partition_index", INT32),
            F("partition_error_code", INT16),
        ))),
)

ADD_PARTITIONS_TO_TXN_REQUEST = message(
    "AddPartitionsToTxnRequest",
    api_key=24,
    versions="0-5",
    flexible_versions="3+",
    fields=(
        F("transactions", ARRAY(STRUCT("AddPartitionsToTxnTransaction",
                F("transactional_id", STRING, "4+"),
                F("producer_id", INT64, "4+"),
                F("producer_epoch", INT16, "4+"),
                F("verify_only", BOOL, "4+", default=False),
                F("topics", ARRAY(_ADD_TOPIC), "4+"),
            )), "4+"),
        F("v3_and_below_transactional_id", STRING, "0-3"),
        F("v3_and_below_producer_id", INT64, "0-3"),
        F("v3_and_below_producer_epoch", INT16, "0-3"),
        F("v3_and_below_topics", ARRAY(_ADD_TOPIC), "0-3"),
    ),
)

ADD_PARTITIONS_TO_TXN_RESPONSE = message(
    "AddPartitionsToTxnResponse",
    api_key=24,
    versions="0-5",
    flexible_versions="3+",
    fields=(
        F("throttle_time_ms", INT32),
        F("error_code", INT16, "4+"),
        F("results_by_transaction", ARRAY(STRUCT("AddPartitionsToTxnResult",
                F("transactional_id", STRING, "4+"),
                F("topic_results", ARRAY(_TOPIC_RESULT), "4+"),
            )), "4+"),
        F("results_by_topic_v3_and_below", ARRAY(_TOPIC_RESULT), "0-3"),
    ),
)

ADD_OFFSETS_TO_TXN_REQUEST = message(
    "AddOffsetsToTxnRequest",
    api_key=25,
    versions="0-4",
    flexible_versions="3+",
    fields=(
        F("transactional_id", STRING),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("group_id", STRING),
    ),
)

ADD_OFFSETS_TO_TXN_RESPONSE = message(
    "AddOffsetsToTxnResponse",
    api_key=25,
    versions="0-4",
    flexible_versions="3+",
    fields=(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
    ),
)

END_TXN_REQUEST = message(
    "EndTxnRequest",
    api_key=26,
    versions="0-5",
    flexible_versions="3+",
    fields=(
        F("transactional_id", STRING),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("committed", BOOL),
    ),
)

END_TXN_RESPONSE = message(
    "EndTxnResponse",
    api_key=26,
    versions="0-5",
    flexible_versions="3+",
    fields=(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("producer_id", INT64, "5+", default=-1),
        F("producer_epoch", INT16, "5+", default=-1),
    ),
)

TXN_OFFSET_COMMIT_REQUEST = message(
    "TxnOffsetCommitRequest",
    api_key=28,
    versions="0-5",
    flexible_versions="3+",
    fields=(
        F("transactional_id", STRING),
        F("group_id", STRING),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("generation_id", INT32, "3+", default=-1),
        F("member_id", STRING, "3+", default=""),
        F("group_instance_id", STRING, "3+", nullable="3+", default=None),
        F("topics", ARRAY(STRUCT("TxnOffsetCommitRequestTopic",
                F("name", STRING),
                F("partitions", ARRAY(STRUCT("TxnOffsetCommitRequestPartition",
                        F("partition_index", INT32),
                        F("committed_offset", INT64),
                        F("committed_leader_epoch", INT32, "2+", default=-1),
                        F("committed_metadata", STRING, nullable="0+"),
                    ))),
            ))),
    ),
)

TXN_OFFSET_COMMIT_RESPONSE = message(
    "TxnOffsetCommitResponse",
    api_key=28,
    versions="0-5",
    flexible_versions="3+",
    fields=(
        F("throttle_time_ms", INT32),
        F("topics", ARRAY(STRUCT("TxnOffsetCommitResponseTopic",
                F("name", STRING),
                F("partitions", ARRAY(STRUCT("TxnOffsetCommitResponsePartition",
                        F("partition_index", INT32),
                        F("error_code", INT16),
                    ))),
            ))),
    ),
)
WRITE_TXN_MARKERS_REQUEST = message(
    "WriteTxnMarkersRequest",
    api_key=27,
    versions="0-1",
    flexible_versions="1+",
    fields=(
        F("markers", ARRAY(STRUCT("WritableTxnMarker",
                F("producer_id", INT64),
                F("producer_epoch", INT16),
                F("transaction_result", BOOL),  # False = ABORT, True = COMMIT
                F("topics", ARRAY(STRUCT("WritableTxnMarkerTopic",
                        F("name", STRING),
                        F("partition_indexes", ARRAY(INT32)),
                    ))),
                F("coordinator_epoch", INT32),
            ))),
    ),
)

WRITE_TXN_MARKERS_RESPONSE = message(
    "WriteTxnMarkersResponse",
    api_key=27,
    versions="0-1",
    flexible_versions="1+",
    fields=(
        F("markers", ARRAY(STRUCT("WritableTxnMarkerResult",
                F("producer_id", INT64),
                F("topics", ARRAY(STRUCT("WritableTxnMarkerTopicResult",
                        F("name", STRING),
                        F("partitions", ARRAY(STRUCT("WritableTxnMarkerPartitionResult",
                                F("partition_index", INT32),
                                F("error_code", INT16),
                            ))),
                    ))),
            ))),
    ),
)
# fmt: on
