"""Replacing a lost controller host (KIP-853's remove-controller / add-controller) on a network of
namespaces (netns_harness.py), while a producer writes with acks=all.

Three combined controller+broker hosts; host 3's process is killed and its link taken down for
good. The operator removes voter 3 (`metadata-quorum remove-controller`), formats a fourth host
with `format --join` (it asks the running quorum for the voters), starts it and adds it
(`add-controller`). Then: three voters, all connected; nothing the producer had acknowledged is
lost; metadata still commits; and voter 4 really votes: with host 1 stopped, voters 2 and 4
alone elect a leader and commit a topic. Host 1 then restarts from a node.toml that still names
voters 1, 2, 3: it learns the voter set from its own checkpoint and journal (checkpoints are
taken every few records here, so a checkpoint carries the set) and rejoins as a voter.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from netns_harness import CONTROLLER_PORT, REPO, HostCluster, Network, unavailable_reason

_reason = unavailable_reason()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.interop,
    pytest.mark.skipif(_reason is not None, reason=f"netns harness: {_reason}"),
]

CONTROLLERS = 3
PROPERTIES = {
    "broker.heartbeat.interval.ms": 500,
    "broker.session.timeout.ms": 4000,
    "replica.lag.time.max.ms": 10000,
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.num.partitions": 1,
    # a checkpoint every few metadata records: the new voter gets a snapshot, and checkpoints
    # (not only the journal) carry the voter set across restarts
    "metadata.log.max.record.count.between.snapshots": 20,
}
WAIT_S = 120.0  # bound on every wait for the cluster to settle (not a speed assertion)


def wait_for(predicate, what: str, timeout_s: float = WAIT_S):
    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    while True:
        try:
            value = predicate()
        except Exception as exc:  # noqa: BLE001 - a cluster settling answers with errors
            value, last = None, exc
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} (last: {last!r})")
        time.sleep(0.3)


def cli(cluster: HostCluster, host: int, *args: str) -> subprocess.CompletedProcess:
    """`quorumlog ARGS` run on `host` (inside its namespace), as an operator there would."""
    argv = [sys.executable, "-m", "tools", *args]
    return cluster.network.run(host, argv, cwd=REPO, check=False, timeout=WAIT_S)


def describe(cluster: HostCluster, host: int) -> dict:
    done = cli(cluster, host, "metadata-quorum", "describe", "--json",
               "--data-dir", str(cluster.node_dir(host)))  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def healthy_voters(cluster: HostCluster, host: int, expected: set[int]) -> dict | None:
    """describe, when its voters are `expected`, all connected and caught up to the leader."""
    quorum = describe(cluster, host)
    voters = quorum["voters"]
    if {v["id"] for v in voters} != expected or not all(v["connected"] for v in voters):
        return None
    leader = [v for v in voters if v["id"] == quorum["leader_id"]][0]
    if any(v["match_index"] < leader["match_index"] - 5 for v in voters):
        return None  # a follower far behind (a few entries in flight are fine)
    return quorum


def create_topic(bootstrap: str, replication_factor: int = 2) -> str:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    client = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})
    new = NewTopic(topic, 1, replication_factor)
    client.create_topics([new], operation_timeout=30)[topic].result(timeout=60)
    return topic


class BackgroundProducer:
    """Produces numbered values with acks=all until stopped; remembers what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.acked: set[str] = set()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "message.timeout.ms": 120000, "request.timeout.ms": 10000, "linger.ms": 5,
        })  # fmt: skip
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_delivery(self, err, msg) -> None:
        if err is None:
            self.acked.add(msg.value().decode())
        else:
            self.errors.append(str(err))

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            self._producer.produce(self.topic, str(n).encode(), on_delivery=self._on_delivery)
            n += 1
            self._producer.poll(0.01)

    def acked_count(self) -> int:
        return len(self.acked)

    def stop(self, flush_s: float = 180) -> int:
        """Stop producing; what is still unacknowledged after `flush_s`."""
        self._stop.set()
        self._thread.join()
        return self._producer.flush(flush_s)


def consume_all(bootstrap: str, topic: str) -> set[str]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False})  # fmt: skip
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, 0)])
        values: set[str] = set()
        read = 0
        deadline = time.monotonic() + WAIT_S
        while read < high and time.monotonic() < deadline:
            msg = c.poll(1.0)
            if msg is not None and msg.error() is None:
                values.add(msg.value().decode())
                read += 1
        return values
    finally:
        c.close()


@pytest.fixture
def network():
    network = Network(CONTROLLERS + 1)  # host 4: the replacement controller host
    try:
        yield network
    finally:
        network.close()


