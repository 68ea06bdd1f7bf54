"""DescribeProducers (61, v0): the producers a partition replica knows (kafka-transactions.sh
describe-producers, kafka-python's describe_producers).

Declarations transcribed from Apache Kafka's JSON message definitions (field, type, versions,
nullableVersions, default); see schema.py for the encodings. Field names are Kafka's in snake_case.
"""

from __future__ import annotations

from log.protocol.schema import ARRAY, INT16, INT32, INT64, STRING, STRUCT, F, message

# fmt: off
DESCRIBE_PRODUCERS_REQUEST = message(
    "DescribeProducersRequest",
    api_key=61,
    versions="0",
    flexible_versions="0+",
    fields=(
        F("topics", ARRAY(STRUCT("TopicRequest",
                F("name", STRING),
                F("partition_indexes", ARRAY(INT32)),
            ))),
    ),
)

DESCRIBE_PRODUCERS_RESPONSE = message(
    "DescribeProducersResponse",
    api_key=61,
    versions="0",
    flexible_versions="0+",
    fields=(
        F("throttle_time_ms", INT32),
        F("topics", ARRAY(STRUCT("TopicResponse",
                F("name", STRING),
                F("partitions", ARRAY(STRUCT("PartitionResponse",
                        F("partition_index", INT32),
                        F("error_code", INT16),
                        F("error_message", STRING, nullable="0+", default=None),
                        F("active_producers", ARRAY(STRUCT("ProducerState",
                                F("producer_id", INT64),
                                F("producer_epoch", INT32),
                                F("last_sequence", INT32, default=-1),
                                F("last_timestamp", INT64, default=-1),
                                F("coordinator_epoch", INT32),
                                F("current_txn_start_offset", INT64, default=-1),
                            ))),
                    ))),
            ))),
    ),
)
# fmt: on
