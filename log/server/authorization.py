"""Authorization of a request: the principal and host of its connection, asked of the
authorizer (log/security/authorizer.py) built from the current metadata image's ACLs.

Handlers call `allowed(ctx, request, operation, resource_type, name)` for per-resource checks
(and answer Kafka's *_AUTHORIZATION_FAILED for that resource) or `require_cluster(ctx, request,
operation)` for a request that is about the cluster (CLUSTER_AUTHORIZATION_FAILED for the whole
request). With no `authorizer.class.name` everything is allowed. Every denial is counted (the
`authorization_denials` metric). The Authorizer is rebuilt only when the image's ACLs change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from log.common.acl import CLUSTER_NAME, AclBinding, AclOperation, ResourceType
from log.common.errors import ErrorCode, KafkaError
from log.protocol.connection import Request
from log.security.authorizer import Authorizer, AuthorizerConfig
from log.security.principal import ANONYMOUS

if TYPE_CHECKING:
    from log.server.broker_context import BrokerContext


class Authorization:
    def __init__(self, props: Mapping[str, object]) -> None:
        self.config = AuthorizerConfig.from_props(props)
        self.denied_count = 0
        self._acls: object = None
        self._authorizer = Authorizer(self.config, ())

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    def authorizer(self, acls: Mapping[Any, Any]) -> Authorizer:
        """The authorizer for the image whose ACL map is `acls` (AccessControlEntryRecords)."""
        if acls is not self._acls:
            bindings = [_binding(record) for record in acls.values()]
            self._authorizer = Authorizer(self.config, bindings)
            self._acls = acls
        return self._authorizer


def _binding(record: Any) -> AclBinding:
    return AclBinding(record.resource_type, record.resource_name, record.pattern_type,
                      record.principal, record.host, record.operation,
                      record.permission_type)  # fmt: skip


def caller(request: Request) -> tuple[str, str]:
    """(principal, host) of the connection `request` came on."""
    state = request.connection_state
    principal = state.get("principal") or ANONYMOUS
    return str(principal), str(state.get("host", ""))


def allowed(
    ctx: BrokerContext,
    request: Request,
    operation: int,
    resource_type: int,
    name: str,
    *,
    count: bool = True,
) -> bool:
    """`count=False` for filtering (a listing that leaves out what the caller may not see is
    not a refusal: Kafka's logIfDenied=false)."""
    authorization = ctx.authorization
    if not authorization.enabled:
        return True
    principal, host = caller(request)
    authorizer = authorization.authorizer(ctx.image.acls)
    if authorizer.authorize(principal, host, operation, resource_type, name):
        return True
    authorization.denied_count += count
    return False


def allowed_any(ctx: BrokerContext, request: Request, operation: int, resource_type: int) -> bool:
    """Whether `operation` is allowed on some resource of the type (Kafka's
    authorizeByResourceType)."""
    authorization = ctx.authorization
    if not authorization.enabled:
        return True
    principal, host = caller(request)
    if authorization.authorizer(ctx.image.acls).authorize_any(
        principal, host, operation, resource_type
    ):
        return True
    authorization.denied_count += 1
    return False


def require(
    ctx: BrokerContext,
    request: Request,
    operation: int,
    resource_type: int,
    name: str,
    error_code: ErrorCode,
) -> None:
    """Raise `error_code` for the whole request (broker.py answers it through
    error_response_body) unless `operation` on the resource is allowed."""
    if not allowed(ctx, request, operation, resource_type, name):
        raise KafkaError(
            f"{caller(request)[0]} may not {AclOperation(operation).name} "
            f"{ResourceType(resource_type).name} {name}",
            error_code=error_code,
        )


def require_group(ctx: BrokerContext, request: Request, operation: int, group_id: str) -> None:
    require(ctx, request, operation, ResourceType.GROUP, group_id,
            ErrorCode.GROUP_AUTHORIZATION_FAILED)  # fmt: skip


# The operations each resource type supports (Kafka's AclEntry.supportedOperations), reported
# as a bit field (bit = the operation's code) by authorized_operations (KIP-430).
SUPPORTED_OPERATIONS: dict[int, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                         AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                           AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                           AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
}  # fmt: skip


def authorized_operations(
    ctx: BrokerContext, request: Request, resource_type: int, name: str
) -> int:
    """KIP-430's bit field: 1 << operation for each supported operation the caller may do on
    the resource (all of them without an authorizer, as Kafka answers)."""
    bits = 0
    for operation in SUPPORTED_OPERATIONS[resource_type]:
        if allowed(ctx, request, operation, resource_type, name, count=False):
            bits |= 1 << operation
    return bits


def allowed_cluster(
    ctx: BrokerContext, request: Request, operation: int, *, count: bool = True
) -> bool:
    return allowed(ctx, request, operation, ResourceType.CLUSTER, CLUSTER_NAME, count=count)


def require_cluster(ctx: BrokerContext, request: Request, operation: int) -> None:
    """Raise CLUSTER_AUTHORIZATION_FAILED for the whole request unless `operation` on the
    CLUSTER is allowed."""
    if not allowed_cluster(ctx, request, operation):
        raise KafkaError(
            f"{caller(request)[0]} may not {AclOperation(operation).name} the cluster",
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        )
