"""The authorizer's decision matrix (log/security/authorizer.py) and the ACL filters
(log/common/acl.py): Kafka's StandardAuthorizer rules, checked case by case and against a
straight-line restatement of them with hypothesis."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from log.common.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    invalid_binding_reason,
)
from log.security.authorizer import Authorizer, AuthorizerConfig, AuthorizerConfigError

STANDARD = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
Op, Perm, Pat, Res = AclOperation, AclPermissionType, PatternType, ResourceType
ALLOW, DENY = Perm.ALLOW, Perm.DENY


def acl(name, op, perm=ALLOW, principal="User:alice", host="*", pattern=Pat.LITERAL,
        resource=Res.TOPIC):  # fmt: skip
    return AclBinding(resource, name, pattern, principal, host, op, perm)


def authorizer(*bindings, **props):
    config = AuthorizerConfig.from_props({**STANDARD, **props})
    return Authorizer(config, bindings)


def allowed(auth, op, name="orders", principal="User:alice", host="10.0.0.1", res=Res.TOPIC):
    return auth.authorize(principal, host, op, res, name)


def test_no_authorizer_configured_allows_everything():
    auth = Authorizer(AuthorizerConfig.from_props({}), [acl("orders", Op.READ, DENY)])
    assert allowed(auth, Op.READ)


def test_unknown_authorizer_class_is_refused():
    with pytest.raises(AuthorizerConfigError):
        AuthorizerConfig.from_props({"authorizer.class.name": "kafka.security.AclAuthorizer"})


def test_node_config_takes_kafka_names_and_refuses_other_authorizers(tmp_path):
    from bench.local_quorum import node_config
    from log.common.node_config import ConfigError

    config = node_config(tmp_path, **STANDARD, **{"super.users": "User:a;User:b",
                                                  "allow.everyone.if.no.acl.found": "true"})  # fmt: skip
    parsed = AuthorizerConfig.from_props(config.props)
    assert parsed == AuthorizerConfig(True, frozenset({"User:a", "User:b"}), True)
    assert not AuthorizerConfig.from_props(node_config(tmp_path).props).enabled
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        node_config(
            tmp_path, **{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
        )


def test_no_acl_found_denies_by_default_and_allow_everyone_flips_it():
    assert not allowed(authorizer(), Op.READ)
    assert allowed(authorizer(**{"allow.everyone.if.no.acl.found": "true"}), Op.READ)
    # an ACL on the resource for someone else: not "no ACL found" any more
    other = acl("orders", Op.READ, principal="User:bob")
    assert not allowed(authorizer(other, **{"allow.everyone.if.no.acl.found": "true"}), Op.READ)


def test_literal_allow_matches_only_its_name_and_operation():
    auth = authorizer(acl("orders", Op.READ))
    assert allowed(auth, Op.READ)
    assert not allowed(auth, Op.WRITE)
    assert not allowed(auth, Op.READ, name="orders2")
    assert not allowed(auth, Op.READ, principal="User:bob")


def test_deny_wins_over_allow():
    auth = authorizer(acl("orders", Op.ALL), acl("orders", Op.WRITE, DENY))
    assert allowed(auth, Op.READ)
    assert not allowed(auth, Op.WRITE)
    everyone_denied = authorizer(acl("orders", Op.READ), acl("*", Op.READ, DENY, "User:*"))
    assert not allowed(everyone_denied, Op.READ)


def test_prefixed_and_wildcard_names():
    auth = authorizer(acl("pay.", Op.WRITE, pattern=Pat.PREFIXED), acl("*", Op.READ))
    assert allowed(auth, Op.WRITE, name="pay.in")
    assert allowed(auth, Op.WRITE, name="pay.")
    assert not allowed(auth, Op.WRITE, name="pa")
    assert not allowed(auth, Op.WRITE, name="orders")
    assert allowed(auth, Op.READ, name="anything")
    literal_prefix = authorizer(acl("pay.", Op.WRITE))  # LITERAL: not a prefix
    assert not allowed(literal_prefix, Op.WRITE, name="pay.in")


def test_wildcard_principal_and_hosts():
    auth = authorizer(acl("orders", Op.READ, principal="User:*", host="10.0.0.1"))
    assert allowed(auth, Op.READ, principal="User:anyone")
    assert not allowed(auth, Op.READ, host="10.0.0.2")


def test_implied_describe_only_from_allow():
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert allowed(authorizer(acl("orders", op)), Op.DESCRIBE)
    assert not allowed(authorizer(acl("orders", Op.CREATE)), Op.DESCRIBE)
    assert allowed(authorizer(acl("orders", Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS)
    denied_read = authorizer(acl("orders", Op.ALL), acl("orders", Op.READ, DENY))
    assert allowed(denied_read, Op.DESCRIBE)  # DENY READ does not deny DESCRIBE


def test_super_users_bypass_deny():
    auth = authorizer(acl("*", Op.ALL, DENY, "User:*"), **{"super.users": "User:admin; User:b"})
    assert allowed(auth, Op.WRITE, principal="User:admin")
    assert allowed(auth, Op.WRITE, principal="User:b")
    assert not allowed(auth, Op.WRITE, principal="User:alice")


def test_resource_types_do_not_mix():
    auth = authorizer(acl("orders", Op.READ, resource=Res.GROUP))
    assert not allowed(auth, Op.READ, res=Res.TOPIC)
    assert allowed(auth, Op.READ, res=Res.GROUP)


def test_authorize_any_for_idempotent_writes():
    assert authorizer(acl("t", Op.WRITE)).authorize_any("User:alice", "h", Op.WRITE, Res.TOPIC)
    assert not authorizer().authorize_any("User:alice", "h", Op.WRITE, Res.TOPIC)
    covered = authorizer(acl("t", Op.WRITE), acl("t", Op.WRITE, DENY, pattern=Pat.PREFIXED))
    assert not covered.authorize_any("User:alice", "h", Op.WRITE, Res.TOPIC)
    wildcard = authorizer(acl("t", Op.WRITE), acl("*", Op.WRITE, DENY))
    assert not wildcard.authorize_any("User:alice", "h", Op.WRITE, Res.TOPIC)


def test_binding_validation():
    assert invalid_binding_reason(acl("orders", Op.READ)) is None
    assert invalid_binding_reason(acl("orders", Op.ANY)) is not None
    assert invalid_binding_reason(acl("orders", Op.READ, Perm.ANY)) is not None
    assert invalid_binding_reason(acl("orders", Op.READ, pattern=Pat.MATCH)) is not None
    assert invalid_binding_reason(acl("orders", Op.READ, principal="alice")) is not None
    assert invalid_binding_reason(acl("x", Op.ALTER, resource=Res.CLUSTER)) is not None
    assert invalid_binding_reason(acl("kafka-cluster", Op.ALTER, resource=Res.CLUSTER)) is None
    assert invalid_binding_reason(acl("", Op.READ)) is not None


def test_filters():
    literal = acl("orders", Op.READ)
    prefixed = acl("ord", Op.READ, pattern=Pat.PREFIXED)
    wildcard = acl("*", Op.READ)
    assert AclBindingFilter().matches(literal)
    assert AclBindingFilter(Res.TOPIC, "orders", Pat.LITERAL).matches(literal)
    assert not AclBindingFilter(Res.TOPIC, "orders", Pat.LITERAL).matches(wildcard)
    assert not AclBindingFilter(Res.GROUP).matches(literal)
    match = AclBindingFilter(Res.TOPIC, "orders", Pat.MATCH)
    assert all(match.matches(b) for b in (literal, prefixed, wildcard))
    assert not match.matches(acl("orders2", Op.READ))
    assert not AclBindingFilter(permission_type=DENY).matches(literal)
    assert AclBindingFilter(principal="User:alice", operation=Op.READ).matches(literal)
    assert AclBindingFilter(resource_type=Res.UNKNOWN).invalid_reason() is not None
    assert AclBindingFilter().invalid_reason() is None


# -- hypothesis: the authorizer against the rules restated naively --------------------------

NAMES = st.sampled_from(["a", "ab", "abc", "b", "*"])
PRINCIPALS = st.sampled_from(["User:alice", "User:bob", "User:*"])
HOSTS = st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])
OPS = st.sampled_from([Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS,
                       Op.DESCRIBE_CONFIGS])  # fmt: skip
BINDINGS = st.builds(AclBinding, st.just(Res.TOPIC), NAMES,
                     st.sampled_from([Pat.LITERAL, Pat.PREFIXED]), PRINCIPALS, HOSTS, OPS,
                     st.sampled_from([ALLOW, DENY]))  # fmt: skip


def _reference(bindings, principal, host, op, name, allow_everyone):
    def applies(b):
        if b.pattern_type == Pat.LITERAL:
            return b.resource_name == name or b.resource_name == "*"
        return name[: len(b.resource_name)] == b.resource_name

    def grants(b):
        if b.operation in (Op.ALL, op):
            return True
        implied = {Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
                   Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS}}.get(op, set())  # fmt: skip
        return b.permission_type == ALLOW and b.operation in implied

    on_resource = [b for b in bindings if applies(b)]
    mine = [b for b in on_resource if b.principal in (principal, "User:*")
            and b.host in ("*", host) and grants(b)]  # fmt: skip
    if [b for b in mine if b.permission_type == DENY]:
        return False
    if mine:
        return True
    return allow_everyone and not on_resource


@settings(max_examples=400, deadline=None)
@given(
    st.lists(BINDINGS, max_size=6),
    st.sampled_from(["User:alice", "User:bob"]),
    st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS]),
    st.sampled_from(["a", "ab", "abc", "b", "c"]),
    st.booleans(),
)
def test_matches_the_rules(bindings, principal, host, op, name, allow_everyone):
    auth = authorizer(*bindings, **{"allow.everyone.if.no.acl.found": str(allow_everyone)})
    expected = _reference(bindings, principal, host, op, name, allow_everyone)
    assert auth.authorize(principal, host, op, Res.TOPIC, name) == expected
