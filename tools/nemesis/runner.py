"""The nemesis run: a cluster, writers, rounds of faults, then the verdict.

    verdict = await run(NemesisConfig(rounds=100, seed=7, data_dir=Path("nemesis")), echo)

A 5-node cluster (3 controllers) as `quorumlog up` lays it out, with a shorter broker session
(`SESSION_PROPS`, printed beside the result) so that a paused or partitioned broker is fenced
within a round; a topic with RF 3 and `min.insync.replicas` 2; idempotent acks=all producers
(workload.py). Each round injects one fault picked by the seeded RNG, holds it for half to
twice `fault_seconds` (so both shorter and longer than a broker session), heals it, and waits
until every node is up and every ISR is full again (availability is reported, never judged).
Faults:

    kill9             SIGKILL one node, restart it
    pause             SIGSTOP one node, SIGCONT it
    kill-controller   SIGKILL the active controller's node, restart it
    kill-two          SIGKILL two nodes at once, restart both
    partition         cut one node off the network (iptables; root only, network.py; with
                      --network netns: iptables inside its host's namespace, both ways)
    link-down         --network netns: the node's host loses its link (ip link set down)
    asymmetric-cut    --network netns: the node's host drops what it receives, still sends
    disk-full         fill one node's log disk (every node's log directory is a tmpfs of
                      LOG_DISK_SIZE; root only, disk.py): its next write fails and the node
                      stops (its log directory went offline); room again, it is restarted

`network="netns"` (root, iproute2; namespaces.py) runs every node on a host of its own: a
network namespace with its own address, joined by a bridge; clients stay in the root
namespace. Partitions are then real ones, made on the host the way they happen to a machine.

After the last round the producers stop and drain, every record is read back, the cluster
stops cleanly, and checker.py compares (lost, duplicated, inconsistent offsets, order per
producer, replicas byte-identical below the high watermark). The data directory and the
history (history.jsonl: every fault, heal and delivery report) are kept, and with
`client_debug` each producer's librdkafka debug log (producer-<p>.log).
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import trio

from tools.admin_client import AdminClient
from tools.cluster_layout import ClusterLayout
from tools.nemesis import disk, namespaces, network
from tools.nemesis.checker import Verdict, check
from tools.nemesis.workload import DEBUG, History, Producers, read_back, replica_batches
from tools.up import LocalCluster, NodeProcess, stop_all

TOPIC = "nemesis"
FAULTS = ("kill9", "pause", "kill-controller", "kill-two", "partition", "disk-full")
NETNS_FAULTS = ("link-down", "asymmetric-cut")  # only on --network netns
ALL_FAULTS = FAULTS + NETNS_FAULTS
NETWORKS = ("loopback", "netns")
LOG_DISK_SIZE = "256m"  # each node's log tmpfs (disk-full); memory is used only as it is filled
EXIT_GRACE_S = 2.0  # after making room, how long a node that hit the full disk may take to stop
# Kafka's 9 s session would outlast most rounds: a stopped or cut-off broker is fenced after
# 3 s here (heartbeats every 500 ms), as Jepsen's Kafka tests shorten their timeouts too.
SESSION_PROPS = (("broker.session.timeout.ms", 3000), ("broker.heartbeat.interval.ms", 500))
HEAL_TIMEOUT_S = 120.0
READY_TIMEOUT_S = 120.0


@dataclass
class NemesisConfig:
    data_dir: Path
    rounds: int = 10
    seed: int = 0
    faults: tuple[str, ...] = FAULTS
    nodes: int = 5
    partitions: int = 3
    producers: int = 2
    rate_per_s: float = 400.0
    fault_seconds: float = 4.0
    base_port: int = 19092
    network: str = "loopback"  # or "netns": each node on a host of its own (root)
    # librdkafka's debug contexts for the producers ("eos,msg,broker"; default: the
    # QUORUMLOG_NEMESIS_DEBUG environment variable), logged to producer-<p>.log in data_dir
    client_debug: str = DEBUG


@dataclass
class RoundResult:
    number: int
    fault: str
    description: str
    healed_s: float | None  # heal (restarts included) -> every node up and every ISR full;
    # None: not within HEAL_TIMEOUT_S


@dataclass
class NemesisResult:
    verdict: Verdict
    rounds: list[RoundResult] = field(default_factory=list)
    skipped_faults: dict[str, str] = field(default_factory=dict)
    producer_errors: list[str] = field(default_factory=list)
    unanswered: int = 0
    settings: tuple[tuple[str, object], ...] = SESSION_PROPS

    @property
    def ok(self) -> bool:
        """No safety violation (what was acknowledged is there, once, where it was said)."""
        return self.verdict.ok

    @property
    def available(self) -> bool:
        """Every write was answered (acknowledged or failed) by the end: liveness, reported
        apart from safety, as Jepsen reports indeterminate operations."""
        return not self.producer_errors and self.unanswered == 0


class Nemesis:
    def __init__(self, config: NemesisConfig, cluster: LocalCluster, nursery: trio.Nursery,
                 history: History, echo: Callable[[str], None],
                 hosts: namespaces.Network | None = None) -> None:  # fmt: skip
        self.config = config
        self.cluster = cluster
        self.layout = cluster.layout
        self.nursery = nursery
        self.history = history
        self.echo = echo
        self.rng = random.Random(config.seed)
        self.nodes = {node.node_id: node for node in cluster.nodes}
        self.isolations: list[network.Isolation] = []  # removed however the run ends
        self.hosts = hosts  # --network netns: node i runs on host i
        self.host_faults: dict[int, Callable[[], None]] = {}  # healed however the run ends

    # -- node control --------------------------------------------------------------------------

    async def _kill(self, node: NodeProcess) -> None:
        node.signal(signal.SIGKILL)
        if node.process is not None:
            await node.process.wait()

    async def _restart(self, node: NodeProcess) -> None:
        await node.restart(self.nursery)
        with trio.move_on_after(READY_TIMEOUT_S):
            await node.ready.wait()

    def log_dir(self, node_id: int) -> Path:
        return self.layout.node_dir(node_id) / "kafka-logs"

    def _ports(self, node_id: int) -> list[int]:
        ports = [self.layout.kafka_port(node_id)]
        if node_id in self.layout.controller_ids:
            ports += [self.layout.controller_port(node_id), self.layout.raft_port(node_id)]
        return ports

    async def _active_controller(self) -> int | None:
        try:
            with trio.fail_after(5):
                async with AdminClient(self.layout.bootstrap_servers,
                                       request_timeout_ms=2000) as admin:  # fmt: skip
                    return (await admin.describe_cluster()).controller_id
        except Exception:  # noqa: BLE001 - no answer now: the caller picks at random
            return None

    # -- faults --------------------------------------------------------------------------------

    async def inject(self, fault: str) -> tuple[str, Callable[[], Awaitable[None]]]:
        """Inject `fault`; (a description, an async heal)."""
        ids = sorted(self.nodes)
        if fault in ("kill9", "kill-controller", "kill-two"):
            if fault == "kill9":
                victims = [self.rng.choice(ids)]
            elif fault == "kill-two":
                victims = self.rng.sample(ids, 2)
            else:
                controller = await self._active_controller()
                victims = [controller if controller in self.nodes else self.rng.choice(ids)]
            for victim in victims:
                await self._kill(self.nodes[victim])

            async def restart() -> None:
                for victim in victims:
                    await self._restart(self.nodes[victim])

            return f"SIGKILL node {', '.join(map(str, victims))}", restart
        victim = self.rng.choice(ids)
        node = self.nodes[victim]
        if fault == "disk-full":
            filler = await trio.to_thread.run_sync(disk.fill_up, self.log_dir(victim))

            async def make_room() -> None:
                filler.unlink()
                assert node.process is not None
                with trio.move_on_after(EXIT_GRACE_S):  # a write that failed just before
                    await node.process.wait()
                if node.process.returncode is not None:  # it stopped, as it should: restart
                    await self._restart(node)

            return f"node {victim}'s log disk full", make_room
        if fault == "pause":
            node.signal(signal.SIGSTOP)

            async def resume() -> None:
                node.signal(signal.SIGCONT)

            return f"SIGSTOP node {victim}", resume
        if self.hosts is not None:
            return self._host_fault(fault, victim)
        assert fault == "partition"
        assert node.process is not None
        isolation = network.Isolation(victim, self._ports(victim), node.process.pid)
        self.isolations.append(isolation)
        isolation.apply()

        async def reconnect() -> None:
            isolation.remove()
            self.isolations.remove(isolation)

        return f"node {victim} cut off ({isolation.mode})", reconnect

    def _host_fault(self, fault: str, victim: int) -> tuple[str, Callable[[], Awaitable[None]]]:
        """A real partition on victim's host (its namespace): its link, or iptables there."""
        hosts = self.hosts
        assert hosts is not None
        heal: Callable[[], None]
        if fault == "link-down":
            hosts.link_down(victim)
            heal, what = (lambda: hosts.link_up(victim)), f"host {victim}'s link down"
        elif fault == "asymmetric-cut":
            hosts.cut(victim, receive_only=True)
            heal = lambda: hosts.heal(victim)  # noqa: E731
            what = f"host {victim} receives nothing (it still sends)"
        else:
            assert fault == "partition"
            hosts.cut(victim)
            heal, what = (lambda: hosts.heal(victim)), f"host {victim} cut off (iptables there)"
        self.host_faults[victim] = heal

        async def reconnect() -> None:
            self.host_faults.pop(victim)()

        return what, reconnect

    # -- health --------------------------------------------------------------------------------

    async def wait_healthy(self) -> float | None:
        """Seconds until every node is ready and every ISR of the topic is full, or None."""
        start = time.monotonic()
        with trio.move_on_after(HEAL_TIMEOUT_S):
            while True:
                if all(node.ready.is_set() for node in self.nodes.values()):
                    try:
                        with trio.fail_after(5):
                            async with AdminClient(self.layout.bootstrap_servers,
                                                   request_timeout_ms=2000) as admin:  # fmt: skip
                                topic = await admin.describe_topic(TOPIC)
                        if all(
                            p.leader >= 0 and len(p.isr) == len(p.replicas)
                            for p in topic.partitions
                        ):
                            return time.monotonic() - start
                    except Exception:  # noqa: BLE001 - not answering yet
                        pass
                await trio.sleep(0.25)
        return None

    async def round(self, number: int, fault: str | None = None) -> RoundResult:
        fault = fault or self.rng.choice(self.config.faults)
        description, heal = await self.inject(fault)
        self.history.write("fault", round=number, fault=fault, description=description)
        # Held from half to twice --fault-seconds: shorter than a broker session and longer.
        hold_s = self.config.fault_seconds * self.rng.uniform(0.5, 2.0)
        self.echo(f"round {number}: {description} for {hold_s:.1f} s")
        await trio.sleep(hold_s)
        healing_s = time.monotonic()
        await heal()
        self.history.write("heal", round=number, fault=fault)
        healed_s = await self.wait_healthy()
        if healed_s is not None:
            healed_s = time.monotonic() - healing_s
        self.history.write("healthy", round=number, seconds=healed_s)
        return RoundResult(number, fault, description, healed_s)


