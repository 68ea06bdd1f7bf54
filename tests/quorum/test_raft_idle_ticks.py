"""An idle quorum's tick threads sleep until their next timed duty (quorum.raft,
RaftNode._poll_timeout_s): a follower wakes for the leader's heartbeats, not on a timer as well
(pysyncobj ticks every period: with 50 ms ticks and 50 ms heartbeats a follower woke ~36 times a
second, its tick thread 1.9 % of a core on the 2-core CI box, against 13 and 1.2 % now), and the
leader's heartbeats leave when due, not on the first tick after. In process, three voters on
loopback ports."""

from __future__ import annotations

import time

import trio
from pysyncobj.monotonic import monotonic

from tests.quorum.test_raft_membership import running_quorum

WATCH_S = 2.0


async def test_the_tick_loops_sleep_until_a_heartbeat_or_an_election_is_due(tmp_path):
    async with running_quorum(tmp_path) as (nodes, leader):
        follower = next(n for n in nodes if n is not leader)
        leader_obj, follower_obj = leader._syncobj, follower._syncobj
        assert leader_obj is not None and follower_obj is not None
        period_s = leader.config.append_entries_period_ms / 1000
        longest_s = follower.config.tick_period_ms / 1000

        # The leader sleeps until its next heartbeat is due, a whole period once it is overdue
        # (that tick sends it); a follower until its election deadline, at most the longest poll.
        due_s = leader_obj.seconds_until_due()
        assert 0 < due_s <= period_s
        assert 0 < leader._poll_timeout_s(leader_obj, longest_s) <= due_s  # time moves on
        leader_obj._SyncObj__newAppendEntriesTime = monotonic() - 1
        assert leader._poll_timeout_s(leader_obj, longest_s) == period_s
        follower_obj._SyncObj__raftElectionDeadline = monotonic() + 0.03
        assert 0 < follower._poll_timeout_s(follower_obj, longest_s) <= 0.03
        follower_obj._SyncObj__raftElectionDeadline = monotonic() + 5
        assert follower._poll_timeout_s(follower_obj, longest_s) == longest_s

        # Watched for a while: the follower's polls end with the leader's heartbeats; one that
        # sleeps its whole timeout is a heartbeat late by more than the longest poll minus a
        # period (the tick threads share this process with two other nodes and the test).
        heartbeats: list[float] = []
        timed_out: list[float] = []
        transport = follower_obj._quorum_transport
        on_message = transport._onMessageReceivedCallback
        poll = follower_obj._poller.poll

        def recording_on_message(node: object, message: dict) -> None:
            if message.get("type") == "append_entries":
                heartbeats.append(time.monotonic())
            on_message(node, message)

        def recording_poll(timeout: float) -> None:
            started = time.monotonic()
            before = len(heartbeats)
            poll(timeout)
            if timeout > 0 and len(heartbeats) == before and time.monotonic() - started >= timeout:
                timed_out.append(timeout)

        transport._onMessageReceivedCallback = recording_on_message
        follower_obj._poller.poll = recording_poll  # type: ignore[method-assign]
        await trio.sleep(WATCH_S)
        follower_obj._poller.poll = poll  # type: ignore[method-assign]
        transport._onMessageReceivedCallback = on_message
        assert len(heartbeats) >= WATCH_S / period_s / 2, heartbeats
        assert len(timed_out) <= len(heartbeats) / 4, (len(timed_out), len(heartbeats))
