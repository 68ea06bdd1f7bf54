"""`quorumlog groups list|describe|reset-offsets`: consumer groups from the command line.

list: ListGroups on every live broker (each answers the groups it coordinates), merged.
describe: FindCoordinator, then DescribeGroups (state, protocol, members) and OffsetFetch (every
committed partition) on the coordinator, with each partition's high watermark and lag. A KIP-848
consumer group (DescribeGroups says Dead, as Kafka) is described by ConsumerGroupDescribe: its
state, server assignor, and each member's assigned partitions.
reset-offsets: OffsetCommit with generation -1 and no member id -- Kafka accepts it only while
the group is Empty (no live members), so a running group is refused (UNKNOWN_MEMBER_ID).
Dry run by default, like kafka-consumer-groups.sh; --execute commits.
"""

from __future__ import annotations

from typing import Any

import click

from log.common.errors import ErrorCode
from log.protocol.consumer_group import CONSUMER_GROUP_DESCRIBE_REQUEST
from log.protocol.groups import (
    DESCRIBE_GROUPS_REQUEST,
    LIST_GROUPS_REQUEST,
    OFFSET_COMMIT_REQUEST,
    OFFSET_FETCH_REQUEST,
)
from producer.connection import BrokerConnection
from tools.admin_client import KEY_TYPE_GROUP, AdminClient, raise_for
from tools.cli_support import (
    bootstrap_option,
    command_config_option,
    echo_json,
    json_option,
    print_table,
    run_client,
)

OFFSET_COMMIT_KEY = 8
OFFSET_FETCH_KEY = 9
DESCRIBE_GROUPS_KEY = 15
LIST_GROUPS_KEY = 16
CONSUMER_GROUP_DESCRIBE_KEY = 69


async def list_groups(admin: AdminClient) -> list[dict[str, Any]]:
    cluster = await admin.describe_cluster()
    found: dict[str, dict[str, Any]] = {}
    for broker in cluster.brokers:
        connection = await admin.fetch_client.connections.connected(
            broker.node_id, broker.host, broker.port
        )
        body = await connection.request(LIST_GROUPS_KEY, LIST_GROUPS_REQUEST.cls())
        raise_for(body.error_code, f"ListGroups on broker {broker.node_id}")
        for g in body.groups:
            found[g.group_id] = {
                "group": g.group_id,
                "protocol_type": g.protocol_type,
                "coordinator": broker.node_id,
            }
    return [found[name] for name in sorted(found)]


async def committed_offsets(connection: BrokerConnection, group_id: str) -> dict[tuple, int]:
    # v8+ batch groups in another layout: this one-group form is v7's at most
    version = min(connection.version(OFFSET_FETCH_KEY), 7)
    body = await connection.request(
        OFFSET_FETCH_KEY, OFFSET_FETCH_REQUEST.cls(group_id=group_id, topics=None), version
    )
    raise_for(getattr(body, "error_code", 0), f"OffsetFetch {group_id}")
    return {
        (t.name, p.partition_index): p.committed_offset
        for t in body.topics
        for p in t.partitions
        if p.error_code == 0 and p.committed_offset >= 0
    }