async def run(
    config: NemesisConfig,
    echo: Callable[[str], None] = print,
    order: list[str] | None = None,
) -> NemesisResult:
    """Run it; `order` fixes the faults of the rounds instead of the RNG (tests)."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    skipped: dict[str, str] = {}
    faults = tuple(config.faults)
    if config.network not in NETWORKS:
        raise ValueError(f"network {config.network!r} is not one of {', '.join(NETWORKS)}")
    if config.network == "netns":
        if (why := namespaces.unavailable_reason()) is not None:
            raise ValueError(f"--network netns: {why}")
    else:
        for host_fault in NETNS_FAULTS:
            if host_fault in faults:
                skipped[host_fault] = "only with --network netns (a host of its own per node)"
        faults = tuple(f for f in faults if f not in NETNS_FAULTS)
    if (
        config.network == "loopback"
        and "partition" in faults
        and (why := network.available()) is not None
    ):
        skipped["partition"] = why
        faults = tuple(f for f in faults if f != "partition")
    if "disk-full" in faults and (why := disk.available(config.data_dir)) is not None:
        skipped["disk-full"] = why
        faults = tuple(f for f in faults if f != "disk-full")
    if not faults:
        raise ValueError("no fault left to inject: " + "; ".join(skipped.values()))
    config.faults = faults
    hosts = namespaces.Network(config.nodes) if config.network == "netns" else None
    layout = ClusterLayout(config.data_dir, config.nodes, base_port=config.base_port,
                           extra_properties=SESSION_PROPS,
                           hosts=tuple(hosts.address(i) for i in range(1, config.nodes + 1))
                           if hosts else ())  # fmt: skip
    history = History(config.data_dir / "history.jsonl")
    history.write("start", seed=config.seed, rounds=config.rounds, faults=list(faults),
                  settings=dict(SESSION_PROPS))  # fmt: skip
    result_rounds: list[RoundResult] = []
    nemesis: Nemesis | None = None
    log_disks = []
    try:
        if "disk-full" in faults:
            for node_id in layout.node_ids:
                log_disks.append(layout.node_dir(node_id) / "kafka-logs")
                disk.mount_tmpfs(log_disks[-1], LOG_DISK_SIZE)
        async with LocalCluster(
            layout,
            echo=lambda line, **_: history.write("node", line=line),
            prefix=(lambda i: tuple(hosts.prefix(i))) if hosts else None,
        ) as cluster:
            async with AdminClient(layout.bootstrap_servers) as admin:
                await admin.create_topic(TOPIC, config.partitions, 3,
                                         {"min.insync.replicas": "2"})  # fmt: skip
            async with trio.open_nursery() as nursery:
                nemesis = Nemesis(config, cluster, nursery, history, echo, hosts)
                await nemesis.wait_healthy()
                producers = Producers(layout.bootstrap_servers, TOPIC, config.partitions,
                                      config.producers, config.rate_per_s, history,
                                      config.client_debug, config.data_dir)  # fmt: skip
                producers.start()
                await trio.sleep(1)
                for number in range(1, config.rounds + 1):
                    fault = order[number - 1] if order else None
                    result_rounds.append(await nemesis.round(number, fault))
                    await trio.sleep(0.5)
                echo("healed; draining the producers")
                await trio.to_thread.run_sync(producers.stop, 240.0)
                await nemesis.wait_healthy()
                read, marks = await trio.to_thread.run_sync(
                    read_back, layout.bootstrap_servers, TOPIC, config.partitions
                )
                nursery.cancel_scope.cancel()
            with trio.CancelScope(shield=True):
                await stop_all(cluster.nodes)  # clean: the on-disk logs are final
        replica_logs = {
            p: {
                node_id: replica_batches(
                    layout.node_dir(node_id) / "kafka-logs", TOPIC, p, marks[p]
                )  # fmt: skip
                for node_id in layout.node_ids
                if (layout.node_dir(node_id) / "kafka-logs" / f"{TOPIC}-{p}").is_dir()
            }
            for p in range(config.partitions)
        }
        verdict = check(producers.acked, producers.failed, read, replica_logs)
        result = NemesisResult(verdict, result_rounds, skipped, producers.errors,
                               producers.unanswered)  # fmt: skip
        history.write("verdict", ok=result.ok, acked=verdict.acked, failed=verdict.failed,
                      acked_without_offset=verdict.acked_without_offset,
                      read=verdict.read, violations=verdict.violations)  # fmt: skip
        return result
    finally:
        if nemesis is not None:
            for isolation in nemesis.isolations:  # an error mid-round: never leave rules behind
                isolation.remove()
            for heal in nemesis.host_faults.values():
                heal()
        for log_disk in log_disks:  # the data is kept, on the disk beneath
            disk.unmount_keeping(log_disk)
        history.close()
        if hosts is not None:
            hosts.close()
