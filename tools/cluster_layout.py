"""Formatting a local cluster directory: one sub-directory and `node.toml` per node.

`DIR/node-i` (i = 1..N) holds node i's config, its partition logs and its metadata quorum
files. Node i serves Kafka on base_port + i - 1, controller RPCs on controller_base_port + i - 1
and Raft on raft_base_port + i - 1, Prometheus /metrics on metrics_base_port + i - 1
(default base_port + 300), all on 127.0.0.1, or on node i's own address `hosts[i - 1]` (the
nemesis on a network of namespaces: each node on a host of its own). `extra_properties` (e.g. the demo's short broker
session timeout) are added to every node's config. Every node is a combined controller+broker
up to `max_controllers` (3, a quorum that survives one failure); further nodes are brokers only.
Formatting an already formatted directory changes nothing, so `up` restarts the same cluster.
Each node's `node.toml` is built and written by tools/node_format.py, as `quorumlog format` does
on each host of a multi-host cluster.
`secure` (up --secure) makes every node's Kafka listener SASL_SSL with a generated CA and users
(tools/secure_cluster.py); the listener keeps the node's Kafka port.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from log.common.node_config import NODE_CONFIG_FILE, NodeConfig, Voter
from tools.node_format import format_node, new_cluster_id, new_secret, node_properties
from tools.secure_cluster import secure_properties

MAX_CONTROLLERS = 3
HOST = "127.0.0.1"


LOCAL_OFFSETS_TOPIC_PARTITIONS = 5  # __consumer_offsets partitions of a local cluster
LOCAL_TRANSACTION_STATE_PARTITIONS = 5  # __transaction_state partitions of a local cluster


@dataclass(frozen=True, slots=True)
class ClusterLayout:
    data_dir: Path
    node_count: int
    base_port: int = 9092
    controller_base_port: int | None = None
    raft_base_port: int | None = None
    metrics_base_port: int | None = None
    extra_properties: tuple[tuple[str, object], ...] = ()
    secure: bool = False
    hosts: tuple[str, ...] = ()  # node i's address is hosts[i - 1]; empty: all on HOST

    def __post_init__(self) -> None:
        if self.node_count < 1:
            raise ValueError("--nodes must be at least 1")
        top = max(self.base_port, self.controller_port(1), self.raft_port(1), self.metrics_port(1))
        top += self.node_count
        if self.hosts and len(self.hosts) != self.node_count:
            raise ValueError(f"{len(self.hosts)} host addresses for {self.node_count} nodes")
        if self.base_port < 1024 or top > 65535:
            raise ValueError(f"ports {self.base_port}..{top} are outside 1024..65535")

    def controller_port(self, node_id: int) -> int:
        base = self.controller_base_port or self.base_port + 100
        return base + node_id - 1

    def raft_port(self, node_id: int) -> int:
        base = self.raft_base_port or self.base_port + 200
        return base + node_id - 1

    def metrics_port(self, node_id: int) -> int:
        base = self.metrics_base_port or self.base_port + 300
        return base + node_id - 1

    def host(self, node_id: int) -> str:
        return self.hosts[node_id - 1] if self.hosts else HOST

    def kafka_port(self, node_id: int) -> int:
        return self.base_port + node_id - 1

    def node_dir(self, node_id: int) -> Path:
        return self.data_dir / f"node-{node_id}"

    @property
    def node_ids(self) -> range:
        return range(1, self.node_count + 1)

    @property
    def controller_ids(self) -> range:
        return range(1, min(self.node_count, MAX_CONTROLLERS) + 1)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.host(i)}:{self.kafka_port(i)}" for i in self.node_ids)

    def node_properties(
        self,
        node_id: int,
        cluster_id: str,
        password: str,
        security: dict[str, object] | None = None,
    ) -> dict[str, object]:
        kafka_listener = "SASL_SSL" if security else "PLAINTEXT"
        controllers = [Voter(i, self.host(i), self.controller_port(i)) for i in self.controller_ids]
        raft = [Voter(i, self.host(i), self.raft_port(i)) for i in self.controller_ids]
        return node_properties(
            node_id=node_id,
            cluster_id=cluster_id,
            secret=password,
            listeners=f"{kafka_listener}://{self.host(node_id)}:{self.kafka_port(node_id)}",
            controllers=controllers,
            raft_voters=raft,
            extra={
                "metrics.port": self.metrics_port(node_id),
                # Kafka's 50 partitions x 3 replicas is a lot of logs for a laptop cluster
                "offsets.topic.num.partitions": LOCAL_OFFSETS_TOPIC_PARTITIONS,
                "transaction.state.log.num.partitions": LOCAL_TRANSACTION_STATE_PARTITIONS,
                # as Kafka's quickstart server.properties: no 3 s wait for a group's first members
                "group.initial.rebalance.delay.ms": 0,
                **(security or {}),
                **dict(self.extra_properties),
            },
        )


def format_cluster(layout: ClusterLayout) -> list[NodeConfig]:
    """Create missing node directories and configs; keep existing ones as they are."""
    existing = sorted(layout.data_dir.glob(f"node-*/{NODE_CONFIG_FILE}"))
    cluster_id = password = None
    if existing:
        first = NodeConfig.load(existing[0].parent)
        cluster_id = first.props["cluster.id"]
        password = first.props["controller.quorum.password"]
    cluster_id = cluster_id or new_cluster_id()
    password = password or new_secret()
    security: dict[int, dict[str, object]] = {}
    if layout.secure and not existing:
        security = secure_properties(layout.data_dir, layout.node_ids)
    configs = []
    for node_id in layout.node_ids:
        node_dir = layout.node_dir(node_id)
        path = node_dir / NODE_CONFIG_FILE
        if not path.exists():
            props = layout.node_properties(node_id, cluster_id, password, security.get(node_id))
            configs.append(format_node(node_dir, props))
        else:
            configs.append(NodeConfig.load(node_dir))
    return configs
