"""KIP-890 part 1 on 3 real nodes (one cluster for the file): partition leaders verify
transactional batches with the transaction coordinator, which is usually another node (an
inter-broker AddPartitionsToTxn verify_only). confluent-kafka's transactional producer works
unchanged with verification on (committed records read back read_committed, aborted ones not),
and a raw transactional Produce to a partition never added to the transaction is refused with
INVALID_TXN_STATE by its leader (tests/broker/test_txn_verification.py checks nothing is
appended)."""

from __future__ import annotations

import dataclasses
import time

import pytest
import trio
from cluster_harness import Cluster

from log.common.errors import ErrorCode
from log.protocol.producer_id import INIT_PRODUCER_ID_REQUEST
from log.protocol.transactions import ADD_PARTITIONS_TO_TXN_REQUEST
from log.records.builder import Record, build_batch
from tests.broker.conftest import WireClient, produce_body
from tests.broker.test_txn_coordinator import add_partitions, find_coordinator

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TOPIC = "verified"
PARTITIONS = 3
AP = ADD_PARTITIONS_TO_TXN_REQUEST.cls
IP = INIT_PRODUCER_ID_REQUEST.cls


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = Cluster(tmp_path_factory.mktemp("txn-verification"), 3, shared=True)
    try:
        cluster.start_all()
        admin = AdminClient({"bootstrap.servers": cluster.layout.bootstrap_servers})
        futures = admin.create_topics([NewTopic(TOPIC, PARTITIONS, replication_factor=3)])
        futures[TOPIC].result(timeout=60)
        yield cluster
    finally:
        cluster.stop_all()


def leaders(cluster: Cluster) -> dict[int, int]:
    """Partition -> leader node id, once every partition has one."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.layout.bootstrap_servers})
    for _ in range(300):
        topic = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
        found = {p: m.leader for p, m in topic.partitions.items()}
        if len(found) == PARTITIONS and all(leader > 0 for leader in found.values()):
            return found
        time.sleep(0.1)
    raise AssertionError(f"no leaders for {TOPIC}")


def transactional_round_trip(bootstrap: str) -> tuple[list[str], list[str]]:
    """One committed and one aborted transaction over every partition; what read_committed
    reads back (sorted), and what was committed (sorted)."""
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": "confluent-verified", "linger.ms": 5}
    )
    producer.init_transactions(60)
    committed = [f"c{i}" for i in range(30)]
    producer.begin_transaction()
    for i, value in enumerate(committed):
        producer.produce(TOPIC, value.encode(), partition=i % PARTITIONS)
    producer.commit_transaction(60)
    producer.begin_transaction()
    for i in range(PARTITIONS):
        producer.produce(TOPIC, f"aborted{i}".encode(), partition=i)
    producer.flush(60)
    producer.abort_transaction(60)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    values: list[str] = []
    at_end: set[int] = set()
    try:
        for _ in range(600):
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                if len(at_end) == PARTITIONS:
                    return sorted(values), sorted(committed)
                continue
            values.append(msg.value().decode())
        raise AssertionError(f"not every partition reached its end: {values}")
    finally:
        consumer.close()


async def test_confluent_transactions_work_with_verification_on(cluster):
    read, committed = await trio.to_thread.run_sync(
        transactional_round_trip, cluster.layout.bootstrap_servers
    )
    assert read == committed


async def test_raw_produce_to_a_partition_not_added_is_refused(cluster):
    layout = cluster.layout
    client = await WireClient.connect(layout.kafka_port(1))
    found = await find_coordinator(client, "raw-verified")
    assert found.error_code == 0
    await client.aclose()
    coordinator = await WireClient.connect(found.port)
    with trio.fail_after(60):
        while True:
            init = await coordinator.call(22, 5, IP(transactional_id="raw-verified",
                                                    transaction_timeout_ms=60_000))  # fmt: skip
            if init.error_code not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                       ErrorCode.CONCURRENT_TRANSACTIONS):  # fmt: skip
                break
            await trio.sleep(0.05)
    assert init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch
    by_partition = await trio.to_thread.run_sync(leaders, cluster)
    # Prefer partitions led by another node than the coordinator: verification goes over the
    # inter-broker listener then.
    order = sorted(by_partition, key=lambda p: by_partition[p] == found.node_id)
    refused_partition, added_partition = order[0], order[1]
    # 3 partitions of replication factor 3 have their leaders spread over the 3 nodes.
    assert by_partition[refused_partition] != found.node_id, (by_partition, found.node_id)
    added = await coordinator.call(24, 3, add_partitions("raw-verified", pid, epoch, TOPIC,
                                                         [added_partition]))  # fmt: skip
    assert [p.partition_error_code for t in added.results_by_topic_v3_and_below
            for p in t.results_by_partition] == [0]  # fmt: skip
    await coordinator.aclose()

    async def produce(partition: int) -> object:
        leader = await WireClient.connect(layout.kafka_port(by_partition[partition]))
        records = build_batch([Record(b"raw")], producer_id=pid, producer_epoch=epoch,
                              base_sequence=0, is_transactional=True)  # fmt: skip
        body = dataclasses.replace(
            produce_body(TOPIC, partition, records, acks=-1), transactional_id="raw-verified"
        )
        answer = await leader.call(0, 9, body)
        await leader.aclose()
        return answer.responses[0].partition_responses[0]

    with trio.fail_after(60):
        refused = await produce(refused_partition)
        assert refused.error_code == ErrorCode.INVALID_TXN_STATE, refused
        accepted = await produce(added_partition)
        assert accepted.error_code == ErrorCode.NONE, accepted
