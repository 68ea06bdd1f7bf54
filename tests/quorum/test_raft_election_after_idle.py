"""The first election after the leader dies reaches the other survivor, however long the
followers' own connection sat idle.

Two followers exchange no Raft messages while a leader is alive, and pysyncobj drops a connection
that read nothing for its connection timeout at the next send or receive event on it: the
candidate's vote request was the event, and it was lost (the sender dropped the connection before
sending, or the receiver before reading). The survivor then timed out itself and voted for
itself in the same term: every controller kill cost two election rounds, the Raft term rising
by 2 (bench.failover, 2026-11-28). The transport now keeps every connection read from
(quorum.raft, _SyncingTransport.keep_alive). In process, three voters on loopback ports."""

from __future__ import annotations

import contextlib

import trio

from quorum.raft import RaftNode
from quorum.state_machine import MetadataStateMachine
from tests.quorum.test_raft_membership import config, free_addresses, leader_of, wait_until


async def test_a_vote_request_after_a_long_quiet_spell_reaches_the_other_survivor(tmp_path):
    addresses = free_addresses(3)
    async with contextlib.AsyncExitStack() as stack:
        stacks = {a: contextlib.AsyncExitStack() for a in addresses}
        nodes: dict[str, RaftNode] = {}
        for address in addresses:
            await stack.enter_async_context(stacks[address])
            raft = RaftNode(
                config(tmp_path, address, addresses), state_machine_factory=MetadataStateMachine
            )
            nodes[address] = await stacks[address].enter_async_context(raft)
        leader = await leader_of(list(nodes.values()))
        await leader.propose(b"first")
        term = leader.raft_term

        # The vote requests each survivor sends and receives, as (term, sender, receiver).
        sent: list[tuple[int, str, str]] = []
        received: list[tuple[int, str, str]] = []
        for address, node in nodes.items():
            if node is leader:
                continue
            transport = node._syncobj._quorum_transport  # type: ignore[union-attr]
            send, deliver = transport.send, transport._onMessageReceivedCallback

            def sending(peer, message, send=send, me=address):
                if message.get("type") == "request_vote":
                    sent.append((message["term"], me, str(peer.id)))
                return send(peer, message)

            def delivering(peer, message, deliver=deliver, me=address):
                if isinstance(message, dict) and message.get("type") == "request_vote":
                    received.append((message["term"], str(peer.id), me))
                deliver(peer, message)

            transport.send = sending
            transport._onMessageReceivedCallback = delivering

        # Longer than the connection timeout: the followers' connection to each other has
        # carried nothing of pysyncobj's since it opened.
        await trio.sleep(leader.config.connection_timeout_ms / 1000 + 1.0)
        await stacks[leader.config.self_address].aclose()  # its sockets close: as a kill -9
        survivors = [n for n in nodes.values() if n is not leader]
        new_leader = await leader_of(survivors)

        # Every vote request of the first new term one survivor sent the other arrived (a
        # genuine split, both candidates at once, sends and receives two).
        survivor_addresses = {n.config.self_address for n in survivors}
        first_round = {r for r in sent if r[0] == term + 1 and r[2] in survivor_addresses}
        assert first_round, f"no vote request at term {term + 1}: {sent}"
        with contextlib.suppress(trio.TooSlowError):
            await wait_until(lambda: first_round <= set(received), timeout_s=5)
        assert first_round <= set(received), (
            f"vote requests lost between the survivors: sent {sorted(first_round)}, received "
            f"{sorted(received)}; new leader at term {new_leader.raft_term} (was {term})"
        )
