"""quorum.raft on a one-controller quorum, in process: apply, tail reads, checkpoints, restart."""

from __future__ import annotations

import os

import pytest
import trio
from quorum_raft_toy import PASSWORD, ToyStateMachine, free_ports

from log.common.errors import NotControllerError, OffsetOutOfRangeError
from quorum.raft import (
    CorruptCheckpointFileError,
    RaftConfig,
    RaftFatalError,
    RaftNode,
    _MetadataSyncObj,
)
from quorum.raft_checkpoint import CheckpointFiles
from quorum.raft_journal import JOURNAL_MAGIC, decode_records
from tests.disk_faults import fill_up, small_tmpfs


def single_config(tmp_path, **overrides) -> RaftConfig:
    (port,) = free_ports(1)
    return RaftConfig(
        self_address=f"127.0.0.1:{port}",
        partner_addresses=(),
        data_dir=str(tmp_path / "node"),
        password=PASSWORD,
        **overrides,
    )


async def wait_leader(node: RaftNode) -> None:
    with trio.fail_after(5):
        while not node.is_leader:
            await trio.sleep(0.01)


async def test_propose_commits_and_applies(tmp_path):
    async with RaftNode(single_config(tmp_path), state_machine_factory=ToyStateMachine) as node:
        await wait_leader(node)
        with trio.fail_after(5):
            first = await node.propose(b"a")
            second = await node.propose(b"b")
        assert second.offset > first.offset > 0
        assert (first.result, second.result) == (1, 2)
        assert node.committed_offset == second.offset
        assert node.state_machine.records == [(first.offset, b"a"), (second.offset, b"b")]
        assert node.read_committed(0, 10) == [(first.offset, b"a"), (second.offset, b"b")]
        assert node.read_committed(first.offset, 10) == [(second.offset, b"b")]
        assert node.read_committed(second.offset, 10) == []


async def test_wait_for_offset_long_polls(tmp_path):
    async with RaftNode(single_config(tmp_path), state_machine_factory=ToyStateMachine) as node:
        await wait_leader(node)
        seen = []
        async with trio.open_nursery() as nursery:

            async def reader():
                seen.append(await node.wait_for_offset(node.committed_offset))

            nursery.start_soon(reader)
            await trio.sleep(0)
            assert seen == []
            with trio.fail_after(5):
                result = await node.propose(b"x")
        assert seen and seen[0] >= result.offset


async def test_an_apply_that_raises_stops_the_node_instead_of_diverging(tmp_path):
    """A committed entry the state machine cannot apply (it raises instead of answering a
    refusal) is fatal: the proposal fails, the node stops, nothing later is applied."""
    async with RaftNode(single_config(tmp_path), state_machine_factory=ToyStateMachine) as node:
        await wait_leader(node)
        with trio.fail_after(5):
            good = await node.propose(b"before")
            with pytest.raises(RaftFatalError, match="boom"):
                await node.propose(b"boom!")
            error = await node.wait_failed()
        assert isinstance(error, RaftFatalError) and "offset" in str(error)
        assert [f.error for f in node.apply_failures] == [
            "ValueError: toy state machine refuses boom"
        ]
        with pytest.raises(RaftFatalError):
            await node.propose(b"after")
        assert node.state_machine.records == [(good.offset, b"before")]


def test_exactly_one_replicated_method():
    # pysyncobj numbers replicated methods by sorted name: a second one would renumber the log.
    names = [
        n for n in dir(_MetadataSyncObj) if getattr(getattr(_MetadataSyncObj, n), "replicated", 0)
    ]
    assert sorted(names) == ["_append_batch", "_append_batch_v0"]


async def test_restart_replays_only_the_tail_after_the_checkpoint(tmp_path):
    config = single_config(tmp_path, checkpoint_interval_records=20, tail_max_batches=100)
    async with RaftNode(config, state_machine_factory=ToyStateMachine) as node:
        await wait_leader(node)
        with trio.fail_after(20):
            for i in range(150):
                await node.propose(b"r%d" % i)
        expected = list(node.state_machine.records)
        checkpoint = node.latest_checkpoint()
        assert checkpoint is not None and checkpoint[0] > 100
        with pytest.raises(OffsetOutOfRangeError):
            node.read_committed(0, 10)
    async with RaftNode(config, state_machine_factory=ToyStateMachine) as node:
        restored = node.latest_checkpoint()  # loaded before __aenter__ returned
        assert restored is not None and node.committed_offset >= restored[0] > 100
        with trio.fail_after(5):
            await node.wait_for_offset(expected[-1][0] - 1)
        assert node.state_machine.records == expected
        # 150 records in history; the restart replayed only the journal after the checkpoint.
        assert node.state_machine.applies_since_load <= 25
        # It READ more: the journal file is kept from the oldest of the 3 kept checkpoints (the
        # fallbacks), so start-up decodes up to ~3 intervals (+ the tail), never all history.
        oldest_kept = checkpoint_files(config)[-1][0]
        entries = journal_entries(config)
        assert entries[0][1] == oldest_kept - 1 and len(entries) <= 3 * 20 + 25
        assert node.applied_count == node.state_machine.applies_since_load
        await wait_leader(node)
        with trio.fail_after(5):
            more = await node.propose(b"more")
        assert more.offset > expected[-1][0]


