"""A Produce or a consumer's Fetch for a partition whose leader this broker's fetcher just lost
waits for the new leader instead of answering NOT_LEADER_OR_FOLLOWER with the dead broker as the
current leader (KIP-951), which would send the client back to it (log/server/broker_failure_view.py).

In process: the broker under test (node 1, LocalQuorum's real controller decisions) follows a
partition led by broker 2, registered at a port where nothing listens: node 1's replica fetcher
fails to reach it, as when broker 2's process died. The metadata change the controller then
commits (broker 2 fenced, node 1 elected) answers what waited: the write is appended here."""

from __future__ import annotations

import socket

import trio

from log.records.builder import Record, build_batch
from quorum import controller
from quorum.controller import NODE_DEFAULTS
from tests.broker.conftest import RunningBroker, WireClient, fetch_body, produce_body


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _follow_a_dead_leader(broker: RunningBroker) -> None:
    quorum = broker.quorum
    quorum.register(2, "127.0.0.1", _dead_port())
    response = await quorum.create_topics(controller.CreateTopicsRequest(
        (controller.CreatableTopic("t", assignments=((2, 1),)),)
    ))  # fmt: skip
    assert response.results[0].error_code == 0, response
    rm = broker.server.ctx.replica_manager
    rm.sync()
    with trio.fail_after(10):  # the fetcher tries broker 2 and fails
        while 2 not in rm.fetcher_manager.unreachable_brokers():
            await trio.sleep(0.01)


def _fence_broker_2(broker: RunningBroker) -> None:
    quorum = broker.quorum
    quorum.commit(controller._fence_records(quorum.image, [2], NODE_DEFAULTS))
    assert quorum.image.topic("t").partitions[0].leader == 1


async def test_a_produce_to_the_next_leader_waits_for_its_election(broker):
    await _follow_a_dead_leader(broker)
    client = await WireClient.connect(broker.port)
    try:
        await client.send(0, 9, produce_body("t", 0, build_batch([Record(b"v")]), acks=1))
        with trio.move_on_after(0.3):  # held: no NOT_LEADER_OR_FOLLOWER naming broker 2
            answer = await client.receive()
            raise AssertionError(f"answered before the new leader: {answer}")
        _fence_broker_2(broker)
        with trio.fail_after(10):
            answer = await client.receive()
        partition = answer.responses[0].partition_responses[0]
        assert (partition.error_code, partition.base_offset) == (0, 0), answer
    finally:
        await client.aclose()


async def test_a_consumer_fetch_waits_too(broker):
    await _follow_a_dead_leader(broker)
    client = await WireClient.connect(broker.port)
    try:
        await client.send(1, 12, fetch_body("t", 0, 0, max_wait_ms=0))
        with trio.move_on_after(0.3):
            answer = await client.receive()
            raise AssertionError(f"answered before the new leader: {answer}")
        _fence_broker_2(broker)
        with trio.fail_after(10):
            answer = await client.receive()
        assert answer.responses[0].partitions[0].error_code == 0, answer
    finally:
        await client.aclose()
