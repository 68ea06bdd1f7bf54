"""Kafka's transactions acceptance test, rebuilt on real processes: a transactional copier
(consume-transform-produce with send_offsets_to_transaction, txn_copier.py) copies 100,000
records from an input topic to an output topic while the transaction coordinators and partition
leaders are killed with SIGKILL and restarted, and while copier processes are killed and started
again with the same transactional.id. A read_committed consumer then reads exactly the input, each
record once, in input order per partition; a read_committed consumer running during the copy never
sees a record twice (an aborted copy followed by its committed retry would show up as one)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cluster_harness import Cluster
from committed_read import read_committed

from log.coordinator.transaction_log import partition_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

IN, OUT = "copy-in", "copy-out"
PARTITIONS = 4
RECORDS = 100_000
COPIERS = {"copier-0": (0, 1), "copier-1": (2, 3)}
COPIER = Path(__file__).with_name("txn_copier.py")
TXN_STATE = "__transaction_state"


def _seed(bootstrap: str) -> dict[int, list[bytes]]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(
        [NewTopic(t, num_partitions=PARTITIONS, replication_factor=3) for t in (IN, OUT)]
    ).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    expected: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for i in range(RECORDS):
        value = b"%08d" % i
        producer.produce(IN, value, value, partition=i % PARTITIONS)
        expected[i % PARTITIONS].append(value)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    return expected


STALL_S = 25  # a copier that reports nothing this long is hung (see Copiers)


class Copiers:
    """The copier processes; any that exits early (killed by us or by its own error) is
    started again with the same transactional.id until every one has exited 0.

    A copier that reports no progress for STALL_S (it reports every 5 s) is killed and started
    again too: librdkafka 2.16's send_offsets_to_transaction can hang for good when the group
    coordinator's broker left the metadata for a moment (it was fenced while it restarted) --
    librdkafka issue #5511, fixed by its PR #5512. Killing a hung client is one more copier
    crash, which the exactly-once guarantee must survive like the others."""

    def __init__(self, bootstrap: str, ends: dict[int, int], out_dir: Path) -> None:
        self.bootstrap, self.ends, self.out_dir = bootstrap, ends, out_dir
        self.processes: dict[str, subprocess.Popen] = {}
        self.done: set[str] = set()
        self.restarts: list[str] = []
        self.progress: dict[str, tuple[int, float]] = {}  # id -> (report lines, when changed)

    def start(self, txn_id: str) -> None:
        parts = COPIERS[txn_id]
        log = open(self.out_dir / f"{txn_id}.log", "ab")  # noqa: SIM115
        self.processes[txn_id] = subprocess.Popen(
            [sys.executable, str(COPIER), self.bootstrap, txn_id, IN, OUT,
             ",".join(map(str, parts)), ",".join(str(self.ends[p]) for p in parts)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        log.close()

    def kill9(self, txn_id: str) -> None:
        if txn_id not in self.done:
            self.processes[txn_id].send_signal(signal.SIGKILL)
            self.processes[txn_id].wait()
            self.start(txn_id)

    def _reports(self, txn_id: str) -> int:
        text = (self.out_dir / f"{txn_id}.log").read_text(errors="replace")
        return sum(1 for line in text.splitlines() if line.startswith(txn_id))

    def reap(self) -> bool:
        """True once every copier has exited 0."""
        for txn_id, process in list(self.processes.items()):
            code = process.poll()
            if code is None and txn_id not in self.done:
                reports, now = self._reports(txn_id), time.monotonic()
                if self.progress.get(txn_id, (-1, 0.0))[0] != reports:
                    self.progress[txn_id] = (reports, now)
                elif now - self.progress[txn_id][1] > STALL_S:
                    self.restarts.append(f"{txn_id} hung: killed")
                    del self.progress[txn_id]
                    self.kill9(txn_id)
                continue
            if code is None or txn_id in self.done:
                continue
            if code == 0:
                self.done.add(txn_id)
            else:
                self.restarts.append(f"{txn_id} exited {code}")
                self.start(txn_id)
        return self.done == set(COPIERS)

    def kill_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()

    def logs(self) -> str:
        return "\n".join((self.out_dir / f"{t}.log").read_text() for t in COPIERS)


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    return {p: m.leader for p, m in metadata.topics[topic].partitions.items()}


def _bounce_node(cluster: Cluster, node_id: int) -> None:
    if node_id not in cluster.processes:
        return
    cluster.kill9(node_id)
    time.sleep(1)
    cluster.start(node_id)
    cluster.wait_ready(node_id)


def _watch(bootstrap: str, stop: threading.Event, seen: list[tuple[int, bytes]]) -> None:
    """A read_committed consumer reading the output while the copy runs."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "watcher",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(OUT, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    while not stop.is_set():
        for msg in consumer.consume(1000, 0.2):
            if msg.error() is None:
                seen.append((msg.partition(), msg.value()))
    consumer.close()


