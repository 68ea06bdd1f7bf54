"""Helpers for the real-process replication tests: a 3-node cluster with replication tuned
for tests (short lag limit, fast follower back-off), confluent-kafka clients, on-disk compare."""

from __future__ import annotations

from pathlib import Path

import cluster_harness
from cluster_harness import Cluster

from log.common.node_config import NodeConfig
from log.storage.config import LogConfig
from log.storage.manager import LogManager

REPLICATION_TEST_PROPS = {
    # Fail-over is the session timeout plus a fence check (session / 4) plus a metadata commit:
    # 1000 ms keeps it near a second while 5 heartbeats fit in one session.
    "broker.heartbeat.interval.ms": 200,
    "broker.session.timeout.ms": 1000,
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
        # librdkafka backs retries off exponentially up to 1 s by default: cap it, so that a
        # fail-over is measured on the cluster, not on the client's back-off.
        "retry.backoff.max.ms": 100,
        # While its metadata still names a dead leader, librdkafka re-asks only on this refresh
        # (or its 1 s topic scan): 250 ms lets it see the new leader soon after the election.
        "topic.metadata.refresh.interval.ms": 250,
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


async def image_from_any(cluster: Cluster):
    """The committed image of some live controller."""
    import trio

    last_error: Exception | None = None
    for node_id in cluster.layout.controller_ids:
        if node_id not in cluster.processes:
            continue
        try:
            with trio.fail_after(5):
                return await cluster.image_from(node_id)
        except Exception as exc:  # that controller is down or cut off: try the next
            last_error = exc
    raise AssertionError(f"no controller answered: {last_error}")


async def partition_state(cluster: Cluster, partition: int = 0):
    image = await image_from_any(cluster)
    topic = image.topic(TOPIC)
    assert topic is not None
    return topic.partitions[partition]


class BackgroundProducer:
    """An idempotent acks=all confluent-kafka producer in a thread: `count` records, recording
    which were acknowledged (and when)."""

    def __init__(self, bootstrap: str, count: int, rate_per_s: float = 2000) -> None:
        import threading

        self.bootstrap = bootstrap
        self.count = count
        self.rate_per_s = rate_per_s
        self.acked: set[bytes] = set()
        self.ack_times: list[float] = []
        self.errors: list = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _on_delivery(self, err, message) -> None:
        import time

        if err is None:
            self.acked.add(message.value())
            self.ack_times.append(time.monotonic())
        else:
            self.errors.append(err)

    def _run(self) -> None:
        import time

        p = producer(self.bootstrap, **{"message.timeout.ms": 60000})
        started = time.monotonic()
        for i in range(self.count):
            while True:
                try:
                    p.produce(TOPIC, b"v-%d" % i, on_delivery=self._on_delivery)
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
            ahead_s = (i + 1) / self.rate_per_s - (time.monotonic() - started)
            if ahead_s > 0:
                time.sleep(ahead_s)
        p.flush(120)
