"""StandardAuthorizer: may this principal, from this host, do this operation on this resource?

Kafka's StandardAuthorizer semantics, decided from the ACL bindings of the metadata image:
1. a super user (`super.users`, `User:admin;User:broker`) may do anything, DENY ACLs included;
2. the bindings that apply to the resource are the LITERAL ones with its name, the LITERAL `*`
   ones and the PREFIXED ones whose name starts the resource's name;
3. of those, a binding counts when its principal is the caller's or `User:*`, its host is the
   caller's or `*`, and its operation is the asked one or ALL. An ALLOW binding also grants the
   implied operations: DESCRIBE from READ/WRITE/DELETE/ALTER, DESCRIBE_CONFIGS from
   ALTER_CONFIGS (a DENY binding never implies);
4. any counting DENY -> denied; else any counting ALLOW -> allowed; else, if no binding at all
   applies to the resource (whoever it names), `allow.everyone.if.no.acl.found` decides (default
   false); otherwise denied.
Plain synchronous code: the broker builds one Authorizer per metadata image it sees.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from log.common.acl import (
    STANDARD_AUTHORIZER_CLASSES,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
)

AUTHORIZER_CLASS_KEY = "authorizer.class.name"
SUPER_USERS_KEY = "super.users"
ALLOW_EVERYONE_KEY = "allow.everyone.if.no.acl.found"

_IMPLIES_DESCRIBE = frozenset({
    AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
    AclOperation.ALTER,
})  # fmt: skip
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


class AuthorizerConfigError(ValueError):
    """authorizer.class.name names an authorizer this broker does not have."""


@dataclass(frozen=True)
class AuthorizerConfig:
    enabled: bool
    super_users: frozenset[str]
    allow_everyone_if_no_acl_found: bool

    @classmethod
    def from_props(cls, props: Mapping[str, object]) -> AuthorizerConfig:
        class_name = str(props.get(AUTHORIZER_CLASS_KEY, "")).strip()
        if class_name and class_name not in STANDARD_AUTHORIZER_CLASSES:
            raise AuthorizerConfigError(
                f"{AUTHORIZER_CLASS_KEY}={class_name!r}: only "
                f"{', '.join(sorted(STANDARD_AUTHORIZER_CLASSES))} is supported"
            )
        super_users = frozenset(
            user.strip() for user in str(props.get(SUPER_USERS_KEY, "")).split(";") if user.strip()
        )
        allow_everyone = str(props.get(ALLOW_EVERYONE_KEY, False)).strip().lower() == "true"
        return cls(bool(class_name), super_users, allow_everyone)


def _counts(binding: AclBinding, principal: str, host: str, operation: int) -> bool:
    if binding.principal not in (principal, WILDCARD_PRINCIPAL):
        return False
    if binding.host not in (WILDCARD, host):
        return False
    if binding.operation == AclOperation.ALL or binding.operation == operation:
        return True
    if binding.permission_type != AclPermissionType.ALLOW:
        return False  # DENY READ does not deny DESCRIBE
    if operation == AclOperation.DESCRIBE:
        return binding.operation in _IMPLIES_DESCRIBE
    if operation == AclOperation.DESCRIBE_CONFIGS:
        return binding.operation in _IMPLIES_DESCRIBE_CONFIGS
    return False


class Authorizer:
    """Decisions over one set of ACL bindings. With `config.enabled` false, everything is
    allowed (no authorizer configured: Kafka's behaviour)."""

    def __init__(self, config: AuthorizerConfig, bindings: Iterable[AclBinding]) -> None:
        self.config = config
        self._by_type: dict[int, list[AclBinding]] = {}
        # (resource type, name) -> bindings: LITERAL ones by their name ("*" included), PREFIXED
        # ones by their prefix; a resource's are found with one lookup per prefix of its name
        self._literal: dict[tuple[int, str], list[AclBinding]] = {}
        self._prefixed: dict[tuple[int, str], list[AclBinding]] = {}
        for binding in bindings:
            self._by_type.setdefault(binding.resource_type, []).append(binding)
            index = self._literal if binding.pattern_type == PatternType.LITERAL else self._prefixed
            key = (binding.resource_type, binding.resource_name)
            index.setdefault(key, []).append(binding)
        self._prefix_lengths: dict[int, list[int]] = {}
        for resource_type, prefix in self._prefixed:
            self._prefix_lengths.setdefault(resource_type, []).append(len(prefix))
        for lengths in self._prefix_lengths.values():
            lengths[:] = sorted(set(lengths))

    def _applying(self, resource_type: int, resource_name: str) -> list[AclBinding]:
        found = [*self._literal.get((resource_type, resource_name), ()),
                 *self._literal.get((resource_type, WILDCARD), ())]  # fmt: skip
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(resource_name):
                break
            found.extend(self._prefixed.get((resource_type, resource_name[:length]), ()))
        return found

    def authorize(
        self, principal: str, host: str, operation: int, resource_type: int, resource_name: str
    ) -> bool:
        if not self.config.enabled or principal in self.config.super_users:
            return True
        applying = self._applying(resource_type, resource_name)
        counting = [b for b in applying if _counts(b, principal, host, operation)]
        if any(b.permission_type == AclPermissionType.DENY for b in counting):
            return False
        if counting:
            return True
        return not applying and self.config.allow_everyone_if_no_acl_found

    def authorize_any(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """Whether `operation` is allowed on at least one resource of `resource_type` (Kafka's
        authorizeByResourceType, used for idempotent producers' WRITE on any topic): some ALLOW
        binding counts for it that no DENY binding covers whole (a DENY on the LITERAL `*` name,
        on the same literal name, or on a prefix of its name)."""
        if not self.config.enabled or principal in self.config.super_users:
            return True
        bindings = [
            b
            for b in self._by_type.get(resource_type, ())
            if _counts(b, principal, host, operation)
        ]
        denies = [b for b in bindings if b.permission_type == AclPermissionType.DENY]
        if any(
            b.pattern_type == PatternType.LITERAL and b.resource_name == WILDCARD for b in denies
        ):
            return False
        for allow in bindings:
            if allow.permission_type == AclPermissionType.ALLOW and not any(
                _covers(deny, allow) for deny in denies
            ):
                return True
        return not denies and self.config.allow_everyone_if_no_acl_found


def _covers(deny: AclBinding, allow: AclBinding) -> bool:
    if deny.pattern_type == PatternType.PREFIXED:
        return allow.resource_name.startswith(deny.resource_name)
    return allow.pattern_type == PatternType.LITERAL and deny.resource_name == allow.resource_name
