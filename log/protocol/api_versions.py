"""ApiVersions (18): the first request on a connection, how a client learns our version ranges.

v0 error_code, api_keys [api_key, min_version, max_version]; v1+ adds throttle_time_ms; v3 is
flexible (client_software_name/version in the request) with three tagged fields: the features
this broker supports (name, min_version, max_version), the finalized features' epoch and the
finalized features (name, max_version_level, min_version_level). v4 is v3's layout; Kafka's
rule (KAFKA-17011): a v3 answer leaves out supported features whose min_version is 0, which
older clients refused. KIP-511: the response header is always
v0, and a request at a version we do not support gets a v0-layout body with error 35
(UNSUPPORTED_VERSION) listing our ranges, so the client can retry lower (see apis.py).

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
API_VERSIONS_REQUEST = message(
    "ApiVersionsRequest",
    api_key=18,
    versions="0-4",
    flexible_versions="3+",
    fields=(
        F("client_software_name", STRING, "3+"),
        F("client_software_version", STRING, "3+"),
    ),
)

API_VERSIONS_RESPONSE = message(
    "ApiVersionsResponse",
    api_key=18,
    versions="0-4",
    flexible_versions="3+",
    fields=(
        F("error_code", INT16),
        F("api_keys", ARRAY(STRUCT("ApiVersion",
                F("api_key", INT16),
                F("min_version", INT16),
                F("max_version", INT16),
            ))),
        F("throttle_time_ms", INT32, "1+"),
        F("supported_features", ARRAY(STRUCT("SupportedFeatureKey",
                F("name", STRING, "3+"),
                F("min_version", INT16, "3+"),
                F("max_version", INT16, "3+"),
            )), "3+", tag=0),
        F("finalized_features_epoch", INT64, "3+", default=-1, tag=1),
        F("finalized_features", ARRAY(STRUCT("FinalizedFeatureKey",
                F("name", STRING, "3+"),
                F("max_version_level", INT16, "3+"),
                F("min_version_level", INT16, "3+"),
            )), "3+", tag=2),
        F("zk_migration_ready", BOOL, "3+", default=False, tag=3),
    ),
)
# fmt: on
