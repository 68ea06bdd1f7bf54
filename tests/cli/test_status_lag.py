"""`quorumlog status`'s lag against a real 3-node cluster of its own (one node gets killed):
replicas in sync show lag 0 and equal log sizes; a killed follower's replica shows `?` (its
broker cannot answer DescribeLogDirs) and the partition becomes under-replicated."""

from __future__ import annotations

import json
import time

import pytest
from cli_helpers import run_cli, started_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

TOPIC = "lagged"
SETTLE_TIMEOUT_S = 30


@pytest.fixture
def cluster(tmp_path):
    with started_cluster(tmp_path) as cluster:
        yield cluster


def status_until(bootstrap: str, predicate) -> dict:
    """Poll `status --json` (followers fetch, brokers get fenced asynchronously)."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        state = json.loads(run_cli(["status", "--bootstrap", bootstrap, "--json"]).stdout)
        topics = [t for t in state["topics"] if t["name"] == TOPIC]
        if topics and predicate(state, topics[0]["partitions"][0]):
            return state
        assert time.monotonic() < deadline, state
        time.sleep(0.2)


def test_status_lag_in_sync_then_a_follower_killed(cluster):
    bootstrap = cluster.layout.bootstrap_servers
    b = ["--bootstrap", bootstrap]
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while len(json.loads(run_cli(["status", *b, "--json"]).stdout)["nodes"]) < 3:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    run_cli(["topics", "create", *b, "-t", TOPIC, "-p", "1", "-r", "3"])
    run_cli(["produce", *b, "-t", TOPIC, "-p", "0"], input="a\nb\nc\n")

    def in_sync(state, p):
        sizes = {r["partition_size"] for r in p["replica_logs"]}
        return p["high_watermark"] == 3 and len(sizes) == 1 and sizes != {0} and p["lag"] == 0

    state = status_until(bootstrap, in_sync)
    partition = [t for t in state["topics"] if t["name"] == TOPIC][0]["partitions"][0]
    assert sorted(r["broker"] for r in partition["replica_logs"]) == [1, 2, 3]
    assert all(r["offset_lag"] == 0 for r in partition["replica_logs"])
    assert state["under_replicated_partitions"] == []
    text = run_cli(["status", *b]).stdout
    assert "Lag" in text

    follower = next(r for r in partition["replicas"]
                    if r not in (partition["leader"], state["controller_id"]))  # fmt: skip
    cluster.kill9(follower)
    alive = [n for n in (1, 2, 3) if n != follower]
    bootstrap_alive = ",".join(f"127.0.0.1:{cluster.layout.kafka_port(n)}" for n in alive)

    def follower_gone(state, p):
        return (
            p["lag"] is None
            and {"topic": TOPIC, "partition": 0} in state["under_replicated_partitions"]
        )

    state = status_until(bootstrap_alive, follower_gone)
    partition = [t for t in state["topics"] if t["name"] == TOPIC][0]["partitions"][0]
    by_broker = {r["broker"]: r for r in partition["replica_logs"]}
    assert by_broker[follower] == {"broker": follower, "offset_lag": None, "partition_size": None}
    assert all(by_broker[n]["offset_lag"] == 0 for n in alive)
    text = run_cli(["status", "--bootstrap", bootstrap_alive]).stdout
    assert "?" in text and f"under-replicated partitions: {TOPIC}-0" in text
