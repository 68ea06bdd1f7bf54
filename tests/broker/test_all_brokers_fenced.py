"""Which brokers Metadata lists around fences (log/server/broker_failure_view.py).

A window in which every broker is fenced must not strand librdkafka: Metadata never lists no
broker (librdkafka 2.13+ drops every broker it knows on such an answer and never asks again:
confluentinc/librdkafka#5301; a nemesis producer stalled that way for good)."""

from __future__ import annotations

import time

import trio

from bench.local_quorum import NODE_ID
from log.protocol.metadata import METADATA_REQUEST
from quorum import controller
from tests.broker.conftest import WireClient


async def test_a_producer_sends_on_after_every_broker_was_fenced(broker):
    from confluent_kafka import Producer

    await broker.create_topic("t", 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                         "enable.idempotence": True, "topic.metadata.refresh.interval.ms": 500,
                         "retry.backoff.ms": 50})  # fmt: skip
    delivered: list = []

    def deliver(err, msg) -> None:
        delivered.append(err)

    def send_and_flush(timeout_s: float) -> int:
        producer.produce("t", b"v", on_delivery=deliver)
        return producer.flush(timeout_s)

    assert await trio.to_thread.run_sync(send_and_flush, 30) == 0
    assert delivered == [None]

    # The only broker's session expires: fenced, its partition left without a leader.
    quorum = broker.quorum
    records, fenced = controller.fence_expired_brokers(quorum.image, {NODE_ID: 0}, 10**12, 1)
    assert fenced == [NODE_ID]
    quorum.commit(records)
    broker.server.ctx.replica_manager.sync()
    client = await WireClient.connect(broker.port)
    M = METADATA_REQUEST.cls
    for _ in range(2):  # not only the first answer on a connection after the fence
        answer = await client.call(3, 12, M(topics=[M.MetadataRequestTopic(name="t")]))
        assert [b.node_id for b in answer.brokers] == [NODE_ID]  # fenced, and still listed
        assert answer.topics[0].partitions[0].leader_id == -1
    await client.aclose()

    # librdkafka asks for metadata meanwhile (its 500 ms refresh, the leaderless partition)
    def produce_during_the_window() -> None:
        producer.produce("t", b"w", on_delivery=deliver)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            producer.poll(0.1)

    await trio.to_thread.run_sync(produce_during_the_window)
    # The broker heartbeats again: unfenced, the leader of its partition again.
    records, response = controller.heartbeat(
        quorum.image,
        controller.BrokerHeartbeatRequest(NODE_ID, quorum.broker_epoch, quorum.offset),
    )
    quorum.commit(records)
    assert quorum.image.topic("t").partitions[0].leader == NODE_ID
    assert await trio.to_thread.run_sync(producer.flush, 30) == 0
    assert delivered == [None, None]


async def test_a_broker_fenced_before_any_metadata_request_is_listed_once_per_connection(broker):
    """The node follows every image, not only those it answers from: a broker fenced while
    nobody asked for metadata is still listed in each connection's first answer after it."""
    import trio.testing

    quorum = broker.quorum
    quorum.register(2, "127.0.0.1", 1)  # another broker, live, then gone
    await trio.testing.wait_all_tasks_blocked()
    records, fenced = controller.fence_expired_brokers(quorum.image, {2: 0}, 10**12, 1)
    assert fenced == [2]
    quorum.commit(records)
    await trio.testing.wait_all_tasks_blocked()
    M = METADATA_REQUEST.cls
    for _ in range(2):  # two connections
        client = await WireClient.connect(broker.port)
        first = await client.call(3, 12, M(topics=[], allow_auto_topic_creation=False))
        second = await client.call(3, 12, M(topics=[], allow_auto_topic_creation=False))
        await client.aclose()
        assert [b.node_id for b in first.brokers] == [NODE_ID, 2]
        assert [b.node_id for b in second.brokers] == [NODE_ID]
