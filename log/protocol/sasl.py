"""SaslHandshake (17) and SaslAuthenticate (36): SASL authentication of a connection.

SaslHandshake v0-1 (non-flexible): the client names its mechanism; v1 means the SASL tokens
follow inside SaslAuthenticate requests (v0's raw, headerless tokens are not spoken here).
SaslAuthenticate v0-2 (v2 flexible); v1+ answers the session lifetime (KIP-368).

Declarations transcribed from Apache Kafka's JSON message definitions (field, type, versions,
nullableVersions, default); see schema.py for the encodings. Field names are Kafka's in snake_case.
"""

from __future__ import annotations

from log.protocol.schema import ARRAY, BYTES, INT16, INT64, STRING, F, message

# fmt: off
SASL_HANDSHAKE_REQUEST = message(
    "SaslHandshakeRequest",
    api_key=17,
    versions="0-1",
    flexible_versions="none",
    fields=(
        F("mechanism", STRING),
    ),
)

SASL_HANDSHAKE_RESPONSE = message(
    "SaslHandshakeResponse",
    api_key=17,
    versions="0-1",
    flexible_versions="none",
    fields=(
        F("error_code", INT16),
        F("mechanisms", ARRAY(STRING)),
    ),
)

SASL_AUTHENTICATE_REQUEST = message(
    "SaslAuthenticateRequest",
    api_key=36,
    versions="0-2",
    flexible_versions="2+",
    fields=(
        F("auth_bytes", BYTES),
    ),
)

SASL_AUTHENTICATE_RESPONSE = message(
    "SaslAuthenticateResponse",
    api_key=36,
    versions="0-2",
    flexible_versions="2+",
    fields=(
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+"),
        F("auth_bytes", BYTES),
        F("session_lifetime_ms", INT64, "1+", default=0),
    ),
)
# fmt: on
