"""A network of its own: one Linux network namespace per host, joined by a bridge (root only).

`Network(host_count)` makes a bridge `qlbr<tag>` in the root namespace with address
198.18.<X>.1/24 and, per host i (1-based), a namespace `ql<tag>n<i>` (tag: pid and a counter)
holding one end of a veth pair (`eth0`, address 198.18.<X>.<10+i>/24; the other end
`ql<tag>h<i>` is a port of the bridge). 198.18.0.0/15 is reserved for benchmarking (RFC 2544)
and never routed; <X> is a /24 that no route of this machine uses yet. Clients in the root
namespace reach every host through the bridge; hosts reach each other the same way. Processes
run inside a host's namespace with `ip netns exec` (`prefix(host)`). `close()` kills every
process the network started and deletes the namespaces (their veth pairs go with them) and the
bridge.

Faults act inside a host's namespace, as they would on a real host: `link_down`/`link_up` its
interface, `cut` (iptables: drop everything from/to the subnet, or only what it receives: an
asymmetric cut, the host still sends), `heal`, and `netem` latency (tc), if the kernel has it.
Used by `quorumlog nemesis --network netns` and the multi-host tests (tests/hosts/).
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess

SUBNET_PREFIX = "198.18"  # RFC 2544's benchmarking range: never routed
HOST_OFFSET = 10  # host i has address .10+i


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def unavailable_reason() -> str | None:
    """Why this machine cannot run the harness (None: it can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    probe = f"qlprobe{os.getpid() % 100000}"
    try:
        made = _ip("netns", "add", probe, check=False)
        if made.returncode != 0:
            return f"cannot create a network namespace: {made.stderr.strip()}"
        bridge = _ip("link", "add", f"{probe}b", "type", "bridge", check=False)
        if bridge.returncode != 0:
            return f"cannot create a bridge: {bridge.stderr.strip()}"
        veth = _ip("link", "add", f"{probe}v", "type", "veth", "peer", "name", f"{probe}w",
                   check=False)  # fmt: skip
        if veth.returncode != 0:
            return f"cannot create a veth pair: {veth.stderr.strip()}"
    finally:
        for link in (f"{probe}b", f"{probe}v"):
            _ip("link", "del", link, check=False)
        _ip("netns", "del", probe, check=False)
    return None


def netem_unavailable_reason() -> str | None:
    """Why `tc netem` cannot be used here (None: it can)."""
    if shutil.which("tc") is None:
        return "the `tc` command is not installed"
    probe = f"qlnetem{os.getpid() % 100000}"
    try:
        _ip("netns", "add", probe)
        added = subprocess.run(
            ["ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "lo", "root", "netem",
             "delay", "1ms"], capture_output=True, text=True, check=False,
        )  # fmt: skip
        if added.returncode != 0:
            return f"tc netem is not available (kernel module sch_netem?): {added.stderr.strip()}"
    finally:
        _ip("netns", "del", probe, check=False)
    return None


def _free_subnet() -> int:
    """A third octet X such that no route of this machine touches 198.18.X.0/24."""
    routes = _ip("-4", "route", "show", "table", "all").stdout
    start = os.getpid() % 250
    for step in range(250):
        x = (start + step) % 250 + 1
        if f"{SUBNET_PREFIX}.{x}." not in routes:
            return x
    raise RuntimeError("no free /24 in 198.18.0.0/16")


_network_numbers = itertools.count()


class Network:
    def __init__(self, host_count: int) -> None:
        # unique per network: a deleted namespace's veth pair vanishes asynchronously
        self.tag = f"{os.getpid() % 10000}{next(_network_numbers)}"
        self.subnet_octet = _free_subnet()
        self.bridge = f"qlbr{self.tag}"
        self.host_count = host_count
        self.processes: list[subprocess.Popen] = []
        self._namespaces: list[str] = []
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    @property
    def subnet(self) -> str:
        return f"{SUBNET_PREFIX}.{self.subnet_octet}.0/24"

    def address(self, host: int) -> str:
        return f"{SUBNET_PREFIX}.{self.subnet_octet}.{HOST_OFFSET + host}"

    def namespace(self, host: int) -> str:
        return f"ql{self.tag}n{host}"

    def _build(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{SUBNET_PREFIX}.{self.subnet_octet}.1/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for host in range(1, self.host_count + 1):
            ns, outside = self.namespace(host), f"ql{self.tag}h{host}"
            _ip("netns", "add", ns)
            self._namespaces.append(ns)
            _ip("link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", outside, "master", self.bridge)
            _ip("link", "set", outside, "up")
            self.run(host, ["ip", "addr", "add", f"{self.address(host)}/24", "dev", "eth0"])
            self.run(host, ["ip", "link", "set", "eth0", "up"])
            self.run(host, ["ip", "link", "set", "lo", "up"])

    def run(self, host: int, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        """Run `argv` inside host's namespace to completion (raises on a non-zero exit)."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        kwargs.setdefault("check", True)
        return subprocess.run(["ip", "netns", "exec", self.namespace(host), *argv], **kwargs)

    def prefix(self, host: int) -> list[str]:
        """The command prefix that runs a program inside host's namespace."""
        return ["ip", "netns", "exec", self.namespace(host)]

    def spawn(self, host: int, argv: list[str], **kwargs) -> subprocess.Popen:
        """Start `argv` inside host's namespace; killed by close()."""
        process = subprocess.Popen(["ip", "netns", "exec", self.namespace(host), *argv], **kwargs)
        self.processes.append(process)
        return process

    # -- faults, inside the host's namespace ---------------------------------------------------
    def link_down(self, host: int) -> None:
        self.run(host, ["ip", "link", "set", "eth0", "down"])

    def link_up(self, host: int) -> None:
        self.run(host, ["ip", "link", "set", "eth0", "up"])

    def cut(self, host: int, *, receive_only: bool = False) -> None:
        """Drop what host receives from the subnet and (unless receive_only) what it sends."""
        self.run(host, ["iptables", "-A", "INPUT", "-s", self.subnet, "-j", "DROP"])
        if not receive_only:
            self.run(host, ["iptables", "-A", "OUTPUT", "-d", self.subnet, "-j", "DROP"])

    def heal(self, host: int) -> None:
        self.run(host, ["iptables", "-F", "INPUT"])
        self.run(host, ["iptables", "-F", "OUTPUT"])

    def netem(self, host: int, *args: str) -> None:
        """`tc qdisc replace dev eth0 root netem ARGS` in host (e.g. "delay", "20ms", "5ms")."""
        self.run(host, ["tc", "qdisc", "replace", "dev", "eth0", "root", "netem", *args])

    def netem_off(self, host: int) -> None:
        self.run(host, ["tc", "qdisc", "del", "dev", "eth0", "root"], check=False)

    def move(self, host: int, new_last_octet: int) -> str:
        """Give host a new address (the old one goes); returns it."""
        old = self.address(host)
        new = f"{SUBNET_PREFIX}.{self.subnet_octet}.{new_last_octet}"
        # old one first: deleting a primary address also deletes its secondaries
        self.run(host, ["ip", "addr", "del", f"{old}/24", "dev", "eth0"])
        self.run(host, ["ip", "addr", "add", f"{new}/24", "dev", "eth0"])
        return new

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait()
        self.processes.clear()
        for host, ns in enumerate(self._namespaces, start=1):
            _ip("link", "del", f"ql{self.tag}h{host}", check=False)  # both ends of the pair
            _ip("netns", "del", ns, check=False)
        self._namespaces.clear()
        _ip("link", "del", self.bridge, check=False)
