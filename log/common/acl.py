"""ACL vocabulary shared by every layer: Kafka's resource types, pattern types, operations and
permission types (their wire codes, `org.apache.kafka.common.acl` / `resource`), an ACL binding
and the filters CreateAcls / DescribeAcls / DeleteAcls speak.

A binding says: `principal` from `host` is ALLOWed / DENYed `operation` on the resources named by
(`resource_type`, `pattern_type`, `resource_name`). LITERAL names one resource, or every resource
of its type when the name is `*`; PREFIXED names every resource whose name starts with it.
A filter matches bindings; its ANY values (and None strings) match everything, and the MATCH
pattern type matches the bindings that would apply to one concrete resource name.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15  # KIP-939, on a TransactionalId


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# authorizer.class.name values that switch on log/security/authorizer.py (Kafka's KRaft
# authorizer); any other non-empty value is refused at start-up rather than silently ignored.
STANDARD_AUTHORIZER_CLASSES = frozenset({
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
})  # fmt: skip
WILDCARD = "*"  # a LITERAL resource name or a host that matches all
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name (Kafka's)

# Types a binding (not a filter) may carry: concrete values only.
BINDING_RESOURCE_TYPES = frozenset(ResourceType) - {ResourceType.UNKNOWN, ResourceType.ANY}
BINDING_PATTERN_TYPES = frozenset({PatternType.LITERAL, PatternType.PREFIXED})
BINDING_OPERATIONS = frozenset(AclOperation) - {AclOperation.UNKNOWN, AclOperation.ANY}
BINDING_PERMISSIONS = frozenset({AclPermissionType.DENY, AclPermissionType.ALLOW})


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str  # "User:alice", "User:*"
    host: str  # an IP address or "*"
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    resource_type: int = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: int = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = AclOperation.ANY
    permission_type: int = AclPermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, binding.resource_type):
            return False
        if not self._matches_pattern(binding):
            return False
        return (
            self.principal in (None, binding.principal)
            and self.host in (None, binding.host)
            and self.operation in (AclOperation.ANY, binding.operation)
            and self.permission_type in (AclPermissionType.ANY, binding.permission_type)
        )

    def _matches_pattern(self, binding: AclBinding) -> bool:
        name = self.resource_name
        if self.pattern_type == PatternType.MATCH:
            if name is None:
                return True
            if binding.pattern_type == PatternType.LITERAL:
                return binding.resource_name in (name, WILDCARD)
            return name.startswith(binding.resource_name)
        if self.pattern_type not in (PatternType.ANY, binding.pattern_type):
            return False
        return name is None or name == binding.resource_name

    def invalid_reason(self) -> str | None:
        """Why this filter cannot be used (Kafka's INVALID_REQUEST), or None."""
        if self.resource_type == ResourceType.UNKNOWN or self.resource_type not in frozenset(
            ResourceType
        ):
            return "Filter has an unknown resource type"
        if self.pattern_type == PatternType.UNKNOWN or self.pattern_type not in frozenset(
            PatternType
        ):
            return "Filter has an unknown pattern type"
        if self.operation == AclOperation.UNKNOWN or self.operation not in frozenset(AclOperation):
            return "Filter has an unknown operation"
        if (
            self.permission_type == AclPermissionType.UNKNOWN
            or self.permission_type not in frozenset(AclPermissionType)
        ):
            return "Filter has an unknown permission type"
        return None


def invalid_binding_reason(binding: AclBinding) -> str | None:
    """Why `binding` cannot be created (Kafka's INVALID_REQUEST), or None (AclControlManager's
    validateNewAcl)."""
    if binding.resource_type not in BINDING_RESOURCE_TYPES:
        return "Invalid resourceType " + str(binding.resource_type)
    if binding.pattern_type not in BINDING_PATTERN_TYPES:
        return "Invalid patternType " + str(binding.pattern_type)
    if binding.operation not in BINDING_OPERATIONS:
        return "Invalid operation " + str(binding.operation)
    if binding.permission_type not in BINDING_PERMISSIONS:
        return "Invalid permissionType " + str(binding.permission_type)
    if not binding.resource_name:
        return "Resource name should not be empty"
    if binding.resource_type == ResourceType.CLUSTER and binding.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    principal_type, colon, principal_name = binding.principal.partition(":")
    if not colon or not principal_type or not principal_name:
        return f"Could not parse principal from `{binding.principal}` (no colon is present " \
            "separating the principal type from the principal name)"  # fmt: skip
    if not binding.host:
        return "Host should not be empty"
    return None
