"""The metadata quorum's voter set changes one voter at a time and survives restarts (quorum.raft
over pysyncobj's dynamic membership), in process on loopback ports: no netns, no root.

A 3-voter quorum loses C; C is removed, then a new node D (configured, like `format --join`,
with the live voters only) is added and catches up from a checkpoint. The leader cannot remove
itself. Every voter then holds {A, B, D}; A restarted from a configuration that still names
{A, B, C} learns {A, B, D} from its checkpoint and journal; and D, restarted, too.
"""

from __future__ import annotations

import contextlib
import socket

import pytest
import trio

from quorum.raft import RaftConfig, RaftNode, VoterChangeRefusedError
from quorum.raft_checkpoint import CheckpointFiles
from quorum.raft_voters import ADD, REMOVE
from quorum.state_machine import MetadataStateMachine

PASSWORD = "test-raft-password"
WAIT_S = 30  # bound on each wait (a shared, loaded machine), not a speed assertion


def free_addresses(count: int) -> list[str]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [f"127.0.0.1:{s.getsockname()[1]}" for s in sockets]
    finally:
        for s in sockets:
            s.close()


def config(tmp_path, me: str, voters: list[str]) -> RaftConfig:
    return RaftConfig(
        self_address=me,
        partner_addresses=tuple(v for v in voters if v != me),
        data_dir=str(tmp_path / me.replace(":", "_")),
        password=PASSWORD,
        checkpoint_interval_records=2,
        checkpoint_interval_ms=3_600_000,
    )


async def wait_until(predicate, timeout_s: float = WAIT_S) -> None:
    with trio.fail_after(timeout_s):
        while not predicate():
            await trio.sleep(0.02)


async def leader_of(nodes: list[RaftNode]) -> RaftNode:
    await wait_until(lambda: any(n.is_leader and n.has_quorum for n in nodes))
    return [n for n in nodes if n.is_leader][0]


@contextlib.asynccontextmanager
async def running_quorum(tmp_path, count: int = 3):
    """`count` voters in this process on free loopback ports, stopped on exit: (the nodes, the
    leader), once the leader has committed a first entry."""
    addresses = free_addresses(count)
    async with contextlib.AsyncExitStack() as stack:
        nodes = [
            await stack.enter_async_context(
                RaftNode(config(tmp_path, a, addresses), state_machine_factory=MetadataStateMachine)
            )
            for a in addresses
        ]
        leader = await leader_of(nodes)
        await leader.propose(b"first")
        yield nodes, leader


async def propose(nodes: list[RaftNode], payload: bytes) -> int:
    """Commit one batch (payloads need not decode: a rejected batch still takes an offset)."""
    with trio.fail_after(WAIT_S):
        while True:
            leader = await leader_of(nodes)
            try:
                return (await leader.propose(payload)).offset
            except Exception:  # noqa: BLE001 - an election in between: retry on the new leader
                await trio.sleep(0.05)


async def test_replace_a_voter_and_restart_with_a_stale_configuration(tmp_path):
    a, b, c, d = free_addresses(4)
    async with contextlib.AsyncExitStack() as stack:
        nodes: dict[str, RaftNode] = {}
        stacks: dict[str, contextlib.AsyncExitStack] = {}

        async def start(address: str, voters: list[str]) -> RaftNode:
            own = stacks[address] = contextlib.AsyncExitStack()
            await stack.enter_async_context(own)
            raft = RaftNode(
                config(tmp_path, address, voters), state_machine_factory=MetadataStateMachine
            )
            nodes[address] = await own.enter_async_context(raft)
            return nodes[address]

        async def stop(address: str) -> None:
            nodes.pop(address)
            await stacks.pop(address).aclose()

        for address in (a, b, c):
            await start(address, [a, b, c])
        for i in range(5):
            await propose(list(nodes.values()), f"before-{i}".encode())

        # C is lost; the leader (never C: it is gone) removes it.
        await stop(c)
        leader = await leader_of(list(nodes.values()))
        with pytest.raises(VoterChangeRefusedError, match="cannot remove itself"):
            await leader.change_voters(REMOVE, leader.config.self_address)
        with trio.fail_after(WAIT_S):
            await leader.change_voters(REMOVE, c)
        await wait_until(lambda: all(n.voters == tuple(sorted([a, b])) for n in nodes.values()))
        with pytest.raises(VoterChangeRefusedError):
            await leader.change_voters(REMOVE, c)  # not a voter any more

        # Checkpoints are taken, so D catches up from one (a snapshot install).
        for i in range(5):
            await propose(list(nodes.values()), f"between-{i}".encode())
        await wait_until(lambda: all(CheckpointFiles(n.config.metadata_dir).list()
                                     for n in nodes.values()))  # fmt: skip
        await start(d, [a, b, d])  # what `format --join` writes: the live voters and itself
        leader = await leader_of([nodes[a], nodes[b]])
        with trio.fail_after(WAIT_S):
            await leader.change_voters(ADD, d)
        expected = tuple(sorted([a, b, d]))
        await wait_until(lambda: all(n.voters == expected for n in nodes.values()))
        last = await propose(list(nodes.values()), b"after")
        await wait_until(lambda: all(n.committed_offset >= last for n in nodes.values()))

        # D votes: with A gone, B and D commit (B alone could not).
        await stop(a)
        await propose([nodes[b], nodes[d]], b"without-a")

        # A comes back with a configuration naming A, B, C: its checkpoint and journal say
        # A, B, D, and that is what it runs with.
        await start(a, [a, b, c])
        assert nodes[a].voters == expected
        last = await propose(list(nodes.values()), b"a-is-back")
        await wait_until(lambda: all(n.committed_offset >= last for n in nodes.values()))
        assert all(n.voters == expected for n in nodes.values())

        # D restarted: the same (its first checkpoint came from the leader).
        await stop(d)
        await start(d, [a, b, d])
        assert nodes[d].voters == expected
        last = await propose(list(nodes.values()), b"d-is-back")
        await wait_until(lambda: nodes[d].committed_offset >= last)
