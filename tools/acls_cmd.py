"""`quorumlog acls add|remove|list`: ACL bindings in the metadata log, like `kafka-acls.sh`.

Speaks Kafka's CreateAcls / DescribeAcls / DeleteAcls through confluent-kafka's admin client,
so it works over any listener (`--command-config FILE`: client properties, as `up --secure`
writes to DIR/client.properties). The cluster must run with `authorizer.class.name` set
(else it answers SECURITY_DISABLED), and the caller needs ALTER (add, remove) or DESCRIBE (list)
on the cluster: `up --secure`'s admin user is a super user.

One resource per call, as kafka-acls.sh: --topic, --group, --transactional-id or --cluster;
every (principal, host, operation) combination given becomes one binding.
"""

from __future__ import annotations

from typing import Any

import click

from tools.cli_support import (
    bootstrap_option,
    command_config_option,
    confluent_admin,
    echo_json,
    json_option,
    print_table,
)
from tools.users_cmd import TIMEOUT_S

OPERATIONS = ("All", "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction",
              "DescribeConfigs", "AlterConfigs", "IdempotentWrite")  # fmt: skip
CLUSTER_NAME = "kafka-cluster"


def _upper(name: str) -> str:
    """kafka-acls.sh's CamelCase operation names -> the client's enum names (DescribeConfigs ->
    DESCRIBE_CONFIGS)."""
    out = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(name))
    return out.upper()


def _resource(topic: str | None, group: str | None, transactional_id: str | None,
              cluster: bool) -> tuple[Any, str | None]:  # fmt: skip
    from confluent_kafka.admin import ResourceType

    given = [(ResourceType.TOPIC, topic), (ResourceType.GROUP, group),
             (ResourceType.TRANSACTIONAL_ID, transactional_id)]  # fmt: skip
    chosen = [(kind, name) for kind, name in given if name is not None]
    if cluster:
        chosen.append((ResourceType.BROKER, CLUSTER_NAME))  # confluent-kafka calls it BROKER
    if len(chosen) > 1:
        raise click.UsageError("give one of --topic, --group, --transactional-id, --cluster")
    return chosen[0] if chosen else (ResourceType.ANY, None)


resource_options = [
    click.option("--topic", help="a topic name (or prefix, or * for all)"),
    click.option("--group", help="a consumer group id (or prefix, or *)"),
    click.option("--transactional-id", help="a transactional id (or prefix, or *)"),
    click.option("--cluster", is_flag=True, help="the cluster itself"),
    click.option(
        "--resource-pattern-type",
        type=click.Choice(["literal", "prefixed"]),
        default="literal",
        show_default=True,
    ),  # fmt: skip
]


def _with_resource_options(fn: Any) -> Any:
    for option in reversed(resource_options):
        fn = option(fn)
    return fn


def _bindings(principals: list[tuple[str, str]], hosts: tuple[str, ...],
              operations: tuple[str, ...], resource: tuple[Any, str | None],
              pattern: str) -> list[Any]:  # fmt: skip
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
    )

    kind, name = resource
    if name is None:
        raise click.UsageError("name a resource: --topic, --group, --transactional-id or --cluster")
    if not principals or not operations:
        raise click.UsageError("give --allow-principal/--deny-principal and --operation")
    return [
        AclBinding(
            kind,
            name,
            getattr(ResourcePatternType, pattern.upper()),
            principal,
            host,
            getattr(AclOperation, _upper(operation)),
            getattr(AclPermissionType, permission),
        )  # fmt: skip
        for permission, principal in principals
        for host in hosts or ("*",)
        for operation in operations
    ]


def _principals(allow: tuple[str, ...], deny: tuple[str, ...]) -> list[tuple[str, str]]:
    return [("ALLOW", p) for p in allow] + [("DENY", p) for p in deny]


@click.group("acls")
def acls() -> None:
    """ACLs of the cluster (the authorizer's input; stored in the metadata log).

    \b
    Examples:
      quorumlog acls add --allow-principal User:bob --operation Read --topic orders \\
          --command-config DIR/client.properties
      quorumlog acls add --allow-principal User:bob --operation Read --group app- \\
          --resource-pattern-type prefixed --command-config DIR/client.properties
      quorumlog acls list --command-config DIR/client.properties
    """


principal_options = [
    click.option("--allow-principal", multiple=True, help="e.g. User:bob, User:* for everyone"),
    click.option("--deny-principal", multiple=True, help="e.g. User:mallory"),
    click.option("--host", multiple=True, help="client address the ACL applies to (default *)"),
    click.option(
        "--operation", type=click.Choice(OPERATIONS, case_sensitive=False), multiple=True
    ),  # fmt: skip
]


def _with_principal_options(fn: Any) -> Any:
    for option in reversed(principal_options):
        fn = option(fn)
    return fn


def _canonical(operations: tuple[str, ...]) -> tuple[str, ...]:
    by_lower = {o.lower(): o for o in OPERATIONS}
    return tuple(by_lower[o.lower()] for o in operations)


