"""`quorumlog users add|delete|list`: SCRAM users in the metadata log, like
`kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[password=...]' --entity-type users`.

Speaks Kafka's AlterUserScramCredentials / DescribeUserScramCredentials through confluent-kafka's
admin client, so it works over any listener: `--command-config FILE` takes client properties
(librdkafka names, `name=value` lines: what `up --secure` writes to DIR/client.properties). The
client salts and hashes the password (PBKDF2) before it leaves; the cluster stores only the salt,
iteration count, stored key and server key.
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

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
TIMEOUT_S = 30


def _mechanism(name: str) -> Any:
    from confluent_kafka.admin import ScramMechanism

    return getattr(ScramMechanism, name.replace("-", "_"))


def _wait(futures: dict) -> None:
    failures = []
    for user, future in futures.items():
        try:
            future.result(timeout=TIMEOUT_S)
        except Exception as exc:  # KafkaException: the broker's error for this user
            error = exc.args[0] if exc.args else exc
            failures.append(f"{user}: {error}")
    if failures:
        raise click.ClickException("; ".join(failures))


@click.group("users")
def users() -> None:
    """SCRAM users of the cluster (stored in the metadata log, never the password).

    \b
    Examples:
      quorumlog users add alice --command-config DIR/client.properties
      quorumlog users list --command-config DIR/client.properties
    """


@users.command("add")
@click.argument("name")
@click.option("--password", prompt=True, hide_input=True, confirmation_prompt=True)
@click.option("--mechanism", type=click.Choice(MECHANISMS), multiple=True,
              help="default: both")  # fmt: skip
@click.option("--iterations", default=4096, show_default=True, type=click.IntRange(4096, 16384))
@bootstrap_option
@command_config_option
def add(name, password, mechanism, iterations, bootstrap, security) -> None:
    """Add NAME (or replace its password) for SCRAM-SHA-256/-512.

    \b
    Examples:
      quorumlog users add alice --command-config DIR/client.properties   # prompts
      quorumlog users add svc --password s3cret --mechanism SCRAM-SHA-512 -b host:9094
    """
    from confluent_kafka.admin import ScramCredentialInfo, UserScramCredentialUpsertion

    operations = [
        UserScramCredentialUpsertion(
            name, ScramCredentialInfo(_mechanism(m), iterations), password.encode()
        )
        for m in mechanism or MECHANISMS
    ]
    admin = confluent_admin(bootstrap, security)
    _wait(admin.alter_user_scram_credentials(operations))
    click.echo(f"user {name}: {', '.join(mechanism or MECHANISMS)} set")


@users.command("delete")
@click.argument("name")
@click.option("--mechanism", type=click.Choice(MECHANISMS), multiple=True,
              help="default: every mechanism NAME has")  # fmt: skip
@bootstrap_option
@command_config_option
def delete(name, mechanism, bootstrap, security) -> None:
    """Delete NAME's SCRAM credentials.

    \b
    Examples:
      quorumlog users delete alice --command-config DIR/client.properties
      quorumlog users delete alice --mechanism SCRAM-SHA-256 --command-config F
    """
    from confluent_kafka.admin import UserScramCredentialDeletion

    admin = confluent_admin(bootstrap, security)
    if not mechanism:
        described = _describe(admin, [name])
        mechanism = tuple(m for m, _ in described.get(name, []))
        if not mechanism:
            raise click.ClickException(f"user {name} has no SCRAM credentials")
    operations = [UserScramCredentialDeletion(name, _mechanism(m)) for m in mechanism]
    _wait(admin.alter_user_scram_credentials(operations))
    click.echo(f"user {name}: {', '.join(mechanism)} deleted")


def _describe(admin: Any, names: list[str] | None) -> dict[str, list[tuple[str, int]]]:
    result = admin.describe_user_scram_credentials(names)
    if names is None:
        descriptions = result.result(timeout=TIMEOUT_S)
    else:
        descriptions = {}
        for user, future in result.items():
            try:
                descriptions[user] = future.result(timeout=TIMEOUT_S)
            except Exception:  # RESOURCE_NOT_FOUND: no credentials
                continue
    return {
        user: sorted(
            (info.mechanism.name.replace("_", "-"), info.iterations)
            for info in d.scram_credential_infos
        )
        for user, d in descriptions.items()
    }


@users.command("list")
@bootstrap_option
@command_config_option
@json_option
def list_users(bootstrap, security, as_json) -> None:
    """Every SCRAM user with its mechanisms and iteration counts.

    \b
    Examples:
      quorumlog users list --command-config DIR/client.properties
      quorumlog users list --json --command-config DIR/client.properties
    """
    described = _describe(confluent_admin(bootstrap, security), None)
    if as_json:
        echo_json({user: dict(infos) for user, infos in sorted(described.items())})
        return
    rows = [
        (user, mechanism, str(iterations))
        for user in sorted(described)
        for mechanism, iterations in described[user]
    ]
    print_table(("USER", "MECHANISM", "ITERATIONS"), rows)
