"""Replication between real `quorumlog node` processes with real clients (confluent-kafka):
RF 3, min.insync.replicas 2."""

from __future__ import annotations

import pytest
import trio
from cluster_harness import wait_until
from replication_harness import (
    TOPIC,
    consume_all,
    create_topic,
    partition_batches,
    producer,
    start_cluster,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
N = 300


def _produce(bootstrap: str, count: int, prefix: str = "v") -> tuple[set[bytes], list]:
    acked: set[bytes] = set()
    errors: list = []

    def on_delivery(err, message):
        if err is None:
            acked.add(message.value())
        else:
            errors.append(err)

    p = producer(bootstrap)
    for i in range(count):
        p.produce(TOPIC, b"%s-%d" % (prefix.encode(), i), on_delivery=on_delivery)
        p.poll(0)
    p.flush(60)
    return acked, errors


async def _isr(cluster, partition: int = 0) -> tuple[int, ...]:
    image = await cluster.image_from(0)
    topic = image.topic(TOPIC)
    return topic.partitions[partition].isr if topic is not None else ()


async def test_acks_all_replicates_to_identical_logs(tmp_path):
    cluster = await trio.to_thread.run_sync(start_cluster, tmp_path)
    bootstrap = cluster.layout.bootstrap_servers
    await trio.to_thread.run_sync(create_topic, bootstrap)
    acked, errors = await trio.to_thread.run_sync(_produce, bootstrap, N)
    assert not errors and len(acked) == N
    values = await trio.to_thread.run_sync(consume_all, bootstrap, 1, N)
    assert sorted(values) == sorted(acked)
    # Followers fetched before the acks: every replica holds the data once it is stopped.
    await trio.sleep(1)  # let followers adopt the final HW
    for node_id in list(cluster.processes):
        cluster.terminate(node_id)
    logs = [partition_batches(cluster.layout.node_dir(i)) for i in cluster.layout.node_ids]
    high_watermarks = {hw for hw, _ in logs}
    assert high_watermarks == {N}, high_watermarks
    assert logs[0][1] == logs[1][1] == logs[2][1]
