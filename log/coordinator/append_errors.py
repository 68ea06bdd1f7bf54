"""What a coordinator answers when appending to its internal topic failed (Kafka's
GroupMetadataManager and TransactionStateManager map the log's errors the same way): the
partition moved or its log is offline -> NOT_COORDINATOR (the client finds the new one); not
enough replicas, a timeout, an unknown partition -> COORDINATOR_NOT_AVAILABLE (retry later).
Each coordinator adds what is its own (an offset commit too large, ...)."""

from __future__ import annotations

from collections.abc import Mapping

from log.common.errors import ErrorCode

COORDINATOR_APPEND_ERRORS: Mapping[ErrorCode, ErrorCode] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}
