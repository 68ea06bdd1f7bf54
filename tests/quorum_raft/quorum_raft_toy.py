"""A tiny deterministic state machine satisfying quorum.raft's MetadataStateMachine interface,
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
