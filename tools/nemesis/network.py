"""Network partitions on one machine: iptables rules that cut one node off (root only).

    isolation = Isolation(node_id, listening_ports, pid)
    isolation.apply()    # nobody reaches the node, and (with a cgroup) it reaches nobody
    isolation.remove()

Packets to the node's listening ports (Kafka, controller, Raft) are dropped in INPUT on the
loopback interface, so no peer or client can reach it and established connections stall (a
DROP, not a reset: what a cut cable looks like). The node's own outgoing connections are cut
by putting its process in a cgroup v2 directory of its own and dropping that cgroup's packets
in OUTPUT (`-m cgroup --path`). A socket keeps the cgroup it was created in, so that rule only
catches connections made after the cut: the connections the node has open at the cut (found
in /proc: its socket descriptors, /proc/net/tcp) are dropped by their ports, both ways, as
well. Without them a cut controller kept its Raft connections to the other controllers and
stayed the Raft leader while no broker could reach it. Where no writable cgroup v2 hierarchy
exists, the replies from its listening ports are dropped instead and the connections it makes
later still flow: a one-way partition, which `mode` reports.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

CGROUP_ROOTS = (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup"))


def available() -> str | None:
    """None when partitions can be made here; else why not (one line)."""
    if os.geteuid() != 0:
        return "network partitions need root (iptables)"
    if shutil.which("iptables") is None:
        return "network partitions need iptables (apt-get install iptables)"
    probe = subprocess.run(["iptables", "-L", "INPUT", "-n"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"iptables does not work here: {probe.stderr.strip()[:200]}"
    return None


def _cgroup_root() -> Path | None:
    for root in CGROUP_ROOTS:
        if (root / "cgroup.procs").exists() and (root / "cgroup.controllers").exists():
            return root
    return None


def open_connections(pid: int) -> list[tuple[int, int]]:
    """(local port, remote port) of each established IPv4 TCP connection of process `pid` on
    the loopback network (what the iptables rules here see), from its socket descriptors and
    its /proc/<pid>/net/tcp."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue  # closed meanwhile
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
        lines = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return []  # the process is gone
    found = []
    for line in lines:
        fields = line.split()
        local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
        if state == "01" and inode in inodes and _loopback(local) and _loopback(remote):
            found.append((int(local[-4:], 16), int(remote[-4:], 16)))  # 01: ESTABLISHED
    return found


def _loopback(address: str) -> bool:
    """/proc/net/tcp's `hex address:hex port` (the address in host byte order) is in 127/8."""
    return bytes.fromhex(address[:8])[::-1][0] == 127


def _iptables(*args: str) -> None:
    subprocess.run(["iptables", *args], check=True, capture_output=True)


class Isolation:
    def __init__(self, node_id: int, ports: list[int], pid: int) -> None:
        self.node_id = node_id
        self.ports = ports
        self.pid = pid
        self.mode = "none"
        self._rules: list[tuple[str, ...]] = []
        self._cgroup: Path | None = None

    def apply(self) -> None:
        rules: list[tuple[str, ...]] = [
            ("INPUT", "-i", "lo", "-p", "tcp", "--dport", str(port), "-j", "DROP")
            for port in self.ports
        ]
        root = _cgroup_root()
        if root is not None:
            group = root / f"quorumlog-nemesis-{self.node_id}"
            try:
                group.mkdir(exist_ok=True)
                (group / "cgroup.procs").write_text(f"{self.pid}\n")
                self._cgroup = group
                rules.append(("OUTPUT", "-o", "lo", "-m", "cgroup", "--path",
                              group.name, "-j", "DROP"))  # fmt: skip
                self.mode = "both ways"
            except OSError:
                self._cgroup = None
        if self._cgroup is None:
            rules += [
                ("OUTPUT", "-o", "lo", "-p", "tcp", "--sport", str(port), "-j", "DROP")
                for port in self.ports
            ]
            self.mode = "inbound only (no cgroup v2): its new connections still flow"
        for local, remote in open_connections(self.pid):
            rules += [
                ("INPUT", "-i", "lo", "-p", "tcp", "--sport", str(remote), "--dport", str(local),
                 "-j", "DROP"),
                ("OUTPUT", "-o", "lo", "-p", "tcp", "--sport", str(local), "--dport", str(remote),
                 "-j", "DROP"),
            ]  # fmt: skip
        for rule in rules:
            _iptables("-A", *rule)
            self._rules.append(rule)

    def remove(self) -> None:
        for rule in reversed(self._rules):
            subprocess.run(["iptables", "-D", *rule], capture_output=True)
        self._rules.clear()
        group, self._cgroup = self._cgroup, None
        if group is not None:
            root = group.parent
            try:
                if self._alive():
                    (root / "cgroup.procs").write_text(f"{self.pid}\n")
                group.rmdir()
            except OSError:
                pass  # the process is gone, or the group is busy: harmless, retried next time

    def _alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True