@acls.command("add")
@_with_principal_options
@_with_resource_options
@bootstrap_option
@command_config_option
def add(allow_principal, deny_principal, host, operation, topic, group, transactional_id,
        cluster, resource_pattern_type, bootstrap, security) -> None:  # fmt: skip
    """Add ACLs: each principal x host x operation on one resource.

    \b
    Examples:
      quorumlog acls add --allow-principal User:bob --operation Write --topic orders -b h:9092
      quorumlog acls add --deny-principal User:eve --operation All --topic '*' \\
          --command-config DIR/client.properties
    """
    resource = _resource(topic, group, transactional_id, cluster)
    bindings = _bindings(_principals(allow_principal, deny_principal), host,
                         _canonical(operation), resource, resource_pattern_type)  # fmt: skip
    admin = confluent_admin(bootstrap, security)
    futures = admin.create_acls(bindings, request_timeout=TIMEOUT_S)
    failures = []
    for binding, future in futures.items():
        try:
            future.result(timeout=TIMEOUT_S)
        except Exception as exc:  # KafkaException: the broker's error for this binding
            failures.append(f"{binding}: {exc.args[0] if exc.args else exc}")
    if failures:
        raise click.ClickException("; ".join(failures))
    click.echo(f"{len(bindings)} ACL(s) added")


def _filter(resource: tuple[Any, str | None], pattern: str | None, principal: str | None,
            host: str | None, operation: str | None, permission: str | None) -> Any:  # fmt: skip
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
    )

    kind, name = resource
    # confluent-kafka's stubs type the strings as str; its filters take None for "any"
    any_name: Any = name
    principal_or_any: Any = principal
    host_or_any: Any = host
    return AclBindingFilter(
        kind, any_name,
        getattr(ResourcePatternType, pattern.upper()) if pattern else ResourcePatternType.ANY,
        principal_or_any, host_or_any,
        getattr(AclOperation, _upper(operation)) if operation else AclOperation.ANY,
        getattr(AclPermissionType, permission) if permission else AclPermissionType.ANY,
    )  # fmt: skip


@acls.command("remove")
@_with_principal_options
@_with_resource_options
@bootstrap_option
@command_config_option
def remove(allow_principal, deny_principal, host, operation, topic, group, transactional_id,
           cluster, resource_pattern_type, bootstrap, security) -> None:  # fmt: skip
    """Remove the ACLs of one resource: all of them, or those matching the principals, hosts
    and operations given.

    \b
    Examples:
      quorumlog acls remove --allow-principal User:bob --operation Write --topic orders -b h:9092
      quorumlog acls remove --topic orders --command-config DIR/client.properties   # all
    """
    resource = _resource(topic, group, transactional_id, cluster)
    if resource[1] is None:
        raise click.UsageError("name a resource: --topic, --group, --transactional-id or --cluster")
    principals: list[tuple[str | None, str | None]] = [
        *_principals(allow_principal, deny_principal)
    ]
    filters = [
        _filter(resource, resource_pattern_type, principal, h, o, permission)
        for permission, principal in principals or [(None, None)]
        for h in host or (None,)
        for o in _canonical(operation) or (None,)
    ]
    admin = confluent_admin(bootstrap, security)
    removed = 0
    for future in admin.delete_acls(filters, request_timeout=TIMEOUT_S).values():
        try:
            removed += len(future.result(timeout=TIMEOUT_S))
        except Exception as exc:
            raise click.ClickException(str(exc.args[0] if exc.args else exc)) from None
    click.echo(f"{removed} ACL(s) removed")


@acls.command("list")
@click.option("--principal", help="only this principal's ACLs")
@_with_resource_options
@bootstrap_option
@command_config_option
@json_option
def list_acls(principal, topic, group, transactional_id, cluster, resource_pattern_type,
              bootstrap, security, as_json) -> None:  # fmt: skip
    """ACLs, of one resource or all.

    \b
    Examples:
      quorumlog acls list --command-config DIR/client.properties
      quorumlog acls list --topic orders --json -b h:9092
    """
    resource = _resource(topic, group, transactional_id, cluster)
    pattern = resource_pattern_type if resource[1] is not None else None
    acl_filter = _filter(resource, pattern, principal, None, None, None)
    admin = confluent_admin(bootstrap, security)
    try:
        found = admin.describe_acls(acl_filter, request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    except Exception as exc:
        raise click.ClickException(str(exc.args[0] if exc.args else exc)) from None
    rows = sorted(
        (b.restype.name.replace("BROKER", "CLUSTER"), b.name, b.resource_pattern_type.name,
         b.principal, b.host, b.operation.name, b.permission_type.name)
        for b in found
    )  # fmt: skip
    columns = ("RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")
    if as_json:
        echo_json([dict(zip([c.lower() for c in columns], row, strict=True)) for row in rows])
        return
    print_table(columns, rows)
