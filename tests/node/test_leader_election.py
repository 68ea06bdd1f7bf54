"""Preferred leaders on 3 real nodes: after a broker is killed and comes back, leadership has
moved to the brokers that stayed; an operator's ElectLeaders (confluent-kafka's
AdminClient.elect_leaders, as kafka-leader-election.sh) moves it back, and with
auto.leader.rebalance.enable the active controller does so by itself."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import trio
from cluster_harness import REPO, Cluster

from log.common.node_config import NODE_CONFIG_FILE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

TOPIC = "elect"
PARTITIONS = 6


def _partitions(bootstrap: str) -> dict[int, tuple[int, list[int], list[int]]]:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=30)
    return {p: (m.leader, m.replicas, m.isrs) for p, m in metadata.topics[TOPIC].partitions.items()}


def _wait(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _skew_leadership(cluster: Cluster, bootstrap: str) -> None:
    """Kill -9 broker 1 and bring it back: it rejoins every ISR but leads nothing."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(timeout=30)
    before = _wait(lambda: _partitions(bootstrap), 10, "metadata")
    assert any(leader == 1 for leader, _, _ in before.values())
    cluster.kill9(1)
    _wait(
        lambda: all(leader not in (1, -1) for leader, _, _ in _partitions(bootstrap).values()),
        30,
        "leaders to move off broker 1",
    )
    cluster.start(1)
    cluster.wait_ready(1)
    _wait(
        lambda: all(len(isr) == 3 for _, _, isr in _partitions(bootstrap).values()),
        30,
        "broker 1 back in every ISR",
    )


def _cli_elect(bootstrap: str, *args: str) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "tools", "topics", "elect-leaders", "-b", bootstrap, "--json", *args],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return json.loads(out.stdout)


def _balanced(bootstrap: str) -> bool:
    return all(leader == replicas[0] for leader, replicas, _ in _partitions(bootstrap).values())


async def test_elect_leaders_moves_leadership_back_to_preferred_replicas(tmp_path):
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    cluster = Cluster(tmp_path, 3)
    cluster.start_all()
    bootstrap = cluster.layout.bootstrap_servers

    def run() -> None:
        _skew_leadership(cluster, bootstrap)
        skewed = [p for p, (leader, replicas, _) in _partitions(bootstrap).items()
                  if leader != replicas[0]]  # fmt: skip
        assert skewed, "broker 1 prefers some partitions"
        # the command line, for one partition
        first = _cli_elect(bootstrap, "--topic", TOPIC, "--partition", str(skewed[0]))
        assert first == [{"topic": TOPIC, "partition": skewed[0], "result": "NONE"}]
        # confluent-kafka's admin client, for every partition of the topic: those broker 1
        # prefers are elected, the others answer ELECTION_NOT_NEEDED
        admin = AdminClient({"bootstrap.servers": bootstrap})
        asked = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        results = admin.elect_leaders(ElectionType.PREFERRED, asked).result(timeout=30)
        errors = {tp.partition: (e.name() if e else None) for tp, e in results.items()}
        assert {p for p, e in errors.items() if e is None} == set(skewed[1:]), errors
        # the answer waits until the answering broker's image shows it; the Metadata request
        # may go to another broker, a moment behind
        _wait(lambda: _balanced(bootstrap), 10, "every partition led by its preferred replica")
        assert _cli_elect(bootstrap) == []  # every partition: none needs an election now
        again = admin.elect_leaders(ElectionType.PREFERRED, asked).result(timeout=30)
        assert all(e is not None and e.name() == "ELECTION_NOT_NEEDED" for e in again.values())
        unknown = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, 99)])
        [error] = unknown.result(timeout=30).values()
        assert error is not None and error.name() == "UNKNOWN_TOPIC_OR_PART"

    await trio.to_thread.run_sync(run)


async def test_auto_leader_rebalance_moves_leadership_back_by_itself(tmp_path):
    cluster = Cluster(tmp_path, 3)
    for node_id in cluster.layout.node_ids:
        path = cluster.layout.node_dir(node_id) / NODE_CONFIG_FILE
        path.write_text(path.read_text() + '"leader.imbalance.check.interval.seconds" = 1\n')
    cluster.start_all()
    bootstrap = cluster.layout.bootstrap_servers

    def run() -> None:
        _skew_leadership(cluster, bootstrap)
        _wait(lambda: _balanced(bootstrap), 30, "the controller to balance leaders")

    await trio.to_thread.run_sync(run)
    assert any(
        cluster.log_matches(n, r"leader balancing node=\d+ preferred_leaders_elected=[1-9]")
        for n in (1, 2, 3)
    )
