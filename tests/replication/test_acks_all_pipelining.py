"""acks=-1 Produce requests pipelined on one connection: each is appended when it arrives,
not after the answer to the one before it (broker.py), so a producer's queued batches ride the
same follower fetch round; the answers still leave in request order, at most
max.inflight.requests.per.connection are taken at once, and a client that goes away while its
produce waits takes the wait with it. A consumer's long poll parked meanwhile is answered when
the high watermark moves. Two real KafkaServers in one process (as
test_replication_in_process.py); the follower is stopped to hold the high watermark, so every
"not yet" below is certain, not a matter of timing."""

from __future__ import annotations

import dataclasses
import logging
import select

import trio

from log.common.errors import ErrorCode
from log.protocol.api_versions import API_VERSIONS_REQUEST
from log.records.builder import Record, build_batch
from quorum import controller
from tests.broker.conftest import LocalQuorum, WireClient, fetch_body, produce_body
from tests.replication.test_replication_in_process import (
    FAST_FETCH_PROPS,
    TIMEOUT_S,
    TOPIC,
    _start,
    _wait,
)

# A stopped follower stays in the ISR (nothing fences it here, and its lag is never long
# enough to shrink the ISR): the HW waits for it. (Its restart re-registers it: the ISR may
# shrink, and grows again once it caught up; with min.insync.replicas 1 either way commits what
# waits, where 2 would answer NOT_ENOUGH_REPLICAS_AFTER_APPEND when the shrink came first.)
# Two requests in flight: the third waits.
LEADER_PROPS = {**FAST_FETCH_PROPS, "replica.lag.time.max.ms": 600_000,
                "max.inflight.requests.per.connection": 2}  # fmt: skip
PRODUCE_KEY, PRODUCE_VERSION = 0, 9
API_VERSIONS_KEY = 18


async def _receive(client: WireClient, count: int) -> list:
    """The next `count` responses on the connection, in the order they arrived."""
    responses: list = []
    with trio.fail_after(TIMEOUT_S):
        while len(responses) < count:
            data = await client.stream.receive_some(1 << 20)
            assert data, "the broker closed the connection"
            responses += client.codec.receive_data(data)
    return responses


def _nothing_received(client: WireClient) -> bool:
    """No byte (and no close) is waiting on the connection now."""
    readable, _, _ = select.select([client.stream.socket.fileno()], [], [], 0)
    return not readable


async def test_pipelined_acks_all_produces_append_at_once_and_answer_in_order(
    nursery, tmp_path, caplog
):
    caplog.set_level(logging.INFO, logger="log.server")
    quorum = LocalQuorum()
    leader_server, leader_port, _ = await _start(nursery, quorum, tmp_path, 1, LEADER_PROPS)
    follower = await _start(nursery, quorum, tmp_path, 2)
    response = await quorum.create_topics(controller.CreateTopicsRequest((
        controller.CreatableTopic(TOPIC, 1, 2, {"min.insync.replicas": "1"}),
    )))  # fmt: skip
    assert response.results[0].error_code == 0
    assert quorum.image.topic(TOPIC).partitions[0].leader == 1  # replicas [1, 2]: 1 leads
    leader_server.ctx.replica_manager.sync()
    hosted = leader_server.replica_manager.get(TOPIC, 0)
    log = hosted.log
    await _wait(
        lambda: hosted.state.isr == {1, 2} and hosted.state.followers[2].last_fetch_time_ms > 0
    )
    follower[2].cancel()  # the HW now waits for broker 2

    def acks_all(value: bytes):
        body = produce_body(TOPIC, 0, build_batch([Record(value)]), acks=-1)
        # no answer by timing out, however slow the machine
        return dataclasses.replace(body, timeout_ms=120_000)

    # A (acks=-1), ApiVersions, B (acks=-1), C (acks=-1) back to back on one connection.
    client = await WireClient.connect(leader_port)
    for key, version, body in (
        (PRODUCE_KEY, PRODUCE_VERSION, acks_all(b"a")),
        (API_VERSIONS_KEY, 2, API_VERSIONS_REQUEST.cls()),
        (PRODUCE_KEY, PRODUCE_VERSION, acks_all(b"b")),
        (PRODUCE_KEY, PRODUCE_VERSION, acks_all(b"c")),
    ):
        await client.send(key, version, body)
    # B is appended while A still waits for the follower (one at a time, B would wait for A's
    # answer, which needs the follower: this never happens).
    await _wait(lambda: log.log_end_offset == 2)
    assert log.high_watermark == 0
    # ApiVersions was answered before B was taken, but its answer waits behind A's; C is not
    # taken while A and B wait (max.inflight.requests.per.connection 2).
    assert _nothing_received(client)
    assert log.log_end_offset == 2
    # A consumer's long poll from offset 0 sees nothing above the HW: it parks (the appends
    # signalled before it came, so only the HW's move can wake it).
    consumer = await WireClient.connect(leader_port)
    await consumer.send(1, 11, fetch_body(TOPIC, 0, 0, max_wait_ms=120_000))
    await _wait(lambda: hosted.fetch_waiters)  # parked

    # The follower returns: A and B are committed and answered, then C is taken, appended,
    # committed and answered; every answer in request order.
    follower = await _start(nursery, quorum, tmp_path, 2)
    responses = await _receive(client, 4)
    assert [r.correlation_id for r in responses] == [0, 1, 2, 3]
    assert responses[1].body.error_code == 0
    produced = [r.body.responses[0].partition_responses[0] for r in (responses[0], *responses[2:])]
    assert [(p.error_code, p.base_offset) for p in produced] == [(ErrorCode.NONE, 0),
                                                                 (ErrorCode.NONE, 1),
                                                                 (ErrorCode.NONE, 2)]  # fmt: skip
    assert log.high_watermark == 3
    # The parked consumer fetch was answered when the HW moved, with what was committed.
    (fetched,) = await _receive(consumer, 1)
    partition = fetched.body.responses[0].partitions[0]
    assert partition.error_code == 0 and partition.high_watermark >= 1 and partition.records
    await consumer.aclose()

    # A client that goes away while its produce waits: the wait ends with the connection,
    # quietly; the record stays in the log and is committed when the follower returns.
    def settled() -> bool:
        """Broker 2 in the ISR as the controller last decided it (after any shrink its
        re-registration caused), and the leader applied that decision."""
        committed = quorum.image.topic(TOPIC).partitions[0]
        return (
            set(committed.isr) == {1, 2}
            and hosted.state.isr == {1, 2}
            and hosted.state.partition_epoch == committed.partition_epoch
        )

    await _wait(settled)
    follower[2].cancel()  # in the ISR again: the HW waits for it
    await client.send(PRODUCE_KEY, PRODUCE_VERSION, acks_all(b"d"))
    await _wait(lambda: leader_server.acks_all_waiting_count == 1)
    await client.aclose()
    await _wait(lambda: leader_server.acks_all_waiting_count == 0)
    assert log.log_end_offset == 4
    await _start(nursery, quorum, tmp_path, 2)
    await _wait(lambda: log.high_watermark == 4)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
