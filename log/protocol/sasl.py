"""SaslHandshake (17) and SaslAuthenticate (36): SASL authentication of a connection.

SaslHandshake v0-1 (non-flexible): the client names its mechanism; v1 means the SASL tokens
follow inside SaslAuthenticate requests, v0 that they follow as raw, headerless size-prefixed
frames (log/protocol/connection.py's SaslToken).
SaslAuthenticate v0-2 (v2 flexible); v1+ answers the session lifetime (KIP-368).

Declarations transcribed from Apache Kafka's JSON message definitions (field, type, versions,
nullableVersions, default); see schema.py for the encodings. Field names are Kafka's in snake_case.
"""

from __future__ import annotations

from log.protocol.schema import ARRAY, BYTES, INT8, INT16, INT32, INT64, STRING, STRUCT, F, message

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

# DescribeUserScramCredentials (50) / AlterUserScramCredentials (51), v0 flexible: SCRAM
# credentials in the metadata log (quorum/scram_credentials.py). Alter carries the salted
# password, never the password; the broker derives the stored and server keys from it.
# fmt: off
DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST = message(
    "DescribeUserScramCredentialsRequest",
    api_key=50,
    versions="0",
    flexible_versions="0+",
    fields=(
        F("users", ARRAY(STRUCT("UserName", F("name", STRING))), nullable="0+"),
    ),
)

DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE = message(
    "DescribeUserScramCredentialsResponse",
    api_key=50,
    versions="0",
    flexible_versions="0+",
    fields=(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+"),
        F("results", ARRAY(STRUCT("DescribeUserScramCredentialsResult",
            F("user", STRING),
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+"),
            F("credential_infos", ARRAY(STRUCT("CredentialInfo",
                F("mechanism", INT8),
                F("iterations", INT32),
            ))),
        ))),
    ),
)

ALTER_USER_SCRAM_CREDENTIALS_REQUEST = message(
    "AlterUserScramCredentialsRequest",
    api_key=51,
    versions="0",
    flexible_versions="0+",
    fields=(
        F("deletions", ARRAY(STRUCT("ScramCredentialDeletion",
            F("name", STRING),
            F("mechanism", INT8),
        ))),
        F("upsertions", ARRAY(STRUCT("ScramCredentialUpsertion",
            F("name", STRING),
            F("mechanism", INT8),
            F("iterations", INT32),
            F("salt", BYTES),
            F("salted_password", BYTES),
        ))),
    ),
)

ALTER_USER_SCRAM_CREDENTIALS_RESPONSE = message(
    "AlterUserScramCredentialsResponse",
    api_key=51,
    versions="0",
    flexible_versions="0+",
    fields=(
        F("throttle_time_ms", INT32),
        F("results", ARRAY(STRUCT("AlterUserScramCredentialsResult",
            F("user", STRING),
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+"),
        ))),
    ),
)
# fmt: on
