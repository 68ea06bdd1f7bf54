"""Real processes, kill -9, then damaged checkpoint files: an older checkpoint plus the journal
rebuilds every committed record; with no usable checkpoint the node refuses to start.

QUORUM_RAFT_LOSE_UNSYNCED=1 as in the durability tests: a kill loses what a power cut would."""

from __future__ import annotations

import os
import time

import pytest
from quorum_raft_toy import NodeProcess, cluster_configs, free_ports
from test_raft_cluster import propose_retrying, wait_for_leader, wait_for_records
from test_raft_durability import LOSE, assert_all_acked_present

from quorum.raft_checkpoint import CheckpointFiles

pytestmark = pytest.mark.slow


def write_then_kill9(config, min_checkpoints: int) -> list[str]:
    """Propose back to back until `min_checkpoints` files exist, then kill -9 mid-stream."""
    node = NodeProcess(config, env=LOSE)
    wait_for_leader([node])
    node.proc.stdin.write(b'{"op": "propose_forever", "concurrency": 8}\n')
    node.proc.stdin.flush()
    files = CheckpointFiles(config.metadata_dir, config.checkpoints_kept)
    deadline = time.monotonic() + 30
    while len(files.list()) < min_checkpoints or len(node.acked) < 40 * (min_checkpoints + 1):
        assert time.monotonic() < deadline, (len(files.list()), len(node.acked))
        time.sleep(0.02)
    node.kill9()
    time.sleep(0.1)  # let the stdout pump drain the last acks
    return list(node.acked)


def flip_byte(path: str) -> None:
    with open(path, "r+b") as f:
        f.seek(-3, os.SEEK_END)
        byte = f.read(1)
        f.seek(-3, os.SEEK_END)
        f.write(bytes([byte[0] ^ 0xFF]))


def test_corrupt_newest_checkpoint_falls_back_and_keeps_every_acked_record(tmp_path):
    (config,) = cluster_configs(
        str(tmp_path), free_ports(1), checkpoint_interval_records=40, tail_max_batches=100
    )
    acked = write_then_kill9(config, min_checkpoints=3)
    files = CheckpointFiles(config.metadata_dir, config.checkpoints_kept).list()
    assert len(files) >= 3  # 4 if the kill came between a publish and its prune
    (newest, newest_path), (older, _) = files[0], files[1]
    flip_byte(newest_path)
    node = NodeProcess(config, env=LOSE, capture_stderr=True)
    try:
        assert node.request("status")["ok"]
    finally:
        node.kill9()
    stderr = node.proc.stderr.read().decode()
    assert f"skipping damaged checkpoint {newest_path}" in stderr, stderr
    assert f"falling back to checkpoint {files[1][1]} (offset {older})" in stderr, stderr
    assert older < newest
    assert os.path.exists(newest_path + ".corrupt")
    assert_all_acked_present(config, acked)  # the journal from the older one replays the rest


def test_every_checkpoint_corrupt_refuses_to_start(tmp_path):
    (config,) = cluster_configs(
        str(tmp_path), free_ports(1), checkpoint_interval_records=40, tail_max_batches=100
    )
    write_then_kill9(config, min_checkpoints=3)
    files = CheckpointFiles(config.metadata_dir, config.checkpoints_kept).list()
    for _, path in files:
        flip_byte(path)
    node = NodeProcess(config, env=LOSE, expect_ready=False, capture_stderr=True)
    assert node.proc.wait(timeout=20) != 0
    assert node.lines.get(timeout=5) is None  # never ready
    stderr = node.proc.stderr.read().decode()
    assert "CorruptCheckpointFileError" in stderr and "no usable checkpoint" in stderr, stderr
    assert CheckpointFiles(config.metadata_dir).list() == files  # nothing renamed or deleted


def propose_to_a_leader(nodes: list, payloads: list[str]):
    """(the leader, its reply): a proposal the leader dropped because leadership moved (three
    fresh nodes on a loaded box may hold a second election) goes to the new leader. What the
    test compares afterwards is read from the leader, so a retried payload is harmless."""
    deadline = time.monotonic() + 20
    while True:
        leader = wait_for_leader(nodes)
        reply = propose_retrying(leader, payloads)
        if reply["ok"] or "NotController" not in reply["error"] or time.monotonic() > deadline:
            return leader, reply
        time.sleep(0.05)


def test_follower_with_a_damaged_newest_checkpoint_rejoins_with_every_record(tmp_path):
    configs = cluster_configs(
        str(tmp_path), free_ports(3), checkpoint_interval_records=20, tail_max_batches=100
    )
    nodes = [NodeProcess(c, env=LOSE) for c in configs]
    try:
        leader, reply = propose_to_a_leader(nodes, [f"r{i}" for i in range(90)])
        assert reply["ok"], reply
        expected = leader.request("records")["records"]
        follower = next(n for n in nodes if n is not leader)
        assert wait_for_records(follower, expected) == expected
        follower.kill9()
        files = CheckpointFiles(follower.config.metadata_dir).list()
        assert len(files) >= 3
        flip_byte(files[0][1])
        restarted = NodeProcess(follower.config, env=LOSE)
        nodes[nodes.index(follower)] = restarted
        assert wait_for_records(restarted, expected) == expected
        assert os.path.exists(files[0][1] + ".corrupt")
        leader, reply = propose_to_a_leader(nodes, ["after"])
        assert reply["ok"], reply
        after = leader.request("records")["records"]
        assert wait_for_records(restarted, after) == after
    finally:
        for node in nodes:
            node.kill9()
