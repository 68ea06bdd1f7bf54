"""A one-node cluster (combined controller + broker) killed with kill -9 and restarted becomes
ready every time, with every topic it ever created.

Regression: pysyncobj compacts the metadata log once it holds more than
`metadata.log.max.record.count.between.snapshots` (the harness's 10) entries, at whatever entry
was applied last. A restarted controller's first applied entry is its election no-op, so when
the log it restarts with holds exactly 10 entries, the checkpoint lands on the no-op, whose Raft
index is past the state's own offset. That checkpoint used to be published at the no-op's index:
the broker loaded it, stood below the tail's base, got the same checkpoint again, forever, and
the node never became ready (the next checkpoint, 10 entries later, never came). The test walks
the log to exactly that length (one topic at a time, reading the journal on disk) before each
kill -9, so it hits the case every round instead of by chance."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from quorum.raft_checkpoint import CheckpointFiles
from quorum.raft_journal import JOURNAL_MAGIC, decode_records
from quorum.state_machine import MetadataStateMachine

ROUNDS = 2
RESTART_LOG_ENTRIES = 10  # pysyncobj's view at restart: one more (the no-op) makes it compact
MAX_STEPS = 40


def _log_entries_seen_by_pysyncobj(metadata_dir: Path) -> int:
    """pysyncobj's log: the journal from the newest checkpoint's prev entry on (all of it if
    there is no checkpoint). The journal is synced before any metadata write is acknowledged."""
    indexes = [i for _, i, _ in decode_records((metadata_dir / "raft.journal").read_bytes(), 8)[0]]
    files = CheckpointFiles(str(metadata_dir)).list()
    first = files[0][0] - 1 if files else 0
    return sum(1 for i in indexes if i >= first)


def _settled_length(metadata_dir: Path) -> int:
    """The log length once no entry arrived for 0.5 s (a created topic's records are done)."""
    length, since = -1, 0.0
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        now_length = _log_entries_seen_by_pysyncobj(metadata_dir)
        if now_length != length:
            length, since = now_length, time.monotonic()
        elif time.monotonic() - since >= 0.5:
            return length
        time.sleep(0.05)
    raise AssertionError("the metadata log never settled")


def _create_topic(bootstrap: str, name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(20)


def _topic_names(bootstrap: str) -> set[str]:
    from confluent_kafka.admin import AdminClient

    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20).topics)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_one_node_cluster_is_ready_after_a_kill_9_restart_that_checkpoints_a_noop(tmp_path):
    from cluster_harness import TEST_PROPS, Cluster

    assert TEST_PROPS["metadata.log.max.record.count.between.snapshots"] == RESTART_LOG_ENTRIES
    assert JOURNAL_MAGIC == b"QLRJRNL1"  # 8 bytes, skipped above
    cluster = Cluster(tmp_path, 1)
    node_id = cluster.layout.node_ids[0]
    metadata_dir = cluster.layout.node_dir(node_id) / "metadata"
    cluster.start_all()
    bootstrap = cluster.layout.bootstrap_servers
    created: set[str] = set()
    for round_number in range(ROUNDS):
        for step in range(MAX_STEPS):
            if _settled_length(metadata_dir) == RESTART_LOG_ENTRIES:
                break
            name = f"round-{round_number}-{step}"
            _create_topic(bootstrap, name)
            created.add(name)
        else:
            raise AssertionError(f"the metadata log never held {RESTART_LOG_ENTRIES} entries")
        cluster.kill9(node_id)
        cluster.start(node_id)
        cluster.wait_ready(node_id, timeout_s=20)  # the bug: never ready, the log loops
        assert created <= _topic_names(bootstrap)
        # The case was hit: the restart's checkpoint is at a Raft index past its state's offset.
        _, _, checkpoint = next(CheckpointFiles(str(metadata_dir)).read_all())
        state = MetadataStateMachine.from_checkpoint(checkpoint.state)
        assert state.last_applied_offset < checkpoint.last_index
