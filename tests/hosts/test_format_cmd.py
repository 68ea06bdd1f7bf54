"""`quorumlog cluster-id` / `quorumlog format` / `quorumlog node`, as an operator runs them on
one host (real processes; no namespaces needed): what format writes, what it refuses without
touching anything, re-formatting a node with a new address, and a formatted node serving a
real client."""

from __future__ import annotations

import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from log.common.node_config import NodeConfig

pytestmark = pytest.mark.slow  # real processes (the last test runs a node)

REPO = Path(__file__).resolve().parents[2]
CONTROLLERS = "1@198.18.0.11:9093,2@198.18.0.12:9093,3@198.18.0.13:9093"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=60)  # fmt: skip


def format_args(node_dir: Path, node_id: int, cluster_id: str, secret: Path, *extra: str):
    return (
        "format", "--data-dir", str(node_dir), "--node-id", str(node_id),
        "--cluster-id", cluster_id, "--controllers", CONTROLLERS,
        "--listeners", "PLAINTEXT://0.0.0.0:9092",
        "--advertised-listeners", f"PLAINTEXT://198.18.0.{10 + node_id}:9092",
        "--secret-file", str(secret), *extra,
    )  # fmt: skip


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_cluster_id_is_new_each_time():
    first, second = cli("cluster-id"), cli("cluster-id")
    assert first.returncode == second.returncode == 0
    assert len(first.stdout.strip()) == 32 and first.stdout != second.stdout


def test_format_writes_the_node_config_and_creates_the_secret_file(tmp_path):
    secret = tmp_path / "secret"
    done = cli(*format_args(tmp_path / "n1", 1, "c1", secret, "-p", "min.insync.replicas=2"))
    assert done.returncode == 0, done.stderr
    assert "copy it to every other host" in done.stdout
    config = NodeConfig.load(tmp_path / "n1")
    assert config.roles == {"broker", "controller"}
    assert [str(e) for e in config.listeners] == [
        "PLAINTEXT://0.0.0.0:9092",
        "CONTROLLER://0.0.0.0:9093",
    ]
    assert [str(e) for e in config.advertised_listeners] == ["PLAINTEXT://198.18.0.11:9092"]
    assert [(v.host, v.port) for v in config.raft_voters] == [
        (f"198.18.0.{i}", 9193) for i in (11, 12, 13)
    ]
    assert config.props["controller.quorum.password"] == secret.read_text().strip()
    assert config.props["min.insync.replicas"] == 2
    assert '"min.insync.replicas" = 2\n' in (tmp_path / "n1" / "node.toml").read_text()
    for path in (secret, tmp_path / "n1" / "node.toml"):  # both hold the secret
        assert stat.S_IMODE(path.stat().st_mode) == 0o600

    # another host: the copied secret file is read, not replaced; a broker needs --broker-only
    refused = cli(*format_args(tmp_path / "n4", 4, "c1", secret))
    assert refused.returncode == 1 and "--broker-only" in refused.stderr
    assert not (tmp_path / "n4").exists()
    done = cli(*format_args(tmp_path / "n4", 4, "c1", secret, "--broker-only"))
    assert done.returncode == 0, done.stderr
    broker = NodeConfig.load(tmp_path / "n4")
    assert broker.roles == {"broker"}
    assert broker.props["controller.quorum.password"] == config.props["controller.quorum.password"]
    assert cli(*format_args(tmp_path / "n5", 2, "c1", secret, "--broker-only")).returncode == 1


@pytest.mark.parametrize(
    "case, expected",
    [
        ("other-cluster", "belongs to cluster c1, not c2"),
        ("other-node", "is node 1's directory, not node 2's"),
        ("unknown-data", "not empty and has no node.toml"),
        ("bad-listeners", "is not NAME://host:port"),
        ("bad-feature", "transaction.version=3 is outside the supported levels 0-2"),
    ],
)
def test_format_refuses_and_touches_nothing(tmp_path, case, expected):
    secret = tmp_path / "secret"
    node_dir = tmp_path / "n1"
    if case == "unknown-data":
        (node_dir / "kafka-logs").mkdir(parents=True)
        (node_dir / "kafka-logs" / "00000000000000000000.log").write_bytes(b"x")
    elif case != "bad-feature":  # refused before anything is looked at: nothing to set up
        assert cli(*format_args(node_dir, 1, "c1", secret)).returncode == 0
    before = snapshot(tmp_path)
    new_secret = tmp_path / "new-secret"
    args = {
        "other-cluster": format_args(node_dir, 1, "c2", new_secret),
        "other-node": format_args(node_dir, 2, "c1", new_secret),
        "unknown-data": format_args(node_dir, 1, "c1", new_secret),
        "bad-listeners": (*format_args(tmp_path / "n9", 1, "c1", new_secret), "--listeners", "x"),
        "bad-feature": (*format_args(tmp_path / "n9", 1, "c1", new_secret), "--feature",
                        "transaction.version=3"),
    }[case]  # fmt: skip
    refused = cli(*args)
    assert refused.returncode == 1
    assert expected in refused.stderr and refused.stderr.count("\n") == 1, refused.stderr
    assert snapshot(tmp_path) == before  # nothing written, not even the secret file


