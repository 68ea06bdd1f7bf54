"""Transaction admin APIs (kafka-transactions.sh): DescribeTransactions (65) v0 and
ListTransactions (66) v0-1, flexible in every version. Each broker answers for the transactional
ids it coordinates (the leaders of their __transaction_state partitions); an admin client asks
FindCoordinator first (Describe) or every broker (List).

Declarations transcribed from Apache Kafka's JSON message definitions (field, type, versions,
nullableVersions, default); see schema.py for the encodings. Field names are Kafka's in snake_case.
"""

from __future__ import annotations

from log.protocol.schema import ARRAY, INT16, INT32, INT64, STRING, STRUCT, F, message

# fmt: off
DESCRIBE_TRANSACTIONS_REQUEST = message(
    "DescribeTransactionsRequest",
    api_key=65,
    versions="0",
    flexible_versions="0+",
    fields=(
        F("transactional_ids", ARRAY(STRING)),
    ),
)

DESCRIBE_TRANSACTIONS_RESPONSE = message(
    "DescribeTransactionsResponse",
    api_key=65,
    versions="0",
    flexible_versions="0+",
    fields=(
        F("throttle_time_ms", INT32),
        F("transaction_states", ARRAY(STRUCT("TransactionState",
                F("error_code", INT16),
                F("transactional_id", STRING),
                F("transaction_state", STRING),
                F("transaction_timeout_ms", INT32),
                F("transaction_start_time_ms", INT64),
                F("producer_id", INT64),
                F("producer_epoch", INT16),
                F("topics", ARRAY(STRUCT("TopicData",
                        F("topic", STRING),
                        F("partitions", ARRAY(INT32)),
                    ))),
            ))),
    ),
)

LIST_TRANSACTIONS_REQUEST = message(
    "ListTransactionsRequest",
    api_key=66,
    versions="0-2",
    flexible_versions="0+",
    fields=(
        F("state_filters", ARRAY(STRING)),
        F("producer_id_filters", ARRAY(INT64)),
        F("duration_filter", INT64, "1+", default=-1),
        F("transactional_id_pattern", STRING, "2+", nullable="2+", default=None),  # KIP-1152
    ),
)

LIST_TRANSACTIONS_RESPONSE = message(
    "ListTransactionsResponse",
    api_key=66,
    versions="0-2",
    flexible_versions="0+",
    fields=(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("unknown_state_filters", ARRAY(STRING)),
        F("transaction_states", ARRAY(STRUCT("TransactionState",
                F("transactional_id", STRING),
                F("producer_id", INT64),
                F("transaction_state", STRING),
            ))),
    ),
)
# fmt: on
