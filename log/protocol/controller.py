"""Broker-to-controller APIs (KRaft): BrokerRegistration (62), BrokerHeartbeat (63),
AllocateProducerIds (67). Flexible-only (v0 is flexible).

Declared for our brokers and controllers to talk to each other with Kafka's own messages;
never advertised to clients. Tagged fields of later versions (OfflineLogDirs,
ZkMigrationReady...) are skipped on read.

Declarations transcribed from Apache Kafka's JSON message definitions (field, type, versions,
nullableVersions, default); see schema.py for the encodings. Field names are Kafka's in snake_case.
"""

from __future__ import annotations

from log.protocol.schema import (
    ARRAY,
    BOOL,
    INT16,
    INT32,
    INT64,
    STRING,
    STRUCT,
    UINT16,
    UUID,
    F,
    message,
)

# fmt: off
BROKER_REGISTRATION_REQUEST = message(
    "BrokerRegistrationRequest",
    api_key=62,
    versions="0-3",
    flexible_versions="0+",
    fields=(
        F("broker_id", INT32),
        F("cluster_id", STRING),
        F("incarnation_id", UUID),
        F("listeners", ARRAY(STRUCT("Listener",
                F("name", STRING),
                F("host", STRING),
                F("port", UINT16),
                F("security_protocol", INT16),
            ))),
        F("features", ARRAY(STRUCT("Feature",
                F("name", STRING),
                F("min_supported_version", INT16),
                F("max_supported_version", INT16),
            ))),
        F("rack", STRING, nullable="0+"),
        F("is_migrating_zk_broker", BOOL, "1+", default=False),
        F("log_dirs", ARRAY(UUID), "2+", default=()),
        # KIP-966: the broker epoch of the last clean shutdown (-1: unclean or none).
        F("previous_broker_epoch", INT64, "3+", default=-1),
    ),
)

BROKER_REGISTRATION_RESPONSE = message(
    "BrokerRegistrationResponse",
    api_key=62,
    versions="0-3",
    flexible_versions="0+",
    fields=(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("broker_epoch", INT64, default=-1),
    ),
)

BROKER_HEARTBEAT_REQUEST = message(
    "BrokerHeartbeatRequest",
    api_key=63,
    versions="0-0",
    flexible_versions="0+",
    fields=(
        F("broker_id", INT32),
        F("broker_epoch", INT64, default=-1),
        F("current_metadata_offset", INT64),
        F("want_fence", BOOL),
        F("want_shut_down", BOOL),
    ),
)

BROKER_HEARTBEAT_RESPONSE = message(
    "BrokerHeartbeatResponse",
    api_key=63,
    versions="0-0",
    flexible_versions="0+",
    fields=(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("is_caught_up", BOOL, default=False),
        F("is_fenced", BOOL, default=True),
        F("should_shut_down", BOOL),
    ),
)

ALLOCATE_PRODUCER_IDS_REQUEST = message(
    "AllocateProducerIdsRequest",
    api_key=67,
    versions="0-0",
    flexible_versions="0+",
    fields=(
        F("broker_id", INT32),
        F("broker_epoch", INT64, default=-1),
    ),
)

ALLOCATE_PRODUCER_IDS_RESPONSE = message(
    "AllocateProducerIdsResponse",
    api_key=67,
    versions="0-0",
    flexible_versions="0+",
    fields=(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("producer_id_start", INT64),
        F("producer_id_len", INT32),
    ),
)
# fmt: on