def flip_byte(path: str, position: int = -3) -> None:
    data = bytearray(open(path, "rb").read())
    data[position] ^= 0xFF
    open(path, "wb").write(bytes(data))


def journal_entries(config: RaftConfig) -> list[tuple[bytes, int, int]]:
    with open(os.path.join(config.metadata_dir, "raft.journal"), "rb") as f:
        return decode_records(f.read(), len(JOURNAL_MAGIC))[0]


def checkpoint_files(config: RaftConfig) -> list[tuple[int, str]]:
    return CheckpointFiles(config.metadata_dir, config.checkpoints_kept).list()


async def write_records(config: RaftConfig, count: int) -> list[tuple[int, bytes]]:
    async with RaftNode(config, state_machine_factory=ToyStateMachine) as node:
        await wait_leader(node)
        with trio.fail_after(20):
            for i in range(count):
                await node.propose(b"r%d" % i)
        return list(node.state_machine.records)


async def test_corrupt_newest_checkpoint_falls_back_to_an_older_one(tmp_path, caplog):
    config = single_config(tmp_path, checkpoint_interval_records=10, tail_max_batches=100)
    expected = await write_records(config, 60)
    files = checkpoint_files(config)
    assert len(files) == 3  # the newest three are kept
    newest_offset, newest_path = files[0]
    flip_byte(newest_path)
    async with RaftNode(config, state_machine_factory=ToyStateMachine) as node:
        # Loaded the next older one, and the journal from there replays the rest (the node may
        # already have taken a new checkpoint by now: the log it sees is long).
        assert f"falling back to checkpoint {files[1][1]}" in caplog.text
        with trio.fail_after(5):
            await node.wait_for_offset(expected[-1][0] - 1)
        assert node.state_machine.records[: len(expected)] == expected
        assert node.state_machine.applies_since_load > expected[-1][0] - newest_offset
    assert "skipping damaged checkpoint" in caplog.text
    assert os.path.exists(newest_path + ".corrupt")  # set aside, never read again


async def test_every_checkpoint_corrupt_refuses_to_start(tmp_path):
    config = single_config(tmp_path, checkpoint_interval_records=10, tail_max_batches=100)
    await write_records(config, 60)
    for _, path in checkpoint_files(config):
        flip_byte(path)
    with pytest.raises(CorruptCheckpointFileError, match="no usable checkpoint"):
        async with RaftNode(config, state_machine_factory=ToyStateMachine):
            pass
    assert len(checkpoint_files(config)) == 3  # a refusal changes nothing on disk


async def test_journal_never_cut_replays_from_zero_when_checkpoints_are_corrupt(tmp_path):
    config = single_config(tmp_path, checkpoint_interval_records=1000, tail_max_batches=1000)
    expected = await write_records(config, 30)
    bogus = os.path.join(config.metadata_dir, "metadata-00000000000000000020.checkpoint")
    open(bogus, "wb").write(b"QLRCKPT2" + bytes(100))  # damaged, and the journal starts at 1
    async with RaftNode(config, state_machine_factory=ToyStateMachine) as node:
        assert node.latest_checkpoint() is None
        with trio.fail_after(5):
            await node.wait_for_offset(expected[-1][0] - 1)
        assert node.state_machine.records[: len(expected)] == expected


async def test_propose_on_a_follower_is_refused(tmp_path):
    # A node whose partners are all down never becomes leader.
    (port, partner) = free_ports(2)
    config = RaftConfig(
        self_address=f"127.0.0.1:{port}",
        partner_addresses=(f"127.0.0.1:{partner}",),
        data_dir=str(tmp_path / "lonely"),
        password=PASSWORD,
    )
    async with RaftNode(config, state_machine_factory=ToyStateMachine) as node:
        with pytest.raises(NotControllerError):
            await node.propose(b"x")


class _WritesMarkerWhenUnpickled:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


