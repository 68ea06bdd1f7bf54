"""The multi-host tests' harness: a network of namespaces (tools/nemesis/namespaces.py's
`Network`, re-exported here: one namespace per host with its own address in 198.18.0.0/15,
joined by a bridge; link-down, iptables cuts, netem) and a cluster set up on it.

`HostCluster` sets a cluster up the way the README tells an operator to: `quorumlog
cluster-id` once, `quorumlog format` on each host (inside its namespace), `quorumlog node` to run
it. Every host uses the same ports (9092 Kafka, 9093 controller, 9193 Raft): they are different
machines.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tools.nemesis.namespaces import (  # noqa: F401 - the tests' vocabulary, re-exported
    HOST_OFFSET,
    SUBNET_PREFIX,
    Network,
    netem_unavailable_reason,
    unavailable_reason,
)

REPO = Path(__file__).resolve().parents[2]
KAFKA_PORT = 9092
CONTROLLER_PORT = 9093


class HostCluster:
    """A cluster with one node per host of `network`, set up host by host with the CLI.

    Hosts 1..controller_count are controllers (and brokers), the rest brokers only.
    """

    def __init__(
        self,
        network: Network,
        data_dir: Path,
        controller_count: int,
        properties: dict[str, object] | None = None,
        *,
        listener: str = "PLAINTEXT",
        host_properties: Callable[[int, str], dict[str, object]] | None = None,
        host_count: int | None = None,
    ) -> None:
        """`listener`: the client listener's name; `host_properties(host, address)`: that
        host's own properties (e.g. its TLS files) on top of `properties`; `host_count`: how
        many hosts form the cluster (all of the network's by default; the rest are spares a
        test formats itself, e.g. a controller host that replaces a lost one)."""
        self.host_count = host_count or network.host_count
        self.network = network
        self.data_dir = data_dir
        self.controller_count = controller_count
        self.properties = properties or {}
        self.listener = listener
        self.host_properties = host_properties
        self.processes: dict[int, subprocess.Popen] = {}
        self.addresses = {h: network.address(h) for h in range(1, network.host_count + 1)}
        self.cluster_id = self._cli(["cluster-id"]).stdout.strip()
        # the operator's copy of the secret: created by the first format, copied to the others
        self.secret_file = data_dir / "secret"
        for host in self.hosts:
            self.format(host)

    @property
    def hosts(self) -> range:
        return range(1, self.host_count + 1)

    @property
    def controllers(self) -> str:
        return ",".join(
            f"{h}@{self.network.address(h)}:{CONTROLLER_PORT}"
            for h in range(1, self.controller_count + 1)
        )

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.addresses[h]}:{KAFKA_PORT}" for h in self.hosts)

    def node_dir(self, host: int) -> Path:
        return self.data_dir / f"host-{host}"

    def _cli(self, args: list[str], host: int | None = None) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "tools", *args]
        if host is None:
            return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=True)
        return self.network.run(host, argv, cwd=REPO)

    def format_args(self, host: int) -> list[str]:
        # host 1 binds its own address, the others every address: both must work
        bind = self.addresses[host] if host == 1 else "0.0.0.0"
        secret_copy = self.node_dir(host).parent / f"secret-host-{host}"
        if host > 1 and self.secret_file.exists() and not secret_copy.exists():
            shutil.copyfile(self.secret_file, secret_copy)  # "scp" to the host
            secret_copy.chmod(0o600)
        args = [
            "format", "--data-dir", str(self.node_dir(host)), "--node-id", str(host),
            "--cluster-id", self.cluster_id, "--controllers", self.controllers,
            "--listeners", f"{self.listener}://{bind}:{KAFKA_PORT}",
            "--advertised-listeners", f"{self.listener}://{self.addresses[host]}:{KAFKA_PORT}",
            "--secret-file", str(self.secret_file if host == 1 else secret_copy),
        ]  # fmt: skip
        if host > self.controller_count:
            args.append("--broker-only")
        own = self.host_properties(host, self.addresses[host]) if self.host_properties else {}
        for name, value in {**self.properties, **own}.items():
            args += ["--property", f"{name}={value}"]
        return args

    def format(self, host: int) -> subprocess.CompletedProcess:
        return self._cli(self.format_args(host), host)

    def start(self, host: int) -> None:
        node_dir = self.node_dir(host)
        with open(node_dir / "node.log", "ab") as log, open(node_dir / "node.out", "wb") as out:
            self.processes[host] = self.network.spawn(
                host,
                [sys.executable, "-m", "tools", "node", "--data-dir", str(node_dir)],
                cwd=REPO, stdout=out, stderr=log, stdin=subprocess.DEVNULL,
            )  # fmt: skip

    def wait_ready(self, host: int, timeout_s: float = 120) -> None:
        out = self.node_dir(host) / "node.out"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if b"READY" in out.read_bytes().splitlines():
                return
            process = self.processes[host]
            if process.poll() is not None:
                raise AssertionError(f"host {host} exited {process.returncode}: {self.log(host)}")
            time.sleep(0.1)
        raise AssertionError(f"host {host} not ready: {self.log(host)}")

    def start_all(self) -> None:
        for host in self.hosts:
            self.start(host)
        for host in self.hosts:
            self.wait_ready(host)

    def stop(self, host: int, timeout_s: float = 30) -> None:
        process = self.processes.pop(host)
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def kill(self, host: int) -> None:
        """SIGKILL host's node (a crash: no controlled shutdown moves leaderships first)."""
        process = self.processes.pop(host)
        process.kill()
        process.wait()

    def log(self, host: int, tail_chars: int = 3000) -> str:
        return (self.node_dir(host) / "node.log").read_text(errors="replace")[-tail_chars:]
