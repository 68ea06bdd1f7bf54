"""Compaction end to end: a real `quorumlog node` process, confluent-kafka writing many updates
to few keys of a compacted topic with small segments; the background cleaner shrinks the
segment files and a consumer from the beginning sees the latest value of every key. Also: the
node's cleaner keys parse and reach the topic defaults."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from log.common.node_config import NodeConfig
from log.storage.config import default_log_config

TOPIC = "compacted"
KEYS = 10
UPDATES = 3000


def test_node_cleaner_keys_have_kafkas_defaults_and_reach_topic_configs(tmp_path):
    base = {"node.id": 1, "cluster.id": "c", "controller.quorum.password": "p",
            "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "controller.quorum.voters": "1@127.0.0.1:9093",
            "controller.quorum.raft.voters": "1@127.0.0.1:9094"}  # fmt: skip
    defaults = NodeConfig.from_properties(tmp_path, base)
    assert defaults.props["log.cleaner.enable"] is True
    assert defaults.props["log.cleaner.backoff.ms"] == 15_000
    config = default_log_config(defaults)
    assert (config.min_cleanable_dirty_ratio, config.delete_retention_ms) == (0.5, 86_400_000)
    assert config.min_compaction_lag_ms == 0 and config.max_compaction_lag_ms == (1 << 63) - 1
    custom = NodeConfig.from_properties(
        tmp_path,
        base | {"log.cleaner.min.cleanable.ratio": "0.25", "log.cleaner.delete.retention.ms": 5,
                "log.cleaner.min.compaction.lag.ms": 7, "log.cleaner.enable": "false"},
    )  # fmt: skip
    config = default_log_config(custom)
    assert (config.min_cleanable_dirty_ratio, config.delete_retention_ms) == (0.25, 5)
    assert config.min_compaction_lag_ms == 7 and custom.props["log.cleaner.enable"] is False


def _segment_bytes(partition_dir: Path) -> int:
    """Bytes of the segment files; one the cleaner deletes between listing and sizing is 0."""
    total = 0
    for path in partition_dir.glob("*.log"):
        try:
            total += path.stat().st_size
        except FileNotFoundError:
            pass
    return total


def _produce(bootstrap: str, *, create: bool, tag: bytes = b"") -> dict[bytes, bytes]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"cleanup.policy": "compact", "segment.bytes": "4096",
               "min.cleanable.dirty.ratio": "0.1"}  # fmt: skip
    if create:
        admin.create_topics([NewTopic(TOPIC, 1, 1, config=configs)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                         "batch.num.messages": 20, "enable.idempotence": True})  # fmt: skip
    latest: dict[bytes, bytes] = {}
    errors: list = []
    for i in range(UPDATES):
        key, value = b"key-%d" % (i % KEYS), tag + b"value-%06d-" % i + b"x" * 40
        producer.produce(TOPIC, value, key=key,
                         on_delivery=lambda err, _m: err and errors.append(err))  # fmt: skip
        latest[key] = value
        if i % 100 == 99:
            producer.flush(30)
    assert producer.flush(60) == 0 and not errors
    return latest


def _consume_all(bootstrap: str) -> list[tuple[bytes, bytes]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compaction-check",
                         "enable.auto.commit": False})  # fmt: skip
    _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    seen: list[tuple[bytes, bytes]] = []
    deadline = time.monotonic() + 30
    position = 0
    while position < high and time.monotonic() < deadline:
        for message in consumer.consume(500, 0.5):
            if message.error() is None:
                seen.append((message.key(), message.value()))
                position = message.offset() + 1
    consumer.close()
    return seen


def _cluster(tmp_path: Path):
    pytest.importorskip("cryptography", reason="quorum.raft needs the cryptography package")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "node"))
    from cluster_harness import Cluster

    cluster = Cluster(tmp_path, 1)
    node_id = cluster.layout.node_ids[0]
    toml = cluster.layout.node_dir(node_id) / "node.toml"
    toml.write_text(toml.read_text() + '"log.cleaner.backoff.ms" = 50\n')
    return cluster, node_id


def _kill_started() -> None:
    from cluster_harness import kill_started

    kill_started()


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_real_node_compacts_a_topic_in_the_background(tmp_path):
    cluster, node_id = _cluster(tmp_path)
    try:
        cluster.start_all()
        bootstrap = cluster.layout.bootstrap_servers
        latest = _produce(bootstrap, create=True)
        partition_dir = next(cluster.layout.node_dir(node_id).rglob(f"{TOPIC}-0"))
        written = UPDATES * len(next(iter(latest.values())))
        deadline = time.monotonic() + 30
        while _segment_bytes(partition_dir) > written // 4 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _segment_bytes(partition_dir) <= written // 4, "the cleaner did not shrink the log"
        assert (partition_dir.parent / "cleaner-offset-checkpoint").exists()
        seen = _consume_all(bootstrap)
        assert dict(seen) == latest
        assert len(seen) < UPDATES // 4
    finally:
        _kill_started()


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_kill_9_while_cleaning_loses_no_latest_value(tmp_path):
    """Kill -9 right after acknowledged writes, while the cleaner is busy with them; restart
    (load finishes or discards .swap/.cleaned files); repeat. Every key keeps its latest value."""
    cluster, node_id = _cluster(tmp_path)
    try:
        cluster.start_all()
        bootstrap = cluster.layout.bootstrap_servers
        latest: dict[bytes, bytes] = {}
        for round_number in range(3):
            latest |= _produce(bootstrap, create=round_number == 0, tag=b"r%d" % round_number)
            time.sleep(0.05 * round_number)  # land in different phases of a clean
            cluster.kill9(node_id)
            cluster.start(node_id)
            cluster.wait_ready(node_id)
        seen = _consume_all(bootstrap)
        assert dict(seen) == latest
        partition_dir = next(cluster.layout.node_dir(node_id).rglob(f"{TOPIC}-0"))
        names = [p.name for p in partition_dir.iterdir()]
        assert not any(n.endswith(".deleted") for n in names)
    finally:
        _kill_started()
