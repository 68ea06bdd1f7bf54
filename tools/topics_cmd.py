"""`quorumlog topics create|list|describe|alter-config|add-partitions|elect-leaders|reassign|
reassignments|delete` (kafka-topics.sh; kafka-leader-election.sh for elect-leaders,
kafka-reassign-partitions.sh for reassign and reassignments).

Every subcommand talks to any broker through tools.admin_client.AdminClient; the broker
forwards changes to the active controller and answers once it sees them, so a `describe`
right after a `create` shows the new topic. `describe` lists each partition's leader,
replicas, ISR and high watermark (ListOffsets latest) and the topic's config overrides.
"""

from __future__ import annotations

import click

from log.common.errors import ErrorCode, KafkaError
from tools.admin_client import AdminClient, TopicDescription
from tools.cli_support import (
    CommandError,
    bootstrap_option,
    command_config_option,
    echo_json,
    json_option,
    node_list,
    parse_key_values,
    print_table,
    run_client,
)

config_option = click.option(
    "--config", "configs", multiple=True, metavar="KEY=VALUE", help="topic config (repeatable)"
)


@click.group("topics")
def topics() -> None:
    """Create, list, describe, reconfigure and delete topics (like kafka-topics.sh).

    \b
    Examples:
      quorumlog topics create --topic events --partitions 6 --config retention.ms=86400000
      quorumlog topics list
      quorumlog topics describe --topic events --json
      quorumlog topics alter-config --topic events --config retention.ms=3600000
      quorumlog topics delete --topic events
    """


@topics.command("create")
@bootstrap_option
@command_config_option
@click.option("--topic", "-t", required=True)
@click.option("--partitions", "-p", type=click.IntRange(1), default=1, show_default=True)
@click.option("--replication-factor", "-r", type=click.IntRange(1), default=1, show_default=True)
@config_option
@click.option("--if-not-exists", is_flag=True, help="succeed if the topic already exists")
@json_option
def create(
    bootstrap, security, topic, partitions, replication_factor, configs, if_not_exists, as_json
):
    """Create a topic.

    \b
    Examples:
      quorumlog topics create --topic events --partitions 6
      quorumlog topics create -t logs -p 3 --config segment.bytes=1048576 --config retention.ms=60000
    """
    config_map = parse_key_values(configs, "--config")

    async def main() -> bool:
        async with AdminClient(bootstrap, connector=security.connector) as admin:
            try:
                await admin.create_topic(topic, partitions, replication_factor, config_map)
            except KafkaError as exc:
                if if_not_exists and exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
                    return False
                raise
            return True

    created = run_client(main)
    if as_json:
        echo_json({"topic": topic, "created": created, "partitions": partitions,
                   "replication_factor": replication_factor, "configs": config_map})  # fmt: skip
    else:
        click.echo(f"Created topic {topic}." if created else f"Topic {topic} already exists.")


@topics.command("list")
@bootstrap_option
@command_config_option
@json_option
def list_topics(bootstrap, security, as_json):
    """List topic names.

    \b
    Examples:
      quorumlog topics list
      QUORUMLOG_BOOTSTRAP=10.0.0.5:9092 quorumlog topics list --json
    """

    async def main() -> list[str]:
        async with AdminClient(bootstrap, connector=security.connector) as admin:
            return await admin.list_topics()

    names = run_client(main)
    if as_json:
        echo_json(names)
    else:
        for name in names:
            click.echo(name)


async def describe_with_offsets(admin: AdminClient, names: list[str] | None) -> list[dict]:
    """Topic descriptions as plain dicts, each partition with its high watermark."""
    descriptions: list[TopicDescription] = await admin.describe_topics(names or None)
    out = []
    for d in descriptions:
        marks = await admin.high_watermarks(d.name, [p.partition for p in d.partitions])
        out.append(
            {
                "name": d.name,
                "partition_count": len(d.partitions),
                "replication_factor": d.replication_factor,
                "partitions": [
                    {
                        "partition": p.partition,
                        "leader": p.leader,
                        "leader_epoch": p.leader_epoch,
                        "replicas": list(p.replicas),
                        "isr": list(p.isr),
                        "offline_replicas": list(p.offline_replicas),
                        "high_watermark": marks[p.partition],
                    }
                    for p in d.partitions
                ],
            }
        )
    return out


