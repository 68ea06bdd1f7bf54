"""A follower held up between two ticks (the journal fsync that makes its acknowledgements durable,
slow on a loaded disk; a starved or paused process) does not start an election while the leader
is alive. pysyncobj checks the timeout at the start of a tick and reads its sockets at the end:
after a short stall the leader's heartbeats sat unread and, without the read first, the follower
started an election; after one longer than the connection timeout the leader had dropped the
connection and it did even with the read first, until the tick loop deferred the election on a
stall (quorum.raft, _MetadataSyncObj.defer_election). In process, three voters on loopback
ports."""

from __future__ import annotations

import contextlib
import sys
import threading
import time

import pytest
import trio

from quorum.raft import RaftNode
from quorum.state_machine import MetadataStateMachine
from tests.quorum.test_raft_membership import config, free_addresses, leader_of, wait_until

# Both longer than the longest election timeout (600 ms). The first is shorter than the
# connection timeout (2 s): the leader's heartbeats wait unread in the socket. After the second
# the leader has dropped the connection, so there is nothing to read: the follower defers its
# election by a fresh election timeout instead, in which the leader reconnects.
STALLS_S = (1.5, 3.0)


@pytest.mark.parametrize("stall_s", STALLS_S)
async def test_a_follower_stalled_between_ticks_does_not_start_an_election(tmp_path, stall_s):
    addresses = free_addresses(3)
    async with contextlib.AsyncExitStack() as stack:
        nodes = [
            await stack.enter_async_context(
                RaftNode(config(tmp_path, a, addresses), state_machine_factory=MetadataStateMachine)
            )
            for a in addresses
        ]
        leader = await leader_of(nodes)
        await leader.propose(b"first")
        follower = next(n for n in nodes if n is not leader)
        term = follower.raft_term

        # The follower's tick loop stops for stall_s once, between two ticks, where it sends
        # the acknowledgements of what its last poll appended (after the journal fsync).
        transport = follower._syncobj._quorum_transport
        stalled = threading.Event()
        flush_held = transport.flush_held

        def slow_flush_between_ticks() -> None:
            flush_held()
            if sys._getframe(1).f_code.co_name == "_tick_loop" and not stalled.is_set():
                time.sleep(stall_s)
                stalled.set()

        transport.flush_held = slow_flush_between_ticks  # type: ignore[method-assign] - a stall
        await wait_until(stalled.is_set)
        offset = (await leader.propose(b"second")).offset
        await wait_until(lambda: follower.committed_offset >= offset)  # it ticked on since
        await trio.sleep(0.2)  # a few more ticks: an election would have started by now
        assert follower.raft_term == term and leader.is_leader
