"""InitProducerId (22): a producer id and epoch for idempotent/transactional producers.

v0-1 non-flexible; v2+ flexible; v3+ carries the current producer_id/producer_epoch (KIP-360,
epoch bump); v4 PRODUCER_FENCED; v5 TRANSACTION_ABORTABLE (KIP-890), same layout; v6 adds KIP-939's
two-phase commit flags and the ongoing transaction's producer id and epoch (Kafka 4.1's JSON).

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
INIT_PRODUCER_ID_REQUEST = message(
    "InitProducerIdRequest",
    api_key=22,
    versions="0-6",
    flexible_versions="2+",
    fields=(
        F("transactional_id", STRING, nullable="0+"),
        F("transaction_timeout_ms", INT32),
        F("producer_id", INT64, "3+", default=-1),
        F("producer_epoch", INT16, "3+", default=-1),
        F("enable2_pc", BOOL, "6+", default=False),
        F("keep_prepared_txn", BOOL, "6+", default=False),
    ),
)

INIT_PRODUCER_ID_RESPONSE = message(
    "InitProducerIdResponse",
    api_key=22,
    versions="0-6",
    flexible_versions="2+",
    fields=(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("producer_id", INT64, default=-1),
        F("producer_epoch", INT16),
        F("ongoing_txn_producer_id", INT64, "6+", default=-1),
        F("ongoing_txn_producer_epoch", INT16, "6+", default=-1),
    ),
)
# fmt: on
