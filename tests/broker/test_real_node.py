"""Real clients against real `quorumlog node` processes (the node runtime constructs and runs
KafkaServer over the Raft-backed metadata and controller). Uses tests/node's harness."""

from __future__ import annotations

import os
import sys

import pytest
import trio

pytest.importorskip("cryptography", reason="quorum.raft needs the cryptography package")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "node"))

from cluster_harness import Cluster, kill_started  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.interop, pytest.mark.timeout(180)]
N = 500


@pytest.fixture(autouse=True)
def _kill_nodes():
    yield
    kill_started()


def _clients(bootstrap: str) -> tuple[list, list[bytes]]:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics(
        [NewTopic("real", 3, 1)]
    )  # RF 1: no follower fetching yet["real"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    errors: list = []
    for i in range(N):
        producer.produce("real", b"v-%d" % i, key=b"k-%d" % i,
                         on_delivery=lambda err, _m: err and errors.append(err))  # fmt: skip
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "x",
                         "enable.auto.commit": False, "check.crcs": True})  # fmt: skip
    consumer.assign([TopicPartition("real", p, 0) for p in range(3)])
    values: list[bytes] = []
    for _ in range(100):
        values += [m.value() for m in consumer.consume(1000, 0.2) if m.error() is None]
        if len(values) >= N:
            break
    consumer.close()
    return errors, values


async def test_confluent_kafka_against_three_real_nodes(tmp_path):
    cluster = Cluster(tmp_path, 3)
    await trio.to_thread.run_sync(cluster.start_all)
    errors, values = await trio.to_thread.run_sync(_clients, cluster.layout.bootstrap_servers)
    assert not errors
    assert sorted(values) == sorted(b"v-%d" % i for i in range(N))
