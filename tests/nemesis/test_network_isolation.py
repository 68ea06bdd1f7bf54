"""The nemesis's partition cuts a process off completely, its already open connections included
(root and iptables; skipped otherwise).

A victim process listens on a port and has a connection open to this test before the cut; it
echoes what it receives on either. While cut off, neither a new connection to it nor its old
connection carries anything; after the heal the old connection delivers again (TCP retransmits
what the cut dropped). A socket keeps the cgroup it was created in, so before its open
connections were cut by their ports a cut controller kept its Raft connections and stayed the
Raft leader while no broker could reach it (found in a nemesis run, 2026-11-27).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

import pytest

from tools.nemesis import network

UNAVAILABLE = network.available()  # runs iptables: asked once
pytestmark = pytest.mark.skipif(UNAVAILABLE is not None, reason=str(UNAVAILABLE))

VICTIM = textwrap.dedent("""
    import socket, sys, threading
    listener = socket.create_server(("127.0.0.1", 0))
    out = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    out.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    def echo(conn):
        while data := conn.recv(100):
            conn.sendall(data)
    def serve():
        while True:
            threading.Thread(target=echo, args=(listener.accept()[0],), daemon=True).start()
    threading.Thread(target=serve, daemon=True).start()
    print(listener.getsockname()[1], flush=True)
    echo(out)
""")


def _echoed(conn: socket.socket, data: bytes, timeout_s: float) -> bool:
    conn.settimeout(timeout_s)
    try:
        return conn.recv(100) == data
    except TimeoutError:
        return False


def test_a_cut_process_loses_its_open_connections_too_until_healed():
    with socket.create_server(("127.0.0.1", 0)) as server:
        victim = subprocess.Popen(
            [sys.executable, "-c", VICTIM, str(server.getsockname()[1])],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert victim.stdout is not None
            listening = int(victim.stdout.readline())
            old, _ = server.accept()
            old.sendall(b"before")
            assert _echoed(old, b"before", 5)

            isolation = network.Isolation(99, [listening], victim.pid)
            isolation.apply()
            try:
                old.sendall(b"during")
                assert not _echoed(old, b"during", 1.5), "an open connection crossed the cut"
                with pytest.raises(OSError):
                    socket.create_connection(("127.0.0.1", listening), timeout=1.0)
            finally:
                isolation.remove()
            assert _echoed(old, b"during", 20), "the old connection did not recover"
            with socket.create_connection(("127.0.0.1", listening), timeout=5) as new:
                new.sendall(b"after")
                assert _echoed(new, b"after", 5)
        finally:
            victim.kill()
            victim.wait()
