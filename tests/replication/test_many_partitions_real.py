"""A thousand replicated partitions on 3 real nodes: every one is really replicated.

Replication, checkpoint and session settings are the defaults here (replica.fetch.max.bytes
1 MiB, replica.fetch.response.max.bytes 10 MiB, replica.lag.time.max.ms 30 s,
broker.session.timeout.ms 9 s); only the heartbeat interval is the harness's short one. The
killed leader is fenced as its connection closes, not by its session; the harness's 1.5 s
session fenced live brokers while the nodes applied a thousand partitions on a loaded 2-core box
(two busy loops beside the test: 4-40 fencings a run, and once the ISRs not full within the
guard). Before followers named every partition in every fetch, 10 partitions per fetch shut the
rest out: their followers' logs stayed empty and their ISRs shrank to the leader while acks=all
waited for it. How fast all this happens is measured by `bench.partition_scale`, not asserted
here; the timeouts are hang guards.
"""

from __future__ import annotations

import time

import cluster_harness
import pytest
import trio
from cluster_harness import Cluster, wait_until

from tools.admin_client import AdminClient

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
TOPIC = "many"
PARTITIONS = 1000


def _create_and_produce(bootstrap: str) -> tuple[int, list]:
    """Create the topic, then one acks=all record per partition; (acked count, errors)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient as KafkaAdmin
    from confluent_kafka.admin import NewTopic

    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    topic = NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([topic], request_timeout=120)[TOPIC].result(120)
    acked: list[int] = []
    errors: list = []

    def on_delivery(err, message) -> None:
        (errors.append(err) if err is not None else acked.append(message.partition()))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for partition in range(PARTITIONS):
        producer.produce(TOPIC, b"r%d" % partition, partition=partition, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(120) == 0
    return len(set(acked)), errors


def _cluster_on_defaults(tmp_path) -> Cluster:
    """The harness's cluster with Kafka's checkpoint interval back (the harness checkpoints
    every 10 metadata records, which a thousand partition records turn into minutes) and
    Kafka's session timeout."""
    saved = dict(cluster_harness.TEST_PROPS)
    cluster_harness.TEST_PROPS.pop("metadata.log.max.record.count.between.snapshots", None)
    cluster_harness.TEST_PROPS.pop("broker.session.timeout.ms", None)
    try:
        return Cluster(tmp_path, 3)
    finally:
        cluster_harness.TEST_PROPS.clear()
        cluster_harness.TEST_PROPS.update(saved)


def _delete_records(bootstrap: str, partitions: range) -> dict[int, int]:
    """confluent-kafka's delete_records up to offset 1: partition -> low watermark."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient as KafkaAdmin

    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(TOPIC, p, 1) for p in partitions],
                                   request_timeout=60, operation_timeout=30)  # fmt: skip
    return {tp.partition: future.result().low_watermark for tp, future in futures.items()}


async def _partitions(bootstrap: str):
    async with AdminClient(bootstrap) as admin:
        (topic,) = await admin.describe_topics([TOPIC])
        cluster = await admin.describe_cluster()
    return topic.partitions, cluster.brokers


async def _all_isrs_full(bootstrap: str) -> bool:
    try:
        partitions, _ = await _partitions(bootstrap)
    except Exception:  # a broker restarting: ask again
        return False
    return len(partitions) == PARTITIONS and all(
        p.leader >= 0 and set(p.isr) == set(p.replicas) for p in partitions
    )


async def _replica_sizes(bootstrap: str) -> dict[tuple[int, int], int]:
    """(broker, partition) -> bytes of that replica's log, from every broker's DescribeLogDirs."""

    async def every_broker():
        # DescribeCluster leaves out a fenced broker: one that missed a heartbeat of the
        # harness's short sessions on a loaded box is back a moment later.
        _, brokers = await _partitions(bootstrap)
        return brokers if len(brokers) == 3 else None

    brokers = await wait_until(every_broker, 60, interval_s=0.2)
    sizes = {}
    async with AdminClient(bootstrap) as admin:
        for broker in brokers:
            for log_dir in await admin.describe_log_dirs(broker, {TOPIC: range(PARTITIONS)}):
                for replica in log_dir.replicas:
                    sizes[(broker.node_id, replica.partition)] = replica.partition_size
    return sizes


async def test_a_thousand_partitions_all_replicate_and_refill_their_isrs_after_a_kill(tmp_path):
    started = time.monotonic()

    def phase(name: str) -> None:
        print(f"{name}: {time.monotonic() - started:.1f}s")

    cluster = _cluster_on_defaults(tmp_path)
    await trio.to_thread.run_sync(cluster.start_all)
    phase("started")
    bootstrap = cluster.layout.bootstrap_servers

    acked, errors = await trio.to_thread.run_sync(_create_and_produce, bootstrap)
    assert not errors and acked == PARTITIONS
    phase("created and produced")

    # Every replica of every partition holds the record: the followers' logs are not empty.
    sizes = await _replica_sizes(bootstrap)
    assert len(sizes) == 3 * PARTITIONS
    empty = sorted(key for key, size in sizes.items() if size == 0)
    assert not empty, f"{len(empty)} empty replica logs, e.g. {empty[:5]}"
    assert await wait_until(lambda: _all_isrs_full(bootstrap), 60)
    phase("replicas checked")
    # DeleteRecords answers once every replica's log start offset moved (the low watermark).
    low_watermarks = await trio.to_thread.run_sync(_delete_records, bootstrap, range(20))
    assert low_watermarks == dict.fromkeys(range(20), 1)

    # A leader dies and comes back: it catches up on every partition and rejoins every ISR.
    partitions, _ = await _partitions(bootstrap)
    victim = partitions[0].leader
    cluster.kill9(victim)
    await trio.to_thread.run_sync(cluster.start, victim)
    await trio.to_thread.run_sync(cluster.wait_ready, victim)
    phase("restarted")
    assert await wait_until(lambda: _all_isrs_full(bootstrap), 120, interval_s=0.5)
    phase("isrs full again")
    sizes = await _replica_sizes(bootstrap)
    assert len(sizes) == 3 * PARTITIONS
    nodes = cluster.layout.node_ids
    mismatched = [p for p in range(PARTITIONS) if len({sizes[(b, p)] for b in nodes}) != 1]
    assert not mismatched, f"replicas differ in size for partitions {mismatched[:5]}"