def test_reformat_changes_the_address_and_keeps_the_data(tmp_path):
    secret = tmp_path / "secret"
    node_dir = tmp_path / "n2"
    assert cli(*format_args(node_dir, 2, "c1", secret)).returncode == 0
    (node_dir / "kafka-logs").mkdir()
    (node_dir / "kafka-logs" / "kept").write_text("data")
    args = list(format_args(node_dir, 2, "c1", secret))
    args[args.index("--advertised-listeners") + 1] = "PLAINTEXT://198.18.0.99:9092"
    assert cli(*args).returncode == 0
    assert [e.host for e in NodeConfig.load(node_dir).advertised_listeners] == ["198.18.0.99"]
    assert (node_dir / "kafka-logs" / "kept").read_text() == "data"


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _finalized_features(port: int) -> dict[str, int]:
    """ApiVersions v4's finalized features, asked with our own codec."""
    from log.protocol.api_versions import API_VERSIONS_REQUEST
    from log.protocol.client_codec import ClientCodec

    codec = ClientCodec("format-test")
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(codec.encode_request(18, 4, API_VERSIONS_REQUEST.cls()))
        responses: list = []
        while not responses:
            data = sock.recv(1 << 16)
            assert data, "the node closed the connection"
            responses = codec.receive_data(data)
    return {f.name: f.max_version_level for f in responses[0].body.finalized_features}


def test_a_formatted_node_serves_a_real_client(tmp_path):
    kafka, controller, raft = _free_ports(3)
    cluster_id = cli("cluster-id").stdout.strip()
    node_dir = tmp_path / "node"
    done = cli(
        "format", "--data-dir", str(node_dir), "--node-id", "1", "--cluster-id", cluster_id,
        "--controllers", f"1@127.0.0.1:{controller}", "--raft-port-offset", str(raft - controller),
        "--listeners", f"PLAINTEXT://127.0.0.1:{kafka}", "--secret-file", str(tmp_path / "s"),
        "-p", "offsets.topic.replication.factor=1", "-p", "offsets.topic.num.partitions=1",
        "--feature", "transaction.version=1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "node.log", "wb") as log:
        node = subprocess.Popen(
            [sys.executable, "-m", "tools", "node", "--data-dir", str(node_dir)],
            cwd=REPO, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        assert node.stdout is not None
        assert node.stdout.readline().strip() == b"READY", (tmp_path / "node.log").read_text()
        bootstrap = f"127.0.0.1:{kafka}"
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(10):
            producer.produce("formatted", f"v{i}".encode())
        assert producer.flush(60) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g"})
        consumer.assign([TopicPartition("formatted", 0, 0)])
        values: list[str] = []
        deadline = time.monotonic() + 60
        while len(values) < 10 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                values.append(msg.value().decode())
        consumer.close()
        assert values == [f"v{i}" for i in range(10)]
        # the controller finalized what format asked for this new cluster
        assert _finalized_features(kafka) == {"transaction.version": 1, "group.version": 1}
    finally:
        node.send_signal(signal.SIGTERM)
        assert node.wait(timeout=60) == 0


def test_up_refuses_a_node_directory_of_unknown_data(tmp_path):
    (tmp_path / "node-1").mkdir()
    (tmp_path / "node-1" / "00000000000000000000.log").write_bytes(b"x")
    before = snapshot(tmp_path)
    refused = cli("up", "--nodes", "1", "--data-dir", str(tmp_path), "--base-port", "23092")
    assert refused.returncode == 1
    assert "not empty and has no node.toml" in refused.stderr, refused.stderr
    assert refused.stderr.count("\n") == 1
    assert snapshot(tmp_path) == before