@topics.command("describe")
@bootstrap_option
@command_config_option
@click.option("--topic", "-t", "names", multiple=True, help="topic (repeatable; default all)")
@json_option
def describe(bootstrap, security, names, as_json):
    """Describe topics: partitions with leader, replicas, ISR, high watermark; config overrides.

    \b
    Examples:
      quorumlog topics describe --topic events
      quorumlog topics describe --json | jq '.[].partitions[].high_watermark'
    """

    async def main() -> list[dict]:
        async with AdminClient(bootstrap, connector=security.connector) as admin:
            topics_out = await describe_with_offsets(admin, list(names) or None)
            for topic in topics_out:
                entries = await admin.describe_topic_configs(topic["name"])
                topic["configs"] = {e.name: e.value for e in entries if e.is_override}
            return topics_out

    described = run_client(main)
    if as_json:
        echo_json(described)
        return
    for topic in described:
        overrides = ",".join(f"{k}={v}" for k, v in sorted(topic["configs"].items()))
        print_table(
            ["Partition", "Leader", "Replicas", "ISR", "HighWatermark"],
            [
                (
                    p["partition"],
                    p["leader"],
                    node_list(p["replicas"]),
                    node_list(p["isr"]),
                    p["high_watermark"],
                )
                for p in topic["partitions"]
            ],  # fmt: skip
            title=(
                f"Topic: {topic['name']}\tPartitionCount: {topic['partition_count']}\t"
                f"ReplicationFactor: {topic['replication_factor']}\tConfigs: {overrides or '-'}"
            ),
        )


@topics.command("alter-config")
@bootstrap_option
@command_config_option
@click.option("--topic", "-t", required=True)
@config_option
@click.option("--delete-config", "deletes", multiple=True, metavar="KEY", help="revert to default")
@json_option
def alter_config(bootstrap, security, topic, configs, deletes, as_json):
    """Set or revert topic configs (IncrementalAlterConfigs).

    \b
    Examples:
      quorumlog topics alter-config --topic events --config retention.ms=3600000
      quorumlog topics alter-config --topic events --delete-config retention.ms
    """
    config_map = parse_key_values(configs, "--config")
    if not config_map and not deletes:
        raise click.UsageError("give at least one --config KEY=VALUE or --delete-config KEY")

    async def main() -> dict[str, str | None]:
        async with AdminClient(bootstrap, connector=security.connector) as admin:
            await admin.alter_topic_configs(topic, config_map, deletes)
            entries = await admin.describe_topic_configs(topic)
            return {e.name: e.value for e in entries if e.is_override}

    overrides = run_client(main)
    if as_json:
        echo_json({"topic": topic, "configs": overrides})
    else:
        click.echo(f"Altered configs of topic {topic}; overrides now: "
                   + (",".join(f"{k}={v}" for k, v in sorted(overrides.items())) or "-"))  # fmt: skip


@topics.command("add-partitions")
@bootstrap_option
@command_config_option
@click.option("--topic", "-t", required=True)
@click.option("--partitions", "-p", type=click.IntRange(1), required=True, help="new total")
def add_partitions(bootstrap, security, topic, partitions):
    """Grow a topic to a new total partition count (CreatePartitions).

    \b
    Example:
      quorumlog topics add-partitions --topic events --partitions 12
    """

    async def main() -> None:
        async with AdminClient(bootstrap, connector=security.connector) as admin:
            await admin.create_partitions(topic, partitions)

    run_client(main)
    click.echo(f"Topic {topic} now has {partitions} partitions.")


@topics.command("elect-leaders")
@bootstrap_option
@command_config_option
@click.option("--topic", "-t", help="only this topic (default: every topic)")
@click.option("--partition", "-p", "partitions", type=click.IntRange(0), multiple=True,
              help="only these partitions of --topic (repeatable)")  # fmt: skip
