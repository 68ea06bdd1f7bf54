"""A checkpoint pysyncobj takes right after a Raft no-op (a new leader's first entry) is published
at the state machine's own offset, so a reader that loads it can go on reading the tail.

The no-op never reaches `apply`, so such a checkpoint's Raft `last_index` is past the state's
`last_applied_offset`. When the binding published `last_index` (as the checkpoint offset, the
tail's base and, after a restart, the committed offset), a reader that loaded the checkpoint
stood below the tail's base forever: `read_committed` kept raising OffsetOutOfRangeError and
MetadataFetch kept answering with the same checkpoint (a one-node cluster restarted after
kill -9 never became ready). In process: one controller on a loopback port, no sleeps beyond
waiting for the tick thread."""

from __future__ import annotations

import os
import socket

import pytest
import trio

from log.common.errors import OffsetOutOfRangeError
from quorum.raft import CorruptCheckpointFileError, RaftConfig, RaftNode
from quorum.raft_checkpoint import CheckpointFiles, RaftCheckpoint, encode_checkpoint
from quorum.state_machine import MetadataStateMachine

PASSWORD = "test-raft-password"


def one_node_config(tmp_path) -> RaftConfig:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Checkpoints only when forced: the test decides which entry one is taken at.
    return RaftConfig(
        self_address=f"127.0.0.1:{port}",
        partner_addresses=(),
        data_dir=str(tmp_path / "node"),
        password=PASSWORD,
        checkpoint_interval_ms=3_600_000,
    )


async def wait_until(predicate, timeout_s: float = 5) -> None:
    with trio.fail_after(timeout_s):
        while not predicate():
            await trio.sleep(0.01)


def newest_checkpoint_index(config: RaftConfig) -> int:
    files = CheckpointFiles(config.metadata_dir).list()
    return files[0][0] if files else -1


async def test_checkpoint_taken_at_a_noop_is_published_at_the_state_offset(tmp_path):
    config = one_node_config(tmp_path)
    # Payloads need not decode: a rejected batch still advances the state's offset.
    async with RaftNode(config, state_machine_factory=MetadataStateMachine) as node:
        await wait_until(lambda: node.is_leader)
        with trio.fail_after(5):
            last_batch = (await node.propose(b"batch")).offset
    async with RaftNode(config, state_machine_factory=MetadataStateMachine) as node:
        # Leader again: its first entry (a no-op) now follows the last batch. Checkpoint it.
        await wait_until(lambda: node.is_leader)
        await wait_until(lambda: node.status().get("last_applied", 0) > last_batch)
        node.force_checkpoint()
        await wait_until(lambda: node.latest_checkpoint() is not None)
        assert newest_checkpoint_index(config) > last_batch  # the mechanism: taken at a no-op
        offset, state = node.latest_checkpoint()
        assert offset == MetadataStateMachine.from_checkpoint(state).last_applied_offset
        assert offset == last_batch
        assert node.read_committed(offset, 10) == []  # the reader goes on from the tail
        assert node.committed_offset == offset  # a reader at the offset is caught up
    async with RaftNode(config, state_machine_factory=MetadataStateMachine) as node:
        # Restarted from that checkpoint: the same, and new batches follow it in the tail.
        assert node.latest_checkpoint()[0] == node.committed_offset == last_batch
        await wait_until(lambda: node.is_leader)
        with trio.fail_after(5):
            after = (await node.propose(b"after")).offset
        assert node.read_committed(last_batch, 10) == [(after, b"after")]


async def test_a_reader_that_loads_the_checkpoint_catches_up(tmp_path):
    """What a broker does (load the checkpoint when told, then read the tail) ends caught up."""
    config = one_node_config(tmp_path)
    async with RaftNode(config, state_machine_factory=MetadataStateMachine) as node:
        await wait_until(lambda: node.is_leader)
        with trio.fail_after(5):
            await node.propose(b"one")
    async with RaftNode(config, state_machine_factory=MetadataStateMachine) as node:
        await wait_until(lambda: node.is_leader)
        await wait_until(lambda: node.status().get("last_applied", 0) > node.committed_offset)
        node.force_checkpoint()
        await wait_until(lambda: node.latest_checkpoint() is not None)
        reader = MetadataStateMachine()
        for _ in range(3):  # a bounded number of rounds; the bug needed infinitely many
            try:
                batches = node.read_committed(max(0, reader.last_applied_offset), 100)
            except OffsetOutOfRangeError:
                checkpoint_offset, state = node.latest_checkpoint()
                loaded = MetadataStateMachine.from_checkpoint(state)
                assert loaded.last_applied_offset == checkpoint_offset
                assert loaded.last_applied_offset > reader.last_applied_offset, "no progress"
                reader = loaded
                continue
            for offset, payload in batches:
                reader.apply(offset, payload)
            if reader.last_applied_offset >= node.committed_offset:
                break
        assert reader.last_applied_offset == node.committed_offset


async def test_a_checkpoint_whose_state_is_past_its_raft_index_is_refused(tmp_path):
    """The state can lag a checkpoint's Raft index (no-ops), never lead it: such a file is
    damaged, and with no other checkpoint and a cut journal the node refuses to start."""
    config = one_node_config(tmp_path)
    os.makedirs(config.metadata_dir)
    state_machine = MetadataStateMachine()
    state_machine.apply(9, b"not a batch")  # rejected, but the offset advances to 9
    assert state_machine.last_applied_offset == 9
    checkpoint = RaftCheckpoint(5, 1, 4, 1, b"\x00last", b"\x00prev", state_machine.to_checkpoint())
    path = os.path.join(config.metadata_dir, "metadata-5.tmp")
    with open(path, "wb") as f:
        f.write(encode_checkpoint(checkpoint))
    CheckpointFiles(config.metadata_dir).publish(5, path)
    with pytest.raises(CorruptCheckpointFileError, match="past the checkpoint's Raft index 5"):
        async with RaftNode(config, state_machine_factory=MetadataStateMachine):
            pass
