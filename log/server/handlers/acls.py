"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31): ACL bindings in the metadata log
(quorum/acls.py decides creations and deletions; this broker forwards them to the controller).

Describe needs DESCRIBE on the CLUSTER, create and delete ALTER (Kafka's AclApis); a caller
without it gets CLUSTER_AUTHORIZATION_FAILED for the request. Without an authorizer configured
the three answer SECURITY_DISABLED, as Kafka does. Describe reads this broker's image and groups
the matching bindings by resource, in Kafka's response shape; a filter with UNKNOWN values is
INVALID_REQUEST.
"""

from __future__ import annotations

import uuid
from typing import Any

from log.common.acl import AclBinding, AclBindingFilter, AclOperation
from log.common.errors import ErrorCode
from log.protocol.acls import CREATE_ACLS_RESPONSE, DELETE_ACLS_RESPONSE, DESCRIBE_ACLS_RESPONSE
from log.protocol.connection import Request
from log.server.authorization import allowed_cluster
from log.server.broker_context import BrokerContext
from quorum.acls import CreateAclsRequest, DeleteAclsRequest, binding_of

D: Any = DESCRIBE_ACLS_RESPONSE.cls  # made at run time by schema.py: untyped
C: Any = CREATE_ACLS_RESPONSE.cls  # made at run time by schema.py: untyped
X: Any = DELETE_ACLS_RESPONSE.cls  # made at run time by schema.py: untyped
_DISABLED = "No Authorizer is configured."
# How long a change waits for this broker's image to show it, so that the caller's next
# DescribeAcls (and authorization) on this broker sees it; the change is committed either way.
IMAGE_WAIT_MS = 5_000


def _bindings(image: Any) -> set[AclBinding]:
    return {binding_of(record) for record in image.acls.values()}


def _filter(item: Any, prefix: str) -> AclBindingFilter:
    return AclBindingFilter(
        getattr(item, f"resource_type{prefix}"), getattr(item, f"resource_name{prefix}"),
        getattr(item, f"pattern_type{prefix}"), item.principal_filter, item.host_filter,
        item.operation, item.permission_type,
    )  # fmt: skip


async def handle_describe_acls(ctx: BrokerContext, request: Request) -> object:
    def refused(code: ErrorCode, message: str) -> object:
        return D(throttle_time_ms=0, error_code=code, error_message=message, resources=[])

    if not ctx.authorization.enabled:
        return refused(ErrorCode.SECURITY_DISABLED, _DISABLED)
    if not allowed_cluster(ctx, request, AclOperation.DESCRIBE):
        return refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster DESCRIBE refused")
    acl_filter = _filter(request.body, "_filter")
    reason = acl_filter.invalid_reason()
    if reason is not None:
        return refused(ErrorCode.INVALID_REQUEST, reason)
    by_resource: dict[tuple[int, str, int], list[AclBinding]] = {}
    for record in ctx.image.acls.values():
        binding = binding_of(record)
        if acl_filter.matches(binding):
            key = (binding.resource_type, binding.resource_name, binding.pattern_type)
            by_resource.setdefault(key, []).append(binding)
    resources = [
        D.DescribeAclsResource(
            resource_type=key[0], resource_name=key[1], pattern_type=key[2],
            acls=[D.DescribeAclsResource.AclDescription(
                principal=b.principal, host=b.host, operation=b.operation,
                permission_type=b.permission_type,
            ) for b in sorted(bindings, key=repr)],
        )
        for key, bindings in sorted(by_resource.items())
    ]  # fmt: skip
    return D(throttle_time_ms=0, error_code=0, error_message=None, resources=resources)


async def handle_create_acls(ctx: BrokerContext, request: Request) -> object:
    creations = request.body.creations

    def refused(code: ErrorCode, message: str) -> object:
        result = C.AclCreationResult(error_code=code, error_message=message)
        return C(throttle_time_ms=0, results=[result] * len(creations))

    if not ctx.authorization.enabled:
        return refused(ErrorCode.SECURITY_DISABLED, _DISABLED)
    if not allowed_cluster(ctx, request, AclOperation.ALTER):
        return refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster ALTER refused")
    bindings = tuple(
        AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal,
                   c.host, c.operation, c.permission_type)
        for c in creations
    )  # fmt: skip
    response = await ctx.controller.create_acls(
        CreateAclsRequest(bindings, tuple(uuid.uuid4() for _ in bindings))
    )
    created = {b for b, r in zip(bindings, response.results, strict=False) if r.error_code == 0}
    await ctx.wait_until(lambda image: created <= _bindings(image), IMAGE_WAIT_MS)
    return C(throttle_time_ms=0, results=[
        C.AclCreationResult(error_code=r.error_code, error_message=r.error_message)
        for r in response.results
    ])  # fmt: skip


async def handle_delete_acls(ctx: BrokerContext, request: Request) -> object:
    filters = request.body.filters

    def refused(code: ErrorCode, message: str) -> object:
        result = X.DeleteAclsFilterResult(error_code=code, error_message=message,
                                          matching_acls=[])  # fmt: skip
        return X(throttle_time_ms=0, filter_results=[result] * len(filters))

    if not ctx.authorization.enabled:
        return refused(ErrorCode.SECURITY_DISABLED, _DISABLED)
    if not allowed_cluster(ctx, request, AclOperation.ALTER):
        return refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster ALTER refused")
    response = await ctx.controller.delete_acls(
        DeleteAclsRequest(tuple(_filter(f, "_filter") for f in filters))
    )
    deleted = {b for r in response.results for b in r.matching_acls}
    await ctx.wait_until(lambda image: not deleted & _bindings(image), IMAGE_WAIT_MS)
    matching = X.DeleteAclsFilterResult.DeleteAclsMatchingAcl
    return X(throttle_time_ms=0, filter_results=[
        X.DeleteAclsFilterResult(
            error_code=r.error_code, error_message=r.error_message,
            matching_acls=[matching(
                error_code=0, error_message=None, resource_type=b.resource_type,
                resource_name=b.resource_name, pattern_type=b.pattern_type,
                principal=b.principal, host=b.host, operation=b.operation,
                permission_type=b.permission_type,
            ) for b in r.matching_acls],
        )
        for r in response.results
    ])  # fmt: skip
