"""FindCoordinator (10): the broker that coordinates a group (key_type 0) or transaction (1).

v1 key_type, throttle and error_message; v3 flexible; v4 batched (KIP-699): `coordinator_keys`
in, one `coordinators` entry per key out (the v0-3 single-key fields are gone); v5 says the client
knows TRANSACTION_ABORTABLE, v6 allows key_type 2 (share groups, KIP-932: with no share
coordinator here, INVALID_REQUEST as Kafka answers without one). Same layout from v4.

Declarations transcribed from Apache Kafka's JSON message definitions (field, type, versions,
nullableVersions, default); see schema.py for the encodings. Field names are Kafka's in snake_case.
"""

from __future__ import annotations

from typing import Any

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
    versions="0-6",
    flexible_versions="3+",
    fields=(
        F("key", STRING, "0-3"),
        F("key_type", INT8, "1+"),
        F("coordinator_keys", ARRAY(STRING), "4+"),
    ),
)

FIND_COORDINATOR_RESPONSE = message(
    "FindCoordinatorResponse",
    api_key=10,
    versions="0-6",
    flexible_versions="3+",
    fields=(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16, "0-3"),
        F("error_message", STRING, "1-3", nullable="1-3"),
        F("node_id", INT32, "0-3"),
        F("host", STRING, "0-3"),
        F("port", INT32, "0-3"),
        F("coordinators", ARRAY(STRUCT("Coordinator",
                F("key", STRING, "4+"),
                F("node_id", INT32, "4+"),
                F("host", STRING, "4+"),
                F("port", INT32, "4+"),
                F("error_code", INT16, "4+"),
                F("error_message", STRING, "4+", nullable="4+"),
            )), "4+"),
    ),
)
# fmt: on


def find_coordinator_request(key: str, key_type: int) -> object:
    """A one-key request valid at every version: v0-3 encode `key`, v4+ `coordinator_keys`."""
    return FIND_COORDINATOR_REQUEST.cls(key=key, key_type=key_type, coordinator_keys=[key])


def single_coordinator(body: Any) -> tuple[int, int, str, int]:
    """(error_code, node_id, host, port) of a one-key response of any version."""
    entries = getattr(body, "coordinators", None)
    one = entries[0] if entries else body
    return one.error_code, one.node_id, one.host, one.port
