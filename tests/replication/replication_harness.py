"""Helpers for the real-process replication tests: a 3-node cluster with replication tuned
for tests (short lag limit, fast follower back-off), confluent-kafka clients, on-disk compare."""

from __future__ import annotations

from pathlib import Path

import cluster_harness
from cluster_harness import Cluster

from log.server.config import NodeConfig
from log.storage.config import LogConfig
from log.storage.manager import LogManager

REPLICATION_TEST_PROPS = {
    "replica.lag.time.max.ms": 2000,
    "replica.fetch.backoff.ms": 100,
    "replica.fetch.wait.max.ms": 200,
}
TOPIC = "replicated"


def start_cluster(tmp_path: Path, node_count: int = 3) -> Cluster:
    saved = dict(cluster_harness.TEST_PROPS)
    cluster_harness.TEST_PROPS.update(REPLICATION_TEST_PROPS)
    try:
        cluster = Cluster(tmp_path, node_count)
    finally:
        cluster_harness.TEST_PROPS.clear()
        cluster_harness.TEST_PROPS.update(saved)
    cluster.start_all()
    return cluster


def create_topic(bootstrap: str, partitions: int = 1, min_insync_replicas: int = 2) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(TOPIC, partitions, 3, config={"min.insync.replicas": str(min_insync_replicas)})
    admin.create_topics([topic])[TOPIC].result(30)


def producer(bootstrap: str, **extra):
    from confluent_kafka import Producer

    config = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "retry.backoff.ms": 50,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    config.update(extra)
    return Producer(config)


def consume_all(bootstrap: str, partitions: int, expected_count: int, timeout_s: float = 30):
    """Every record value from offset 0 of each partition (stops at `expected_count`)."""
    import time

    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check",
                         "enable.auto.commit": False, "check.crcs": True})  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and len(values) < expected_count:
        values += [m.value() for m in consumer.consume(1000, 0.2) if m.error() is None]
    # A little more, to see duplicates beyond the expected count.
    values += [m.value() for m in consumer.consume(1000, 0.5) if m.error() is None]
    consumer.close()
    return values


def partition_batches(node_dir: Path, partition: int = 0) -> tuple[int, list[bytes]]:
    """(high watermark, raw batch bytes below it) of a stopped node's partition log."""
    manager = LogManager(str(NodeConfig.load(node_dir).log_dir), LogConfig(), now_ms=0)
    try:
        log = manager.get_log(TOPIC, partition)
        assert log is not None, f"no log for {TOPIC}-{partition} in {node_dir}"
        high_watermark = log.high_watermark
        batches = []
        for segment, position, header in log.iter_batch_headers(0):
            if header.base_offset >= high_watermark:
                break
            batches.append(bytes(segment.read_batch(position, header)))
        return high_watermark, batches
    finally:
        manager.shutdown(0)
