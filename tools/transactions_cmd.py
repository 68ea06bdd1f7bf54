"""`quorumlog transactions list|describe`: transactional ids from the command line (like
Kafka's kafka-transactions.sh).

list: ListTransactions on every live broker (each answers the transactional ids it
coordinates), merged; --state filters by state (Ongoing, PrepareCommit, ...).
describe: FindCoordinator (key type 1), then DescribeTransactions on the coordinator: state,
producer id and epoch, timeout, start time and the partitions of the open transaction.
"""

from __future__ import annotations

from typing import Any

import click

from log.protocol.transaction_admin import (
    DESCRIBE_TRANSACTIONS_REQUEST,
    LIST_TRANSACTIONS_REQUEST,
)
from tools.admin_client import KEY_TYPE_TRANSACTION, AdminClient, raise_for
from tools.cli_support import (
    bootstrap_option,
    command_config_option,
    echo_json,
    json_option,
    print_table,
    run_client,
)

DESCRIBE_TRANSACTIONS_KEY = 65
LIST_TRANSACTIONS_KEY = 66


async def list_transactions(admin: AdminClient, states: list[str]) -> list[dict[str, Any]]:
    cluster = await admin.describe_cluster()
    found: dict[str, dict[str, Any]] = {}
    for broker in cluster.brokers:
        connection = await admin.fetch_client.connections.connected(
            broker.node_id, broker.host, broker.port
        )
        body = await connection.request(
            LIST_TRANSACTIONS_KEY,
            LIST_TRANSACTIONS_REQUEST.cls(state_filters=states, producer_id_filters=[]),
        )
        raise_for(body.error_code, f"ListTransactions on broker {broker.node_id}")
        if body.unknown_state_filters:
            raise click.UsageError(f"unknown states: {', '.join(body.unknown_state_filters)}")
        for t in body.transaction_states:
            found[t.transactional_id] = {
                "transactional_id": t.transactional_id,
                "producer_id": t.producer_id,
                "state": t.transaction_state,
                "coordinator": broker.node_id,
            }
    return [found[name] for name in sorted(found)]


async def describe_transaction(admin: AdminClient, transactional_id: str) -> dict[str, Any]:
    connection = await admin.coordinator(transactional_id, KEY_TYPE_TRANSACTION)
    body = await connection.request(
        DESCRIBE_TRANSACTIONS_KEY,
        DESCRIBE_TRANSACTIONS_REQUEST.cls(transactional_ids=[transactional_id]),
    )
    [t] = body.transaction_states
    raise_for(t.error_code, f"DescribeTransactions {transactional_id}")
    return {
        "transactional_id": t.transactional_id,
        "coordinator": connection.node_id,
        "state": t.transaction_state,
        "producer_id": t.producer_id,
        "producer_epoch": t.producer_epoch,
        "transaction_timeout_ms": t.transaction_timeout_ms,
        "transaction_start_time_ms": t.transaction_start_time_ms,
        "partitions": [
            {"topic": topic.topic, "partition": p} for topic in t.topics for p in topic.partitions
        ],
    }


@click.group("transactions")
def transactions() -> None:
    """Transactional ids: list them, describe one (state, producer, open partitions).

    \b
    Examples:
      quorumlog transactions list
      quorumlog transactions list --state Ongoing
      quorumlog transactions describe copier-1 --json
    """


@transactions.command("list")
@bootstrap_option
@command_config_option
@click.option("--state", "states", multiple=True, help="only these states (repeatable)")
@json_option
def list_command(bootstrap, security, states, as_json):
    """List the transactional ids of the cluster with their state.

    \b
    Examples:
      quorumlog transactions list
      quorumlog transactions list --state Ongoing --state PrepareCommit --json
    """

    async def main() -> list[dict[str, Any]]:
        async with AdminClient(bootstrap, connector=security.connector) as admin:
            return await list_transactions(admin, list(states))

    rows = run_client(main)
    if as_json:
        echo_json(rows)
        return
    print_table(
        ["transactional id", "producer id", "state", "coordinator"],
        [[r["transactional_id"], r["producer_id"], r["state"], r["coordinator"]] for r in rows],
    )


@transactions.command("describe")
@bootstrap_option
@command_config_option
@click.argument("transactional_id")
@json_option
def describe_command(bootstrap, security, transactional_id, as_json):
    """Show a transactional id's state, producer id/epoch, timeout and open partitions.

    \b
    Examples:
      quorumlog transactions describe copier-1
      quorumlog transactions describe copier-1 --json
    """

    async def main() -> dict[str, Any]:
        async with AdminClient(bootstrap, connector=security.connector) as admin:
            return await describe_transaction(admin, transactional_id)

    d = run_client(main)
    if as_json:
        echo_json(d)
        return
    click.echo(
        f"transactional id {d['transactional_id']}: {d['state']}, producer "
        f"{d['producer_id']} epoch {d['producer_epoch']}, timeout {d['transaction_timeout_ms']} ms, "
        f"coordinator {d['coordinator']}"
    )
    print_table(["topic", "partition"], [[p["topic"], p["partition"]] for p in d["partitions"]])
