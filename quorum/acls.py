"""CreateAcls and DeleteAcls, decided on the active controller (Kafka's AclControlManager):
requests in, AccessControlEntryRecord / RemoveAccessControlEntryRecord out.

Create: each binding is checked on its own (log/common/acl.py's invalid_binding_reason ->
INVALID_REQUEST); a binding equal to one that exists succeeds without a new record, and so does
one named twice in a request (Kafka's rule: creating an ACL is idempotent). Each new binding's id
is drawn by the broker that took the request, so this decision stays deterministic. Delete: each
filter (INVALID_REQUEST if it has UNKNOWN values) removes every binding it matches and answers
them; a binding matched by two filters is removed once and reported by the first.
The broker has already checked that the caller may ALTER the CLUSTER.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from log.common.acl import AclBinding, AclBindingFilter, invalid_binding_reason
from log.common.errors import ErrorCode
from quorum.image import MetadataImage
from quorum.records import (
    AccessControlEntryRecord,
    MetadataRecord,
    RemoveAccessControlEntryRecord,
)

MAX_ACLS = 100_000  # Kafka's AclControlManager refuses more ACLs than this (MAX_ACLS_PER_BROKER)


@dataclass(frozen=True)
class CreateAclsRequest:
    creations: tuple[AclBinding, ...]
    ids: tuple[uuid.UUID, ...]  # one per creation, drawn by the broker


@dataclass(frozen=True)
class AclCreationResult:
    error_code: ErrorCode
    error_message: str | None = None


@dataclass(frozen=True)
class CreateAclsResponse:
    results: tuple[AclCreationResult, ...]


@dataclass(frozen=True)
class DeleteAclsRequest:
    filters: tuple[AclBindingFilter, ...]


@dataclass(frozen=True)
class DeleteAclsFilterResult:
    error_code: ErrorCode
    error_message: str | None
    matching_acls: tuple[AclBinding, ...]


@dataclass(frozen=True)
class DeleteAclsResponse:
    results: tuple[DeleteAclsFilterResult, ...]


def binding_of(record: AccessControlEntryRecord) -> AclBinding:
    return AclBinding(record.resource_type, record.resource_name, record.pattern_type,
                      record.principal, record.host, record.operation,
                      record.permission_type)  # fmt: skip


def create_acls(
    image: MetadataImage, request: CreateAclsRequest
) -> tuple[list[MetadataRecord], CreateAclsResponse]:
    if len(request.ids) != len(request.creations):
        refused = AclCreationResult(ErrorCode.INVALID_REQUEST, "one id per ACL")
        return [], CreateAclsResponse((refused,) * len(request.creations))
    existing = {binding_of(record) for record in image.acls.values()}
    records: list[MetadataRecord] = []
    results: list[AclCreationResult] = []
    for binding, acl_id in zip(request.creations, request.ids, strict=True):
        reason = invalid_binding_reason(binding)
        if reason is not None:
            results.append(AclCreationResult(ErrorCode.INVALID_REQUEST, reason))
            continue
        if binding in existing:
            results.append(AclCreationResult(ErrorCode.NONE))
            continue
        if len(existing) >= MAX_ACLS or acl_id in image.acls:
            results.append(AclCreationResult(
                ErrorCode.INVALID_REQUEST,
                f"Cannot create more than {MAX_ACLS} ACLs" if len(existing) >= MAX_ACLS
                else "ACL id already in use",
            ))  # fmt: skip
            continue
        existing.add(binding)
        records.append(AccessControlEntryRecord(acl_id, binding.resource_type,
                                                binding.resource_name, binding.pattern_type,
                                                binding.principal, binding.host,
                                                binding.operation,
                                                binding.permission_type))  # fmt: skip
        results.append(AclCreationResult(ErrorCode.NONE))
    return records, CreateAclsResponse(tuple(results))


def delete_acls(
    image: MetadataImage, request: DeleteAclsRequest
) -> tuple[list[MetadataRecord], DeleteAclsResponse]:
    removed: set[uuid.UUID] = set()
    records: list[MetadataRecord] = []
    results: list[DeleteAclsFilterResult] = []
    for acl_filter in request.filters:
        reason = acl_filter.invalid_reason()
        if reason is not None:
            results.append(DeleteAclsFilterResult(ErrorCode.INVALID_REQUEST, reason, ()))
            continue
        matching: list[AclBinding] = []
        for acl_id in sorted(image.acls):
            binding = binding_of(image.acls[acl_id])
            if acl_id not in removed and acl_filter.matches(binding):
                removed.add(acl_id)
                records.append(RemoveAccessControlEntryRecord(acl_id))
                matching.append(binding)
        results.append(DeleteAclsFilterResult(ErrorCode.NONE, None, tuple(matching)))
    return records, DeleteAclsResponse(tuple(results))
