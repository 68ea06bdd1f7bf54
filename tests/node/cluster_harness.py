"""Real-process cluster harness for tests/node: format node dirs, start/kill `quorumlog node`.

Nodes run `quorumlog node --data-dir DIR/node-i` (forked from a fork server that imported the
node's modules once: node_launcher.py) with short heartbeat/session timeouts. Every started
process is remembered in `STARTED` and killed by the conftest fixture.
Controller-side state is read over the wire (MetadataFetch, ControllerClient); what a broker
replayed is read from its log lines (`partition t-0 leader=...`).
"""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import trio
from node_launcher import NodeProcess, start_node

from log.common.node_config import NODE_CONFIG_FILE, NodeConfig, Voter, to_toml
from log.security.tls import controller_contexts
from quorum.controller_client import ControllerClient
from quorum.state_machine import MetadataStateMachine
from tools.cluster_layout import ClusterLayout

REPO = Path(__file__).resolve().parents[2]
STARTED: list[subprocess.Popen | NodeProcess] = []
HEARTBEAT_INTERVAL_MS = 200
PASSWORD = "test-password"  # controller.quorum.password of every test cluster
SESSION_TIMEOUT_MS = 1500
TEST_PROPS = {
    "broker.heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
    "broker.session.timeout.ms": SESSION_TIMEOUT_MS,
    "metadata.log.max.record.count.between.snapshots": 10,
    "group.initial.rebalance.delay.ms": 0,  # Kafka's 3 s initial group delay slows tests only
}


def kill_started() -> None:
    """Kill every node process a test started that is still running (no process outlives it)."""
    while STARTED:
        process = STARTED.pop()
        if process.poll() is None:
            process.kill()
            process.wait()


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def one_node_config(data_dir: Path, base: int, extra: dict | None = None) -> NodeConfig:
    """An in-process combined node 1 on ports base (Kafka), +100 (controller), +200 (Raft),
    with fast heartbeats (the in-process service tests); `extra` properties on top."""
    return in_process_config(data_dir, base, 1, 1, extra)


def in_process_config(
    data_dir: Path, base: int, node_id: int, controllers: int, extra: dict | None = None
) -> NodeConfig:
    """Node `node_id` of an in-process cluster whose nodes 1..`controllers` are combined nodes
    and any later one a broker only; node i listens on base+i-1 (Kafka), +100 (controller) and
    +200 (Raft), the ports free_base_port(count) reserves; fast heartbeats; `extra` on top."""
    ids = range(1, controllers + 1)
    controller = node_id in ids
    listeners = f"PLAINTEXT://127.0.0.1:{base + node_id - 1}"
    if controller:
        listeners += f",CONTROLLER://127.0.0.1:{base + 99 + node_id}"
    return NodeConfig.from_properties(
        data_dir,
        {
            "node.id": node_id,
            "cluster.id": "c1",
            "process.roles": "broker,controller" if controller else "broker",
            "listeners": listeners,
            "controller.quorum.voters": ",".join(f"{i}@127.0.0.1:{base + 99 + i}" for i in ids),
            "controller.quorum.raft.voters": ",".join(
                f"{i}@127.0.0.1:{base + 199 + i}" for i in ids
            ),
            "controller.quorum.password": "pw",
            "broker.heartbeat.interval.ms": 100,
            "broker.session.timeout.ms": 1000,
            **(extra or {}),
        },
    )


def _port_range() -> tuple[int, int]:
    """This process's share of 10000..32500 (below Linux's ephemeral range, 32768+): the whole
    of it, or under pytest-xdist one slice per worker, so that workers never race for a port."""
    low, high = 10000, 32500
    worker, count = (
        os.environ.get("PYTEST_XDIST_WORKER"),
        os.environ.get("PYTEST_XDIST_WORKER_COUNT"),
    )
    if worker and count:
        width = (high - low) // int(count)
        low += width * int(worker.removeprefix("gw"))
        high = low + width
    return low, high


def free_base_port(count: int) -> int:
    """A base port with base..base+count, +100.., +200.., +300.. (Kafka, controller, Raft,
    metrics) all free (seeded by pid)."""
    rng = random.Random(os.getpid() ^ time.time_ns())
    low, high = _port_range()
    for _ in range(200):
        base = rng.randrange(low, high - 300 - count)
        ports = [base + k + i for k in (0, 100, 200, 300) for i in range(count)]
        if all(_port_free(p) for p in ports):
            return base
    raise RuntimeError("no free ports")


