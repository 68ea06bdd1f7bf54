"""A replica reassignment under load on 3 real nodes: a partition on one broker moves to the
other two (kafka-python's alter_partition_reassignments, as kafka-reassign-partitions.sh) while a
confluent-kafka producer writes with acks=all; every acknowledged record is read back once, the
leader moved to the new replicas and the old replica's log is gone."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
import trio
from cluster_harness import REPO, Cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

TOPIC = "move"


def _produce_until(bootstrap: str, stop: threading.Event, acked: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
         "linger.ms": 2, "topic.metadata.refresh.interval.ms": 500}
    )  # fmt: skip

    def on_delivery(err, msg):
        if err is None:
            acked.append(msg.value())

    i = 0
    while not stop.is_set():
        producer.produce(TOPIC, b"%08d" % i, partition=0, on_delivery=on_delivery)
        i += 1
        producer.poll(0.001 if i % 50 else 0.01)
    assert producer.flush(60) == 0


def _describe(bootstrap: str) -> tuple[int, list[int], list[int]]:
    """(leader, replicas, isr) of the partition, from confluent-kafka's metadata."""
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=30)
    partition = metadata.topics[TOPIC].partitions.get(0)  # None until that broker has the topic
    if partition is None:
        return -1, [], []
    return partition.leader, sorted(partition.replicas), sorted(partition.isrs)


def _read_all(bootstrap: str, count: int) -> list[bytes]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(values) < count and time.monotonic() < deadline:
        values.extend(m.value() for m in consumer.consume(1000, 0.2) if m.error() is None)
    consumer.close()
    return values


async def test_reassignment_under_load_loses_nothing(tmp_path):
    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient, NewTopic

    cluster = Cluster(tmp_path, 3)
    cluster.start_all()
    bootstrap = cluster.layout.bootstrap_servers

    def run() -> tuple[list[bytes], list[bytes], int, list[int]]:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic(TOPIC, 1, 1)])
        deadline = time.monotonic() + 30
        while (described := _describe(bootstrap))[0] < 0:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        [old] = described[1]
        target = [b for b in (1, 2, 3) if b != old]
        stop, acked = threading.Event(), []
        producer = threading.Thread(target=_produce_until, args=(bootstrap, stop, acked))
        producer.start()
        try:
            while len(acked) < 2000:
                time.sleep(0.05)
            # started with our command line, followed with kafka-python's admin client
            subprocess.run(
                [sys.executable, "-m", "tools", "topics", "reassign", "-b", bootstrap, "--topic",
                 TOPIC, "--partition", "0", "--replicas", ",".join(map(str, target))],
                cwd=REPO, check=True, capture_output=True, timeout=60,
            )  # fmt: skip
            deadline = time.monotonic() + 60
            while admin.list_partition_reassignments():
                assert time.monotonic() < deadline, "the reassignment did not finish"
                time.sleep(0.2)
            moved_at = len(acked)
            while len(acked) < moved_at + 2000:  # the new leader takes writes
                time.sleep(0.05)
        finally:
            stop.set()
            producer.join(90)
        # a cancel with nothing to cancel: NO_REASSIGNMENT_IN_PROGRESS, a one-line error
        cancel = admin.alter_partition_reassignments({KTP(TOPIC, 0): None})
        assert cancel[KTP(TOPIC, 0)].__name__ == "NoReassignmentInProgressError"
        admin.close()
        listed = subprocess.run(
            [sys.executable, "-m", "tools", "topics", "reassignments", "-b", bootstrap, "--json"],
            cwd=REPO, check=True, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert json.loads(listed.stdout) == []
        leader, replicas, isr = _describe(bootstrap)
        assert replicas == target and isr == target
        return acked, _read_all(bootstrap, len(acked)), old, [leader]

    acked, read, old, [leader] = await trio.to_thread.run_sync(run)
    assert leader != old
    assert len(read) == len(set(read)), "a record was written twice"
    assert set(acked) <= set(read), f"{len(set(acked) - set(read))} acknowledged records lost"
    assert read == sorted(read)  # one idempotent producer, one partition: in order
    assert not list(cluster.layout.node_dir(old).glob(f"**/{TOPIC}-0"))  # the old log is gone
