"""The Raft port bounds what strangers cost (quorum/raft_port_guard.py): real node processes.

pysyncobj buffers what a connection sends until its first message decrypts with the
cluster's password. A stranger claiming a 1 GiB message is cut off after 64 KiB; a flood of
connections that never authenticate keeps at most 16 open per node, and a killed node still
gets back into the quorum through the flood.
"""

from __future__ import annotations

import struct

import pytest
import trio
from cluster_harness import Cluster, wait_until

from log.common.errors import ErrorCode
from quorum import controller as c
from quorum.raft_port_guard import MAX_PREAUTH_BUFFER_BYTES, MAX_UNIDENTIFIED_CONNECTIONS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


async def _closed_by_peer(stream: trio.SocketStream, timeout_s: float) -> bool:
    with trio.move_on_after(timeout_s):
        try:
            while await stream.receive_some(4096):
                pass
        except (trio.BrokenResourceError, OSError):
            pass
        return True
    return False


async def test_strangers_on_the_raft_port_are_bounded_and_peers_still_get_in(tmp_path):
    cluster = Cluster(tmp_path, 3)
    cluster.start_all()
    port = cluster.layout.raft_port(1)

    # A 1 GiB length prefix and more bytes than any key exchange: closed, not buffered.
    with trio.fail_after(20):
        async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
            chunk = b"\x00" * 65536
            try:
                await stream.send_all(struct.pack("i", 1 << 30))
                for _ in range(4 * MAX_PREAUTH_BUFFER_BYTES // len(chunk)):
                    await stream.send_all(chunk)
            except (trio.BrokenResourceError, OSError):
                pass  # closed while we were still sending: what we want
            assert await _closed_by_peer(stream, 10)

    # A flood of silent connections on every node: at most 16 per node stay open.
    floods = []
    try:
        for node_id in (1, 2, 3):
            streams = []
            for _ in range(4 * MAX_UNIDENTIFIED_CONNECTIONS):
                streams.append(await trio.open_tcp_stream(
                    "127.0.0.1", cluster.layout.raft_port(node_id)))  # fmt: skip
                await trio.sleep(0.01)  # accepted in order, so the oldest are evicted
            floods.append(streams)
        await trio.sleep(0.5)
        open_counts = []
        for streams in floods:
            closed = [await _closed_by_peer(s, 0.05) for s in streams]
            open_counts.append(closed.count(False))
        assert all(n <= MAX_UNIDENTIFIED_CONNECTIONS for n in open_counts), open_counts

        # Through the flood, a killed node rejoins the quorum and replays a new commit.
        cluster.kill9(2)
        cluster.start(2)
        cluster.wait_ready(2)
        client = cluster.client([1, 3])
        try:
            with trio.fail_after(30):
                response = await client.create_topics(
                    c.CreateTopicsRequest((c.CreatableTopic("after-flood", 1, 1),))
                )
        finally:
            await client.aclose()
        assert response.results[0].error_code == ErrorCode.NONE

        async def node_2_has_it():
            return (await cluster.image_from(2)).topic("after-flood") is not None

        await wait_until(node_2_has_it, 30)
    finally:
        for streams in floods:
            for s in streams:
                await s.aclose()
