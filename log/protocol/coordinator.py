"""FindCoordinator (10): the broker that coordinates a group (key_type 0) or transaction (1).

v1 key_type, throttle and error_message; v3+ flexible (not declared).

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
FIND_COORDINATOR_REQUEST = message(
    "FindCoordinatorRequest",
    api_key=10,
    versions="0-2",
    flexible_versions="3+",
    fields=(
        F("key", STRING),
        F("key_type", INT8, "1+"),
    ),
)

FIND_COORDINATOR_RESPONSE = message(
    "FindCoordinatorResponse",
    api_key=10,
    versions="0-2",
    flexible_versions="3+",
    fields=(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
        F("error_message", STRING, "1+", nullable="1+"),
        F("node_id", INT32),
        F("host", STRING),
        F("port", INT32),
    ),
)
# fmt: on