@click.option(
    "--election-type",
    type=click.Choice(["preferred", "unclean"]),
    default="preferred",
    show_default=True,
    help="preferred: move leadership to each partition's first replica when it is in sync; "
    "unclean: elect a leader for leaderless partitions, even an out-of-sync replica "
    "(records only the lost replicas held are gone)",
)
@json_option
def elect_leaders(bootstrap, security, topic, partitions, election_type, as_json):
    """Run leader elections (like kafka-leader-election.sh).

    \b
    Examples:
      quorumlog topics elect-leaders                       # preferred, every partition
      quorumlog topics elect-leaders --topic events --partition 0 --partition 3
      quorumlog topics elect-leaders --topic events --election-type unclean
    """
    if partitions and topic is None:
        raise CommandError("--partition needs --topic")

    async def main() -> dict[tuple[str, int], ErrorCode]:
        async with AdminClient(bootstrap, connector=security.connector) as admin:
            wanted = None
            if topic is not None:
                chosen = partitions or range(len((await admin.describe_topic(topic)).partitions))
                wanted = {topic: list(chosen)}
            return await admin.elect_leaders(0 if election_type == "preferred" else 1, wanted)

    results = run_client(main)
    rows = [(t, p, code.name) for (t, p), code in sorted(results.items())]
    if as_json:
        echo_json([{"topic": t, "partition": p, "result": r} for t, p, r in rows])
    elif not rows:
        click.echo("No partition needed an election.")
    else:
        print_table(["TOPIC", "PARTITION", "RESULT"], rows)
    failed = [r for _, _, r in rows if r not in ("NONE", "ELECTION_NOT_NEEDED")]
    if failed:
        raise SystemExit(1)


def _broker_ids(value: str) -> list[int]:
    try:
        ids = [int(part) for part in value.split(",")]
    except ValueError:
        raise CommandError(f"--replicas: broker ids separated by commas, not {value!r}") from None
    if any(i < 0 for i in ids):
        raise CommandError(f"--replicas: negative broker id in {value!r}")
    return ids


@topics.command("reassign")
@bootstrap_option
@command_config_option
@click.option("--topic", "-t", required=True)
@click.option("--partition", "-p", type=click.IntRange(0), required=True)
@click.option("--replicas", help="the new replica list, e.g. 2,3 (the first is preferred leader)")
@click.option("--cancel", is_flag=True, help="cancel the partition's ongoing reassignment")
def reassign(bootstrap, security, topic, partition, replicas, cancel):
    """Move a partition's replicas to other brokers (like kafka-reassign-partitions.sh).

    The new replicas copy the log from the leader while writes go on; once they are in sync the
    old ones are removed (and delete their copy). `reassignments` shows what is still moving.

    \b
    Examples:
      quorumlog topics reassign --topic events --partition 0 --replicas 2,3
      quorumlog topics reassign --topic events --partition 0 --cancel
    """
    if cancel == (replicas is not None):
        raise CommandError("give exactly one of --replicas and --cancel")
    target = None if cancel else _broker_ids(replicas)

    async def main() -> None:
        async with AdminClient(bootstrap, connector=security.connector) as admin:
            await admin.alter_partition_reassignment(topic, partition, target)

    run_client(main)
    if target is None:
        click.echo(f"Cancelled the reassignment of {topic}-{partition}.")
    else:
        click.echo(f"Reassigning {topic}-{partition} to {','.join(map(str, target))}.")


@topics.command("reassignments")
@bootstrap_option
@command_config_option
@json_option
def reassignments(bootstrap, security, as_json):
    """List ongoing partition reassignments (replicas, adding, removing).

    \b
    Examples:
      quorumlog topics reassignments
      quorumlog topics reassignments --json
    """

    async def main() -> dict:
        async with AdminClient(bootstrap, connector=security.connector) as admin:
            return await admin.list_partition_reassignments()

    ongoing = run_client(main)
    rows = [(t, p, *(",".join(map(str, ids)) for ids in lists))
            for (t, p), lists in sorted(ongoing.items())]  # fmt: skip
    if as_json:
        echo_json([{"topic": t, "partition": p, "replicas": r, "adding": a, "removing": m}
                   for t, p, r, a, m in rows])  # fmt: skip
    elif not rows:
        click.echo("No reassignment in progress.")
    else:
        print_table(["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"], rows)


@topics.command("delete")
@bootstrap_option
@command_config_option
@click.option("--topic", "-t", required=True)
@click.option("--if-exists", is_flag=True, help="succeed if the topic does not exist")
def delete(bootstrap, security, topic, if_exists):
    """Delete a topic and its data.

    \b
    Example:
      quorumlog topics delete --topic events
    """

    async def main() -> bool:
        async with AdminClient(bootstrap, connector=security.connector) as admin:
            try:
                await admin.delete_topic(topic)
            except KafkaError as exc:
                if if_exists and exc.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    return False
                raise
            return True

    deleted = run_client(main)
    click.echo(f"Deleted topic {topic}." if deleted else f"Topic {topic} does not exist.")


__all__ = ["topics", "describe_with_offsets", "CommandError"]