def test_replace_a_lost_controller_host_while_producing(network, tmp_path):
    cluster = HostCluster(network, tmp_path, CONTROLLERS, PROPERTIES, host_count=CONTROLLERS)
    for host in cluster.hosts:
        cluster.start(host)
    for host in cluster.hosts:
        cluster.wait_ready(host)
    wait_for(lambda: healthy_voters(cluster, 1, {1, 2, 3}), "three healthy voters")
    survivors = f"{cluster.addresses[1]}:9092,{cluster.addresses[2]}:9092"
    topic = create_topic(survivors, replication_factor=3)  # min.insync.replicas 2: one may go
    writer = BackgroundProducer(survivors, topic)
    try:
        _replace_controller_3_by_4(cluster, network, tmp_path, writer, survivors)
    finally:
        writer.stop(flush_s=0)


def _replace_controller_3_by_4(cluster, network, tmp_path, writer, survivors) -> None:
    topic = writer.topic
    wait_for(lambda: writer.acked_count() > 50, "first acknowledged writes")

    # Host 3 is lost for good: its process dies and its link goes down.
    cluster.kill(3)
    network.link_down(3)
    removed = cli(cluster, 1, "metadata-quorum", "remove-controller", "--controller-id", "3",
                  "--data-dir", str(cluster.node_dir(1)))  # fmt: skip
    assert removed.returncode == 0, removed.stderr
    assert "voters now [1, 2]" in removed.stdout
    wait_for(lambda: healthy_voters(cluster, 2, {1, 2}), "voters 1 and 2")

    # A new host: formatted with --join (the running quorum tells it the voters), started,
    # then added as a voter.
    host4 = CONTROLLERS + 1
    secret_copy = tmp_path / "secret-host-4"
    secret_copy.write_bytes(cluster.secret_file.read_bytes())
    secret_copy.chmod(0o600)
    address4 = network.address(host4)
    joined = cli(
        cluster, host4, "format", "--join", "--data-dir", str(cluster.node_dir(host4)),
        "--node-id", str(host4), "--cluster-id", cluster.cluster_id,
        "--controllers", f"1@{cluster.addresses[1]}:{CONTROLLER_PORT},"
        f"{host4}@{address4}:{CONTROLLER_PORT}",
        "--listeners", "PLAINTEXT://0.0.0.0:9092",
        "--advertised-listeners", f"PLAINTEXT://{address4}:9092",
        "--secret-file", str(secret_copy),
        *[arg for name, value in PROPERTIES.items() for arg in ("-p", f"{name}={value}")],
    )  # fmt: skip
    assert joined.returncode == 0, joined.stderr
    node_toml = (cluster.node_dir(host4) / "node.toml").read_text()
    assert f"2@{cluster.addresses[2]}:{CONTROLLER_PORT}" in node_toml  # learnt from the quorum
    assert f"3@{cluster.addresses[3]}" not in node_toml  # the removed voter is gone
    cluster.start(host4)
    cluster.wait_ready(host4)
    added = cli(cluster, host4, "metadata-quorum", "add-controller",
                "--data-dir", str(cluster.node_dir(host4)))  # fmt: skip
    assert added.returncode == 0, added.stderr + cluster.log(host4)
    assert "voters now [1, 2, 4]" in added.stdout
    quorum = wait_for(lambda: healthy_voters(cluster, 1, {1, 2, 4}), "voters 1, 2 and 4")
    voter4 = [v for v in quorum["voters"] if v["id"] == host4][0]
    assert voter4["controller"] == f"{address4}:{CONTROLLER_PORT}"

    # The producer ran throughout: nothing it had acknowledged is lost.
    acked_before = writer.acked_count()
    wait_for(lambda: writer.acked_count() > acked_before + 50, "writes after the replacement")
    assert writer.stop() == 0
    assert writer.acked
    missing = writer.acked - consume_all(survivors, topic)
    assert not missing, f"{len(missing)} acknowledged values lost, e.g. {sorted(missing)[:5]}"

    # Voter 4 votes: with host 1 stopped, voters 2 and 4 elect a leader and commit metadata.
    cluster.stop(1)
    everyone_else = f"{cluster.addresses[2]}:9092,{address4}:9092"
    wait_for(lambda: create_topic(everyone_else), "a topic committed by voters 2 and 4")

    # Host 1 restarts from a node.toml naming voters 1, 2, 3: it learns 1, 2, 4 from its own
    # checkpoint and journal and is a voter again.
    cluster.start(1)
    cluster.wait_ready(1)
    wait_for(lambda: healthy_voters(cluster, 2, {1, 2, 4}), "voter 1 back")
    assert create_topic(f"{cluster.addresses[1]}:9092")
