"""A node whose log disk fills up stops, Kafka's way, and nothing acknowledged is lost: real
processes, a real size-limited tmpfs under one node's log directory (root only).

The full disk fails that node's next write (a follower append, a checkpoint): its log
directory goes offline (LogDirFailureChannel), its partitions answer KAFKA_STORAGE_ERROR, and
with no other directory the node exits 1 with a CRITICAL line, writing no clean-shutdown
marker. Its leaderships move to the other replicas; acks=all producers carry on there. Once
the disk has room again, the node restarts, recovers and rejoins every ISR.
"""

from __future__ import annotations

import os
import time

import pytest
import trio
from cluster_harness import Cluster, wait_until

from tests.disk_faults import fill_up, small_tmpfs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "full-disk"
PARTITIONS = 3
VICTIM = 3


def _produce(bootstrap: str, first: int, count: int, stop=lambda: False) -> list[bytes]:
    """acks=all, idempotent: the values the cluster acknowledged (until `stop()` is true)."""
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 60_000,
        }  # fmt: skip
    )
    acked: list[bytes] = []

    def delivered(error, message) -> None:
        if error is None:
            acked.append(message.value())

    for i in range(first, first + count):
        if stop():
            break
        producer.produce(TOPIC, value=b"v%d" % i, key=b"k%d" % i, on_delivery=delivered)
        producer.poll(0)
        if i % 50 == 0:
            producer.flush(60)
    assert producer.flush(60) == 0
    return acked


def _consume_all(bootstrap: str, expected: set[bytes]) -> set[bytes]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 60
    while not expected <= seen and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.add(message.value())
    consumer.close()
    return seen


async def test_a_full_log_disk_stops_its_node_and_loses_no_acknowledged_record(tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = Cluster(tmp_path, 3)
    log_dir = cluster.config(VICTIM).log_dir
    with small_tmpfs(log_dir, "2m"):
        try:
            cluster.start_all()
            bootstrap = cluster.layout.bootstrap_servers
            admin = AdminClient({"bootstrap.servers": bootstrap})
            topic = NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=3,
                             config={"min.insync.replicas": "2"})  # fmt: skip
            admin.create_topics([topic])[TOPIC].result(timeout=30)
            acked = await trio.to_thread.run_sync(_produce, bootstrap, 0, 300)
            assert len(acked) == 300

            filler = fill_up(log_dir)
            victim = cluster.processes[VICTIM]
            acked += await trio.to_thread.run_sync(
                lambda: _produce(bootstrap, 300, 20_000, stop=lambda: victim.poll() is not None)
            )

            async def exited() -> bool:
                return victim.poll() is not None

            await wait_until(exited, 60)
            assert victim.returncode == 1
            log = cluster.log(VICTIM)
            assert "is offline" in log and "No space left on device" in log, log[-3000:]
            assert f"level=CRITICAL node={VICTIM}" in log and f"node {VICTIM} stopped" in log
            assert not (log_dir / ".kafka_cleanshutdown").exists()

            acked += await trio.to_thread.run_sync(_produce, bootstrap, 30_000, 100)
            seen = await trio.to_thread.run_sync(_consume_all, bootstrap, set(acked))
            assert set(acked) <= seen, f"{len(set(acked) - seen)} acknowledged records lost"

            os.remove(filler)  # room again: the node recovers and rejoins every ISR
            del cluster.processes[VICTIM]
            cluster.start(VICTIM)
            cluster.wait_ready(VICTIM)

            async def rejoined() -> bool:
                image = await cluster.image_from(1)
                partitions = image.topic(TOPIC).partitions.values()
                return all(VICTIM in p.isr for p in partitions)

            assert await wait_until(rejoined, 60)
        finally:
            cluster.stop_all()
