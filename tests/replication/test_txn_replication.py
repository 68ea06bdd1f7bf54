"""Followers keep the transaction state the leader has: after a leader change the new leader
answers the same last stable offset and aborted transactions, and its producer state still
holds the open transaction (three real KafkaServers in one process, as
test_replication_in_process.py)."""

from __future__ import annotations

import time

from log.common.errors import ErrorCode
from log.records.builder import Record, build_batch
from quorum import controller
from tests.broker.conftest import LocalQuorum, WireClient, produce_body
from tests.broker.test_txn_markers import codes, fetch_committed, markers_body
from tests.replication.test_replication_in_process import (
    TOPIC,
    _partition,
    _replicated_topic,
    _start,
    _wait,
)

ABORTED, COMMITTED, OPEN = 21, 22, 23


def txn_batch(producer_id: int, sequence: int) -> bytes:
    now_ms = int(time.time() * 1000)
    return build_batch(
        [Record(b"%d-%d" % (producer_id, sequence + i), timestamp_ms=now_ms) for i in range(2)],
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=sequence,
        is_transactional=True,
    )


async def write(port: int) -> None:
    client = await WireClient.connect(port)

    async def produce(producer_id: int, sequence: int) -> None:
        body = await client.call(0, 8, produce_body(TOPIC, 0, txn_batch(producer_id, sequence),
                                                    acks=-1))  # fmt: skip
        assert body.responses[0].partition_responses[0].error_code == ErrorCode.NONE

    async def end(producer_id: int, commit: bool) -> None:
        body = await client.call(27, 1, markers_body((producer_id, 0, commit, 3, {TOPIC: [0]})))
        assert set(codes(body).values()) == {ErrorCode.NONE}

    await produce(ABORTED, 0)
    await produce(COMMITTED, 0)
    await produce(ABORTED, 2)
    await end(ABORTED, False)
    await produce(OPEN, 0)
    await end(COMMITTED, True)
    await produce(ABORTED, 4)  # a second aborted transaction
    await end(ABORTED, False)
    await client.aclose()


async def read_committed(port: int) -> tuple[int, int, list[tuple[int, int]]]:
    client = await WireClient.connect(port)
    body = await client.call(1, 11, fetch_committed(TOPIC, 0, 0))
    await client.aclose()
    data = body.responses[0].partitions[0]
    assert data.error_code == ErrorCode.NONE
    aborted = [(t.producer_id, t.first_offset) for t in data.aborted_transactions]
    return data.high_watermark, data.last_stable_offset, aborted


async def test_new_leader_has_the_same_lso_and_aborted_transactions(nursery, tmp_path):
    quorum = LocalQuorum()
    brokers = {i: await _start(nursery, quorum, tmp_path, i) for i in (1, 2, 3)}
    leader, leader_server, leader_port, followers = await _replicated_topic(
        quorum, brokers, min_insync_replicas=2
    )
    await write(leader_port)
    leader_log = leader_server.log_manager.get_log(TOPIC, 0)
    end = leader_log.log_end_offset
    assert leader_log.high_watermark == end
    before = await read_committed(leader_port)
    # 0-1 aborted, 2-3 committed, 4-5 aborted, 6 ABORT, 7-8 open, 9 COMMIT, 10-11, 12 ABORT:
    # read_committed stops at the open transaction, so only the first abort is in range.
    assert before == (end, 7, [(ABORTED, 0)])
    follower_logs = [brokers[b][0].log_manager.get_log(TOPIC, 0) for b in followers]
    await _wait(lambda: all(log.high_watermark == end for log in follower_logs))
    for log in follower_logs:
        assert log.last_stable_offset == 7
        assert [s.txn_index.entries for s in log.segments] == [
            s.txn_index.entries for s in leader_log.segments
        ]

    # The leader shuts down (controlled): a follower takes over.
    records, response = controller.controlled_shutdown(
        quorum.image,
        controller.ControlledShutdownRequest(leader, quorum.image.brokers[leader].broker_epoch),
    )
    assert response.error_code == ErrorCode.NONE
    quorum.commit(records)
    brokers[leader][2].cancel()
    new_leader = _partition(quorum).leader
    assert new_leader in followers
    server, port, _ = brokers[new_leader]
    hosted = server.replica_manager.get(TOPIC, 0)
    await _wait(lambda: hosted.is_leader and hosted.log.high_watermark == end)
    assert await read_committed(port) == before

    # The open transaction survived the move: its commit releases the LSO.
    client = await WireClient.connect(port)
    body = await client.call(27, 1, markers_body((OPEN, 0, True, 3, {TOPIC: [0]})))
    assert codes(body) == {(OPEN, TOPIC, 0): ErrorCode.NONE}
    await client.aclose()
    assert await read_committed(port) == (end + 1, end + 1, [(ABORTED, 0), (ABORTED, 10)])
    for _, _, scope in brokers.values():
        scope.cancel()