class Cluster:
    def __init__(
        self,
        data_dir: Path,
        node_count: int,
        base_port: int | None = None,
        extra_props: dict | None = None,
        shared: bool = False,
    ) -> None:
        """`extra_props` go into every node's config on top of TEST_PROPS. A `shared` cluster
        is one a fixture keeps for several tests (and stops itself): kill_started, which other
        tests' fixtures call, leaves its processes alone."""
        self.shared = shared
        self.layout = ClusterLayout(data_dir, node_count, base_port or free_base_port(node_count))
        self.processes: dict[int, NodeProcess | subprocess.Popen] = {}
        cluster_id, password = "test-cluster", PASSWORD
        for node_id in self.layout.node_ids:
            node_dir = self.layout.node_dir(node_id)
            path = node_dir / NODE_CONFIG_FILE
            if not path.exists():
                node_dir.mkdir(parents=True, exist_ok=True)
                props = self.layout.node_properties(node_id, cluster_id, password)
                props.update(TEST_PROPS)
                props.update(extra_props or {})
                path.write_text(to_toml(props))

    def config(self, node_id: int) -> NodeConfig:
        return NodeConfig.load(self.layout.node_dir(node_id))

    def start(self, node_id: int) -> None:
        node_dir = self.layout.node_dir(node_id)
        process = start_node(node_dir, node_dir / "node.log", cwd=REPO)
        if not self.shared:
            STARTED.append(process)
        self.processes[node_id] = process

    def wait_ready(self, node_id: int, timeout_s: float = 60) -> None:
        process = self.processes[node_id]
        assert process.stdout is not None
        deadline = time.monotonic() + timeout_s
        os.set_blocking(process.stdout.fileno(), False)
        buffer = b""
        while time.monotonic() < deadline:
            chunk = process.stdout.read()
            if chunk:
                buffer += chunk
                if b"READY" in buffer.splitlines():
                    return
            if process.poll() is not None:
                raise AssertionError(
                    f"node {node_id} exited with {process.returncode}: {self.log(node_id)[-2000:]}"
                )
            time.sleep(0.05)
        raise AssertionError(f"node {node_id} not ready: {self.log(node_id)[-2000:]}")

    def start_all(self) -> None:
        for node_id in self.layout.node_ids:
            self.start(node_id)
        for node_id in self.layout.node_ids:
            self.wait_ready(node_id)

    def kill9(self, node_id: int) -> None:
        process = self.processes.pop(node_id)
        process.kill()
        process.wait()

    def terminate(self, node_id: int, timeout_s: float = 20) -> int:
        process = self.processes.pop(node_id)
        process.send_signal(signal.SIGTERM)
        return process.wait(timeout=timeout_s)

    def log(self, node_id: int) -> str:
        return (self.layout.node_dir(node_id) / "node.log").read_text(errors="replace")

    def log_matches(self, node_id: int, pattern: str) -> list[re.Match]:
        return list(re.finditer(pattern, self.log(node_id)))

    def controller_voters(self, node_ids=None) -> list[Voter]:
        ids = node_ids or self.layout.controller_ids
        return [Voter(i, "127.0.0.1", self.layout.controller_port(i)) for i in ids]

    def client(self, node_ids=None) -> ControllerClient:
        # TLS when the nodes' controller listener is SSL (up --secure), as their brokers do
        config_dir = self.layout.node_dir(self.layout.controller_ids[0])
        tls = None
        if (config_dir / NODE_CONFIG_FILE).exists():
            tls = controller_contexts(NodeConfig.load(config_dir))[1]
        voters = self.controller_voters(node_ids)
        return ControllerClient(voters, secret=PASSWORD, max_attempts=40, ssl_context=tls)

    async def image_from(self, node_id: int):
        """The committed image of controller `node_id` (MetadataFetch from its own state)."""
        client = self.client([node_id])
        machine = MetadataStateMachine()
        try:
            while True:
                with trio.fail_after(10):
                    r = await client.metadata_fetch(-1, machine.last_applied_offset, 0)
                if r.checkpoint is not None and r.checkpoint_offset > machine.last_applied_offset:
                    machine = MetadataStateMachine.from_checkpoint(bytes(r.checkpoint))
                for b in r.batches:
                    machine.apply(b.offset, bytes(b.payload))
                if machine.last_applied_offset >= r.committed_offset:
                    return machine.image
        finally:
            await client.aclose()

    def stop_all(self) -> None:
        for node_id in list(self.processes):
            self.kill9(node_id)


async def wait_until(predicate, timeout_s: float, interval_s: float = 0.05):
    """Poll an async predicate until it returns a truthy value (real-process tests only)."""
    with trio.fail_after(timeout_s):
        while True:
            value = await predicate()
            if value:
                return value
            await trio.sleep(interval_s)