def test_copier_exactly_once_through_coordinator_leader_and_copier_kills(tmp_path):
    cluster = Cluster(tmp_path, 3)
    cluster.start_all()
    bootstrap = cluster.layout.bootstrap_servers
    expected = _seed(bootstrap)
    ends = {p: len(values) for p, values in expected.items()}

    stop, seen = threading.Event(), []
    watcher = threading.Thread(target=_watch, args=(bootstrap, stop, seen), daemon=True)
    watcher.start()
    copiers = Copiers(bootstrap, ends, tmp_path)
    for txn_id in COPIERS:
        copiers.start(txn_id)

    def coordinator_of(txn_id: str) -> int:
        leaders = _leaders(bootstrap, TXN_STATE)
        return leaders[partition_for(txn_id, len(leaders))]

    bounces = [
        ("coordinator of copier-0", lambda: _bounce_node(cluster, coordinator_of("copier-0"))),
        ("copier-1", lambda: copiers.kill9("copier-1")),
        ("leader of copy-out 2", lambda: _bounce_node(cluster, _leaders(bootstrap, OUT)[2])),
        ("copier-0", lambda: copiers.kill9("copier-0")),
        ("coordinator of copier-1", lambda: _bounce_node(cluster, coordinator_of("copier-1"))),
        ("leader of copy-in 0", lambda: _bounce_node(cluster, _leaders(bootstrap, IN)[0])),
    ]
    # each bounce once the committed output has grown by another share of the first 45 % of
    # the input, so they land mid-copy however fast the copy runs (the reader lags behind it)
    share = RECORDS * 45 // 100 // len(bounces)
    thresholds = [(k + 1) * share for k in range(len(bounces))]
    try:
        deadline = time.monotonic() + 300
        while not copiers.reap():
            assert time.monotonic() < deadline, f"copy did not finish:\n{copiers.logs()[-4000:]}"
            if bounces and len(seen) >= thresholds[0]:
                what, bounce = bounces.pop(0)
                print(f"bounce at {thresholds.pop(0)} copied: {what}", flush=True)
                bounce()
            time.sleep(0.2)
        # the first three are one of each kind (coordinator, copier, partition leader): those
        # must have happened mid-copy; a fast copy may outrun the last ones
        assert len(bounces) <= 3, f"the copy finished before the bounces: {len(bounces)} left"
        print(f"bounces not reached: {len(bounces)}")
        got = read_committed(bootstrap, OUT, RECORDS)  # to the end of the settled log
    finally:
        stop.set()
        copiers.kill_all()
        watcher.join(30)

    print("copier restarts:", copiers.restarts)
    for p in range(PARTITIONS):
        assert len(got[p]) == len(set(got[p])), f"duplicates in partition {p}"
        assert got[p] == expected[p], f"partition {p}: {len(got[p])} of {len(expected[p])}"
    assert len(seen) == len(set(seen)), "a read_committed reader saw a record twice"
    assert set(seen) <= {(p, v) for p, values in expected.items() for v in values}
