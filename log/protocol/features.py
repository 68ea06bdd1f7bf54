"""UpdateFeatures (57): change the finalized level of cluster features (kafka-features.sh
upgrade/downgrade). Always flexible. v0 says a downgrade is allowed with `allow_downgrade`; v1
replaces it with `upgrade_type` (1 upgrade, 2 safe downgrade, 3 unsafe downgrade) and adds
`validate_only`; v2 answers one top-level error, without the per-feature results.

Declarations transcribed from Apache Kafka's JSON message definitions (field, type, versions,
nullableVersions, default); see schema.py for the encodings. Field names are Kafka's in snake_case.
"""

from __future__ import annotations

from log.protocol.schema import ARRAY, BOOL, INT8, INT16, INT32, STRING, STRUCT, F, message

# fmt: off
UPDATE_FEATURES_REQUEST = message(
    "UpdateFeaturesRequest",
    api_key=57,
    versions="0-2",
    flexible_versions="0+",
    fields=(
        F("timeout_ms", INT32, default=60000),
        F("feature_updates", ARRAY(STRUCT("FeatureUpdateKey",
                F("feature", STRING),
                F("max_version_level", INT16),
                F("allow_downgrade", BOOL, "0"),
                F("upgrade_type", INT8, "1+", default=1),
            ))),
        F("validate_only", BOOL, "1+", default=False),
    ),
)

UPDATE_FEATURES_RESPONSE = message(
    "UpdateFeaturesResponse",
    api_key=57,
    versions="0-2",
    flexible_versions="0+",
    fields=(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+"),
        F("results", ARRAY(STRUCT("UpdatableFeatureResult",
                F("feature", STRING),
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+"),
            )), "0-1"),
    ),
)
# fmt: on
