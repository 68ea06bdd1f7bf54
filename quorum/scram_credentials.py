"""AlterUserScramCredentials, decided on the active controller (Kafka's ScramControlManager):
requests in, UserScramCredentialsRecord / RemoveUserScramCredentialsRecord out.

The broker that took the Kafka request has already turned each upsertion's salted password into
the stored key and server key (log/security/scram.py), so neither the password nor the salted
password reaches the metadata log. Checks, per user, in Kafka's order and with its codes:
a user named twice in one request -> DUPLICATE_RESOURCE; an empty name or iterations outside
4096..16384 -> UNACCEPTABLE_CREDENTIAL; an unknown mechanism -> UNSUPPORTED_SASL_MECHANISM;
deleting a credential that does not exist -> RESOURCE_NOT_FOUND. A user's operations commit all
together or not at all. Byte fields travel base64-encoded (controller_codec speaks JSON).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from log.common.errors import ErrorCode
from quorum.image import SCRAM_MECHANISM_TYPES, MetadataImage
from quorum.records import (
    MetadataRecord,
    RemoveUserScramCredentialsRecord,
    UserScramCredentialsRecord,
)

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True)
class ScramCredentialDeletion:
    name: str
    mechanism: int


@dataclass(frozen=True)
class ScramCredentialUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt_b64: str
    stored_key_b64: str
    server_key_b64: str


@dataclass(frozen=True)
class AlterUserScramCredentialsRequest:
    deletions: tuple[ScramCredentialDeletion, ...]
    upsertions: tuple[ScramCredentialUpsertion, ...]


@dataclass(frozen=True)
class AlterUserScramCredentialsResult:
    user: str
    error_code: ErrorCode
    error_message: str | None = None


@dataclass(frozen=True)
class AlterUserScramCredentialsResponse:
    results: tuple[AlterUserScramCredentialsResult, ...]


def _decode(value: str) -> bytes | None:
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        return None


def _check(
    image: MetadataImage, operation: ScramCredentialDeletion | ScramCredentialUpsertion
) -> tuple[ErrorCode, str] | MetadataRecord:
    if not operation.name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if operation.mechanism not in SCRAM_MECHANISM_TYPES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if isinstance(operation, ScramCredentialDeletion):
        if (operation.name, operation.mechanism) not in image.scram_credentials:
            return (
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
        return RemoveUserScramCredentialsRecord(operation.name, operation.mechanism)
    if not MIN_ITERATIONS <= operation.iterations <= MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, (
            f"Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}"
        )
    salt = _decode(operation.salt_b64)
    stored_key = _decode(operation.stored_key_b64)
    server_key = _decode(operation.server_key_b64)
    if not salt or not stored_key or not server_key:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and keys must not be empty"
    return UserScramCredentialsRecord(operation.name, operation.mechanism, salt, stored_key,
                                      server_key, operation.iterations)  # fmt: skip


def alter_user_scram_credentials(
    image: MetadataImage, request: AlterUserScramCredentialsRequest
) -> tuple[list[MetadataRecord], AlterUserScramCredentialsResponse]:
    operations: list[ScramCredentialDeletion | ScramCredentialUpsertion] = [
        *request.deletions,
        *request.upsertions,
    ]
    records: list[MetadataRecord] = []
    results: list[AlterUserScramCredentialsResult] = []
    for user in dict.fromkeys(op.name for op in operations):
        mechanisms = [op.mechanism for op in operations if op.name == user]
        if len(set(mechanisms)) != len(mechanisms):  # (user, mechanism) named twice
            results.append(AlterUserScramCredentialsResult(
                user, ErrorCode.DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request",
            ))  # fmt: skip
            continue
        user_records: list[MetadataRecord] = []
        failure: tuple[ErrorCode, str] | None = None
        for operation in (op for op in operations if op.name == user):
            checked = _check(image, operation)
            if isinstance(checked, tuple):
                failure = checked
                break
            user_records.append(checked)
        if failure is not None:
            results.append(AlterUserScramCredentialsResult(user, *failure))
        else:
            records.extend(user_records)
            results.append(AlterUserScramCredentialsResult(user, ErrorCode.NONE))
    return records, AlterUserScramCredentialsResponse(tuple(results))
