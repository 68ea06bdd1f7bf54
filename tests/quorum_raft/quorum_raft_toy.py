"""A tiny deterministic state machine satisfying quorum.raft's ReplicatedStateMachine interface,
plus helpers shared by the quorum_raft tests (free ports, configs)."""

from __future__ import annotations

import socket
import struct

import crc32c

from quorum.raft import RaftConfig

PASSWORD = "test-raft-password"


class ToyStateMachine:
    """Appends every payload to a list; a payload starting with b"boom" raises."""

    def __init__(self, records: list[tuple[int, bytes]] | None = None) -> None:
        self.records: list[tuple[int, bytes]] = list(records or [])
        self.last_applied_offset = self.records[-1][0] if self.records else 0
        self.applies_since_load = 0

    def apply(self, metadata_offset: int, payload: bytes) -> object:
        if payload.startswith(b"boom"):
            raise ValueError("toy state machine refuses boom")
        assert metadata_offset > self.last_applied_offset
        self.records.append((metadata_offset, payload))
        self.last_applied_offset = metadata_offset
        self.applies_since_load += 1
        return len(self.records)

    def to_checkpoint(self) -> bytes:
        body = struct.pack("<I", len(self.records)) + b"".join(
            struct.pack("<QI", o, len(p)) + p for o, p in self.records
        )
        return body + struct.pack("<I", crc32c.crc32c(body))

    @classmethod
    def from_checkpoint(cls, data: bytes) -> ToyStateMachine:
        body, (crc,) = data[:-4], struct.unpack("<I", data[-4:])
        if crc32c.crc32c(body) != crc:
            raise ValueError("toy checkpoint CRC mismatch")
        (count,) = struct.unpack_from("<I", body, 0)
        position, records = 4, []
        for _ in range(count):
            offset, n = struct.unpack_from("<QI", body, position)
            position += 12
            records.append((offset, bytes(body[position : position + n])))
            position += n
        return cls(records)


def free_ports(count: int) -> list[int]:
    socks = []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def cluster_configs(data_root: str, ports: list[int], **overrides: object) -> list[RaftConfig]:
    addresses = [f"127.0.0.1:{p}" for p in ports]
    return [
        RaftConfig(
            self_address=a,
            partner_addresses=tuple(x for x in addresses if x != a),
            data_dir=f"{data_root}/node{i}",
            password=PASSWORD,
            **overrides,
        )
        for i, a in enumerate(addresses)
    ]


class NodeProcess:
    """A controller in its own process (raft_node_process.py), for crash and cluster tests.
    Every instance is killed after its test by the autouse fixture in conftest.py."""

    started: list[NodeProcess] = []

    def __init__(
        self,
        config: RaftConfig,
        env: dict[str, str] | None = None,
        expect_ready: bool = True,
        capture_stderr: bool = False,
    ) -> None:
        import dataclasses
        import json
        import os
        import queue
        import subprocess
        import sys
        import threading

        self.config = config
        here = os.path.dirname(os.path.abspath(__file__))
        root = os.path.dirname(os.path.dirname(here))
        full_env = dict(os.environ)
        full_env["PYTHONPATH"] = os.pathsep.join(
            [root] + [p for p in full_env.get("PYTHONPATH", "").split(os.pathsep) if p]
        )
        full_env.update(env or {})
        fields = dataclasses.asdict(config)
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(here, "raft_node_process.py"), json.dumps(fields)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if capture_stderr else None,
            env=full_env,
        )
        NodeProcess.started.append(self)
        self.lines: queue.Queue = queue.Queue()
        self.acked: list[str] = []

        def pump() -> None:
            for raw in self.proc.stdout:
                msg = json.loads(raw)
                if msg.get("ev") == "acked":
                    self.acked.append(msg["payload"])
                else:
                    self.lines.put(msg)
            self.lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        if expect_ready:
            ready = self.lines.get(timeout=20)
            assert ready and ready["ev"] == "ready", ready

    def request(self, op: str, timeout_s: float = 20, **fields: object) -> dict:
        import json

        self.proc.stdin.write((json.dumps({"op": op, **fields}) + "\n").encode())
        self.proc.stdin.flush()
        reply = self.lines.get(timeout=timeout_s)
        assert reply is not None, f"node {self.config.self_address} died"
        return reply

    def kill9(self) -> None:
        import os
        import signal

        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(b'{"op": "quit"}\n')
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
            except Exception:
                self.kill9()
