"""`quorumlog status`: the cluster at a glance, from any broker.

Nodes (live brokers, DescribeCluster), the active controller, every partition with leader,
replicas, ISR and high watermark, and the partitions that need attention: under-replicated
(ISR smaller than the replica set) and offline (no leader).

Lag comes from DescribeLogDirs, asked of every live broker at once: each replica's
`offset_lag` (Kafka's: max(high_watermark - log_end_offset, 0) of that replica's log) and
`partition_size` in bytes. A partition's `lag` is the largest over its replicas, or None
(`?` in the table) when a replica's broker did not answer or does not report the partition
(stopped, fenced, unreachable), so one dead broker never fails the command.
"""

from __future__ import annotations

import click
import trio

from log.common.errors import KafkaError
from producer.connection import ConnectionFailedError
from tools.admin_client import AdminClient, BrokerInfo, ReplicaLogInfo
from tools.cli_support import (
    bootstrap_option,
    command_config_option,
    echo_json,
    json_option,
    node_list,
    print_table,
    run_client,
)
from tools.client_security import PLAINTEXT, ClientSecurity
from tools.topics_cmd import describe_with_offsets

NO_LEADER = -1
UNKNOWN = "?"
LogDirsByBroker = dict[int, dict[tuple[str, int], ReplicaLogInfo] | None]


async def replica_logs(admin: AdminClient, brokers: tuple[BrokerInfo, ...]) -> LogDirsByBroker:
    """{broker id: {(topic, partition): its replica log}}, None for a broker that failed."""
    out: LogDirsByBroker = {}

    async def ask(broker: BrokerInfo) -> None:
        try:
            dirs = await admin.describe_log_dirs(broker)
        except (ConnectionFailedError, KafkaError):
            out[broker.node_id] = None
            return
        out[broker.node_id] = {
            (r.topic, r.partition): r for d in dirs if d.error_code == 0 for r in d.replicas
        }

    async with trio.open_nursery() as nursery:
        for broker in brokers:
            nursery.start_soon(ask, broker)
    return out


def add_lag(topic: str, partition: dict, logs: LogDirsByBroker) -> None:
    """Set `replica_logs` (per replica: offset_lag, partition_size or None) and `lag`."""
    replicas = []
    for broker_id in partition["replicas"]:
        info = (logs.get(broker_id) or {}).get((topic, partition["partition"]))
        replicas.append(
            {
                "broker": broker_id,
                # A negative lag: a follower that has had no fetch answer yet (unknown).
                "offset_lag": None if info is None or info.offset_lag < 0 else info.offset_lag,
                "partition_size": None if info is None else info.partition_size,
            }
        )
    partition["replica_logs"] = replicas
    lags = [r["offset_lag"] for r in replicas]
    partition["lag"] = None if not lags or None in lags else max(lags)


async def cluster_status(bootstrap: str, security: ClientSecurity = PLAINTEXT) -> dict:
    async with AdminClient(bootstrap, connector=security.connector) as admin:
        cluster = await admin.describe_cluster()
        topics = await describe_with_offsets(admin, None)
        logs = await replica_logs(admin, cluster.brokers)
    under_replicated = []
    offline = []
    for topic in topics:
        for p in topic["partitions"]:
            add_lag(topic["name"], p, logs)
            if len(p["isr"]) < len(p["replicas"]):
                under_replicated.append({"topic": topic["name"], "partition": p["partition"]})
            if p["leader"] == NO_LEADER:
                offline.append({"topic": topic["name"], "partition": p["partition"]})
    return {
        "cluster_id": cluster.cluster_id,
        "controller_id": cluster.controller_id,
        "nodes": [{"node_id": b.node_id, "host": b.host, "port": b.port} for b in cluster.brokers],
        "topics": topics,
        "under_replicated_partitions": under_replicated,
        "offline_partitions": offline,
    }


@click.command("status")
@bootstrap_option
@command_config_option
@json_option
def status(bootstrap, security, as_json):
    """Show nodes, the active controller, partitions (leader/ISR/HW/lag) and problems.

    Lag is the largest offset lag its replicas' brokers report (DescribeLogDirs); `?` when a
    replica's broker does not answer. --json adds each replica's offset_lag and partition_size.

    \b
    Examples:
      quorumlog status
      quorumlog status --bootstrap 127.0.0.1:9093 --json | jq .controller_id
    """
    state = run_client(cluster_status, bootstrap, security)
    if as_json:
        echo_json(state)
        return
    click.echo(f"cluster {state['cluster_id']}: {len(state['nodes'])} live nodes, "
               f"controller {state['controller_id']}")  # fmt: skip
    print_table(
        ["Node", "Host", "Port", "Role"],
        [
            (
                n["node_id"],
                n["host"],
                n["port"],
                "controller (active)" if n["node_id"] == state["controller_id"] else "",
            )
            for n in state["nodes"]
        ],  # fmt: skip
        title="Nodes",
    )
    rows = [
        (t["name"], p["partition"], p["leader"], node_list(p["replicas"]), node_list(p["isr"]),
         p["high_watermark"], UNKNOWN if p["lag"] is None else p["lag"])
        for t in state["topics"] for p in t["partitions"]
    ]  # fmt: skip
    print_table(["Topic", "Partition", "Leader", "Replicas", "ISR", "HighWatermark", "Lag"], rows,
                title="Partitions")  # fmt: skip
    for kind, label in (("under_replicated_partitions", "under-replicated"),
                        ("offline_partitions", "offline")):  # fmt: skip
        problems = state[kind]
        listed = ", ".join(f"{x['topic']}-{x['partition']}" for x in problems) or "none"
        click.echo(f"{label} partitions: {listed}")