async def describe_group(admin: AdminClient, group_id: str) -> dict[str, Any]:
    connection = await admin.coordinator(group_id, KEY_TYPE_GROUP)
    body = await connection.request(
        DESCRIBE_GROUPS_KEY, DESCRIBE_GROUPS_REQUEST.cls(groups=[group_id])
    )
    [g] = body.groups
    raise_for(g.error_code, f"DescribeGroups {group_id}")
    state, protocol_type, protocol = g.group_state, g.protocol_type, g.protocol_data
    members = [
        {"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host}
        for m in g.members
    ]
    if state == "Dead" and CONSUMER_GROUP_DESCRIBE_KEY in connection.versions:
        body = await connection.request(
            CONSUMER_GROUP_DESCRIBE_KEY, CONSUMER_GROUP_DESCRIBE_REQUEST.cls(group_ids=[group_id])
        )
        [cg] = body.groups
        if cg.error_code == ErrorCode.NONE:  # a KIP-848 consumer group
            state, protocol_type, protocol = cg.group_state, "consumer", cg.assignor_name
            members = [
                {
                    "member_id": m.member_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_epoch": m.member_epoch,
                    "assignment": sorted(
                        f"{t.topic_name}-{p}"
                        for t in m.assignment.topic_partitions
                        for p in t.partitions
                    ),
                }  # fmt: skip
                for m in cg.members
            ]
    offsets = await committed_offsets(connection, group_id)
    partitions = []
    for topic in sorted({t for t, _ in offsets}):
        indexes = sorted(p for t, p in offsets if t == topic)
        high_watermarks = await admin.high_watermarks(topic, indexes)
        for p in indexes:
            committed = offsets[(topic, p)]
            hw = high_watermarks.get(p, -1)
            lag = hw - committed if hw >= 0 else None
            partitions.append(
                {"topic": topic, "partition": p, "committed_offset": committed,
                 "high_watermark": hw, "lag": lag}
            )  # fmt: skip
    return {
        "group": group_id,
        "state": state,
        "protocol_type": protocol_type,
        "protocol": protocol,
        "members": members,
        "offsets": partitions,
    }


async def reset_offsets(
    admin: AdminClient, group_id: str, topic: str, to: str, offset: int | None, execute: bool
) -> list[dict[str, Any]]:
    count = await admin.fetch_client.partition_count(topic)
    partitions = list(range(count))
    if to == "earliest":
        targets = await admin.log_start_offsets(topic, partitions)
    elif to == "latest":
        targets = await admin.high_watermarks(topic, partitions)
    else:
        assert offset is not None
        targets = dict.fromkeys(partitions, offset)
    if execute:
        connection = await admin.coordinator(group_id, KEY_TYPE_GROUP)
        C: Any = OFFSET_COMMIT_REQUEST.cls  # made at run time by schema.py: untyped
        body = await connection.request(
            OFFSET_COMMIT_KEY,
            C(
                group_id=group_id,
                generation_id_or_member_epoch=-1,
                member_id="",
                topics=[
                    C.OffsetCommitRequestTopic(
                        name=topic,
                        partitions=[
                            C.OffsetCommitRequestPartition(
                                partition_index=p, committed_offset=o, committed_metadata=""
                            )
                            for p, o in sorted(targets.items())
                        ],
                    )
                ],
            ),
        )
        for t in body.topics:
            for p in t.partitions:
                raise_for(p.error_code, f"OffsetCommit {group_id} {t.name}-{p.partition_index}")
    return [
        {"topic": topic, "partition": p, "new_offset": o, "executed": execute}
        for p, o in sorted(targets.items())
    ]


@click.group("groups")
def groups() -> None:
    """Consumer groups: list, describe (members, committed offsets, lag), reset offsets.

    \b
    Examples:
      quorumlog groups list
      quorumlog groups describe billing --json
      quorumlog groups reset-offsets billing -t events --to-earliest --execute
    """


@groups.command("list")
@bootstrap_option
@command_config_option
@json_option
def list_command(bootstrap, security, as_json):
    """List the consumer groups of the cluster.

    \b
    Examples:
      quorumlog groups list
      quorumlog groups list --json | jq -r '.[].group'
    """

    async def main() -> list[dict[str, Any]]:
        async with AdminClient(bootstrap, connector=security.connector) as admin:
            return await list_groups(admin)

    rows = run_client(main)
    if as_json:
        echo_json(rows)
        return
    print_table(
        ["group", "protocol type", "coordinator"],
        [[r["group"], r["protocol_type"], r["coordinator"]] for r in rows],
    )


@groups.command("describe")
@bootstrap_option
@command_config_option
@click.argument("group_id")
@json_option
def describe_command(bootstrap, security, group_id, as_json):
    """Show a group's state, members and committed offsets with lag.

    \b
    Examples:
      quorumlog groups describe billing
      quorumlog groups describe billing --json
    """

    async def main() -> dict[str, Any]:
        async with AdminClient(bootstrap, connector=security.connector) as admin:
            return await describe_group(admin, group_id)

    described = run_client(main)
    if as_json:
        echo_json(described)
        return
    click.echo(
        f"group {described['group']}: {described['state']}, protocol "
        f"{described['protocol'] or '-'}, {len(described['members'])} member(s)"
    )
    print_table(
        ["topic", "partition", "committed", "high watermark", "lag"],
        [
            [o["topic"], o["partition"], o["committed_offset"], o["high_watermark"], o["lag"]]
            for o in described["offsets"]
        ],
    )


@groups.command("reset-offsets")
@bootstrap_option
@command_config_option
@click.argument("group_id")
@click.option("--topic", "-t", required=True)
@click.option("--to-earliest", "to", flag_value="earliest")
@click.option("--to-latest", "to", flag_value="latest")
@click.option("--to-offset", "offset", type=click.IntRange(0), default=None)
@click.option("--execute", is_flag=True, help="commit the new offsets (default: dry run)")
@json_option
def reset_offsets_command(bootstrap, security, group_id, topic, to, offset, execute, as_json):
    """Set an (empty) group's committed offsets of a topic's partitions (a dry run unless
    --execute).

    \b
    Examples:
      quorumlog groups reset-offsets billing -t events --to-earliest
      quorumlog groups reset-offsets billing -t events --to-offset 100 --execute
    """
    if (to is None) == (offset is None):
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-offset")
    how = to or "offset"

    async def main() -> list[dict[str, Any]]:
        async with AdminClient(bootstrap, connector=security.connector) as admin:
            return await reset_offsets(admin, group_id, topic, how, offset, execute)

    rows = run_client(main)
    if as_json:
        echo_json(rows)
        return
    print_table(
        ["topic", "partition", "new offset"],
        [[r["topic"], r["partition"], r["new_offset"]] for r in rows],
        title="committed" if execute else "dry run (add --execute to commit)",
    )