async def test_raft_port_without_password_cannot_inject(tmp_path):
    import pickle
    import socket
    import struct
    import zlib

    marker = tmp_path / "pwned"
    config = single_config(tmp_path)
    async with RaftNode(config, state_machine_factory=ToyStateMachine) as node:
        await wait_leader(node)
        with trio.fail_after(5):
            before = await node.propose(b"before")
        host, port = config.self_address.rsplit(":", 1)

        def attack() -> bytes:
            # pysyncobj's frame: int32 length + zlib(pickle(message)), unencrypted.
            frames = [
                _WritesMarkerWhenUnpickled(str(marker)),
                "127.0.0.1:1",  # claim to be a node
                {"type": "apply_command", "command": b"\x00" + pickle.dumps((0, (b"\x01x",)))},
            ]
            with socket.create_connection((host, int(port)), timeout=5) as s:
                try:
                    for frame in frames:
                        data = zlib.compress(pickle.dumps(frame, 2))
                        s.sendall(struct.pack("i", len(data)) + data)
                    return s.recv(1024)  # the node drops the connection at the first frame
                except (BrokenPipeError, ConnectionResetError):
                    return b""

        assert await trio.to_thread.run_sync(attack) == b""
        await trio.sleep(0.2)
        assert not marker.exists()
        with trio.fail_after(5):
            after = await node.propose(b"after")
        assert [p for _, p in node.state_machine.records] == [b"before", b"after"]
        assert after.offset > before.offset


async def test_raft_port_binds_the_configured_address_only(tmp_path):
    import socket

    (port,) = free_ports(1)
    config = RaftConfig(
        self_address=f"127.0.0.2:{port}",
        partner_addresses=(),
        data_dir=str(tmp_path / "node"),
        password=PASSWORD,
    )
    async with RaftNode(config, state_machine_factory=ToyStateMachine) as node:
        await wait_leader(node)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        socket.create_connection(("127.0.0.2", port), timeout=2).close()


async def test_leadership_change_is_reported_in_the_trio_thread(tmp_path):
    import threading

    changes = []
    trio_thread = threading.current_thread()

    def on_change(is_leader: bool, raft_term: int) -> None:
        changes.append((is_leader, raft_term, threading.current_thread() is trio_thread))

    config = single_config(tmp_path)
    async with RaftNode(
        config, state_machine_factory=ToyStateMachine, on_leadership_change=on_change
    ) as node:
        await wait_leader(node)
        await trio.sleep(0.05)
        assert changes == [(True, node.raft_term, True)]
        assert node.leader_id == config.self_address


async def test_journal_state_and_checkpoint_reach_the_disk(tmp_path, monkeypatch):
    """The sync calls themselves (a process crash cannot show a missing fsync; power loss can)."""
    synced: list[str] = []
    real_fsync, real_fdatasync = os.fsync, os.fdatasync

    def name_of(fd: int) -> str:
        return os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))

    def fsync(fd: int) -> None:
        synced.append(name_of(fd))
        real_fsync(fd)

    def fdatasync(fd: int) -> None:
        synced.append(name_of(fd))
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    config = single_config(tmp_path, checkpoint_interval_records=10, tail_max_batches=100)
    async with RaftNode(config, state_machine_factory=ToyStateMachine) as node:
        await wait_leader(node)
        assert "raft.state.tmp" in synced  # the term/vote of the election, before any vote
        synced.clear()
        with trio.fail_after(10):
            await node.propose(b"one")
            assert "raft.journal" in synced  # the entry, before the ack
            for i in range(20):
                await node.propose(b"r%d" % i)
    assert "raft.checkpoint.tmp" in synced  # the checkpoint's bytes, before pysyncobj's rename
    assert "metadata" in synced  # the directory: the rename, before the journal is cut


async def test_a_journal_that_cannot_be_written_stops_the_node(tmp_path):
    """ENOSPC on the Raft journal (a 2 MiB tmpfs filled up): the node stops, fails the
    proposal and every later one, instead of leading while nothing commits."""
    with small_tmpfs(tmp_path / "small", "2m") as mount:
        config = single_config(mount)
        async with RaftNode(config, state_machine_factory=ToyStateMachine) as node:
            await wait_leader(node)
            with trio.fail_after(5):
                await node.propose(b"fits")
            fill_up(mount)
            with trio.fail_after(10):
                with pytest.raises(RaftFatalError):
                    await node.propose(b"x" * 200_000)
                error = await node.wait_failed()
            assert "No space left" in str(error), error
            with pytest.raises(RaftFatalError):
                await node.propose(b"later")
