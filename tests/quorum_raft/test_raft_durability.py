"""Each durability gap of pysyncobj 0.3.17 as shipped, closed by quorum.raft, proven by a crash.

The processes run with QUORUM_RAFT_LOSE_UNSYNCED=1: our files keep unsynced bytes in process
memory, so SIGKILL / os._exit loses exactly what a power failure would (pysyncobj's own journal
only ever survives a kill because the page cache does). QUORUM_RAFT_CRASH_AT=<point> kills the
process with os._exit(77) at that exact point. After every crash, every acknowledged (committed)
record must be there after restart.
"""

from __future__ import annotations

import os
import time

import pytest
from quorum_raft_toy import NodeProcess, cluster_configs, free_ports
from test_raft_cluster import wait_for_leader, wait_for_records

from quorum.raft_files import CRASH_EXIT_CODE
from quorum.raft_journal import RaftState

pytestmark = pytest.mark.slow

LOSE = {"QUORUM_RAFT_LOSE_UNSYNCED": "1"}


def single_node_config(tmp_path, **overrides):
    (config,) = cluster_configs(str(tmp_path), free_ports(1), **overrides)
    return config


def run_until_crash(config, point: str) -> list[str]:
    """Propose back to back until the injected crash; return the acknowledged payloads."""
    crash = {"QUORUM_RAFT_CRASH_AT": point, "QUORUM_RAFT_CRASH_DELAY_MS": "300"}
    node = NodeProcess(config, env={**LOSE, **crash})
    wait_for_leader([node])
    node.proc.stdin.write(b'{"op": "propose_forever", "concurrency": 16}\n')
    node.proc.stdin.flush()
    assert node.proc.wait(timeout=30) == CRASH_EXIT_CODE
    time.sleep(0.1)  # let the stdout pump drain the last acks
    assert len(node.acked) > 10
    return list(node.acked)


def assert_all_acked_present(config, acked: list[str]) -> None:
    node = NodeProcess(config, env=LOSE)
    try:
        wait_for_leader([node])
        deadline = time.monotonic() + 10
        while True:
            payloads = [p for _, p in node.request("records")["records"]]
            if set(acked) <= set(payloads) or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        missing = sorted(set(acked) - set(payloads))
        assert not missing, f"{len(missing)} of {len(acked)} acked records lost: {missing[:5]}"
    finally:
        node.kill9()


def test_gap1_journal_is_synced_before_any_ack(tmp_path):
    """Kill every controller right after the acks: nothing acked may be lost."""
    configs = cluster_configs(str(tmp_path), free_ports(3))
    nodes = [NodeProcess(c, env=LOSE) for c in configs]
    leader = wait_for_leader(nodes)
    reply = leader.request("propose", payloads=[f"r{i}" for i in range(60)])
    assert reply["ok"], reply
    expected = leader.request("records")["records"]
    for node in nodes:
        node.kill9()  # unsynced bytes die with the processes, as with a power cut
    nodes = [NodeProcess(c, env=LOSE) for c in configs]
    try:
        wait_for_leader(nodes)
        for node in nodes:
            assert wait_for_records(node, expected) == expected
    finally:
        for node in nodes:
            node.kill9()


def test_gap2_term_and_vote_are_durable_before_the_vote_is_sent(tmp_path):
    configs = cluster_configs(str(tmp_path), free_ports(3))
    crashing = NodeProcess(
        configs[0], env={**LOSE, "QUORUM_RAFT_CRASH_AT": "after_vote_stored"}, expect_ready=False
    )
    others = [NodeProcess(c, env=LOSE) for c in configs[1:]]
    try:
        assert crashing.proc.wait(timeout=20) == CRASH_EXIT_CODE  # died right after voting
        state = RaftState(os.path.join(configs[0].metadata_dir, "raft.state"))
        assert state.current_term >= 1
        assert state.voted_for in {c.self_address for c in configs}
    finally:
        for node in others:
            node.kill9()


def test_gap3_checkpoint_is_durable_before_the_journal_drops_entries(tmp_path):
    """Crash right after the journal was cut at the checkpoint: only the checkpoint has them."""
    config = single_node_config(tmp_path, checkpoint_interval_records=40, tail_max_batches=100)
    acked = run_until_crash(config, "after_journal_rewrite")
    assert_all_acked_present(config, acked)


def test_gap4_crash_between_checkpoint_rename_and_journal_rewrite(tmp_path):
    """pysyncobj as shipped drops the journal here (11709 committed -> 1910 in the research)."""
    config = single_node_config(tmp_path, checkpoint_interval_records=40, tail_max_batches=100)
    acked = run_until_crash(config, "after_checkpoint_rename")
    assert_all_acked_present(config, acked)
