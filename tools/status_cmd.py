"""`quorumlog status`: the cluster at a glance, from any broker.

Nodes (live brokers, DescribeCluster), the active controller, every partition with leader,
replicas, ISR and high watermark, and the partitions that need attention: under-replicated
(ISR smaller than the replica set) and offline (no leader).
"""

from __future__ import annotations

import click

from tools.admin_client import AdminClient
from tools.cli_support import (
    bootstrap_option,
    echo_json,
    json_option,
    node_list,
    print_table,
    run_client,
)
from tools.topics_cmd import describe_with_offsets

NO_LEADER = -1


async def cluster_status(bootstrap: str) -> dict:
    async with AdminClient(bootstrap) as admin:
        cluster = await admin.describe_cluster()
        topics = await describe_with_offsets(admin, None)
    under_replicated = []
    offline = []
    for topic in topics:
        for p in topic["partitions"]:
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
@json_option
def status(bootstrap, as_json):
    """Show nodes, the active controller, partitions (leader/ISR/HW) and problems.

    \b
    Examples:
      quorumlog status
      quorumlog status --bootstrap 127.0.0.1:9093 --json | jq .controller_id
    """
    state = run_client(cluster_status, bootstrap)
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
         p["high_watermark"])
        for t in state["topics"] for p in t["partitions"]
    ]  # fmt: skip
    print_table(["Topic", "Partition", "Leader", "Replicas", "ISR", "HighWatermark"], rows,
                title="Partitions")  # fmt: skip
    for kind, label in (("under_replicated_partitions", "under-replicated"),
                        ("offline_partitions", "offline")):  # fmt: skip
        problems = state[kind]
        listed = ", ".join(f"{x['topic']}-{x['partition']}" for x in problems) or "none"
        click.echo(f"{label} partitions: {listed}")
