"""A follower held up between two ticks (the journal fsync that makes its acknowledgements durable,
slow on a loaded disk) reads the leader's heartbeats that arrived meanwhile before it checks its
election timeout. pysyncobj checks the timeout at the start of a tick and reads its sockets at
the end, so without the read first such a follower started an election while the leader was
alive and its heartbeats sat unread (quorum.raft's tick loop). In process, three voters on
loopback ports."""

from __future__ import annotations

import contextlib
import sys
import threading
import time

import trio

from quorum.raft import RaftNode
from quorum.state_machine import MetadataStateMachine
from tests.quorum.test_raft_membership import config, free_addresses, leader_of, wait_until

STALL_S = 1.5  # longer than the longest election timeout (600 ms)


async def test_a_follower_stalled_between_ticks_does_not_start_an_election(tmp_path):
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

        # The follower's tick loop stops for STALL_S once, between two ticks, where it sends
        # the acknowledgements of what its last poll appended (after the journal fsync).
        transport = follower._syncobj._quorum_transport
        stalled = threading.Event()
        flush_held = transport.flush_held

        def slow_flush_between_ticks() -> None:
            flush_held()
            if sys._getframe(1).f_code.co_name == "_tick_loop" and not stalled.is_set():
                time.sleep(STALL_S)
                stalled.set()

        transport.flush_held = slow_flush_between_ticks  # type: ignore[method-assign] - a stall
        await wait_until(stalled.is_set)
        offset = (await leader.propose(b"second")).offset
        await wait_until(lambda: follower.committed_offset >= offset)  # it ticked on since
        await trio.sleep(0.2)  # a few more ticks: an election would have started by now
        assert follower.raft_term == term and leader.is_leader
