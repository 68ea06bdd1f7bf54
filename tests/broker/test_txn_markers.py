"""WriteTxnMarkers (27) and transactional Produce over the wire, against a real broker.

Transactional batches are written with Produce as a transactional producer would (producer id,
epoch, sequence, transactional bit), markers with WriteTxnMarkers as the transaction
coordinator does; the log is then read back with Fetch to see the control batches."""

from __future__ import annotations

import dataclasses
import time

import trio
import trio.testing

from log.common.errors import ErrorCode
from log.protocol.api_versions import API_VERSIONS_REQUEST
from log.protocol.offsets import LIST_OFFSETS_REQUEST
from log.protocol.transactions import WRITE_TXN_MARKERS_REQUEST
from log.records.batch_header import iter_batches
from log.records.builder import Record, build_batch
from log.records.control import ControlRecordType, build_control_batch, read_end_txn_marker
from tests.broker.conftest import WireClient, fetch_body, produce_body

W = WRITE_TXN_MARKERS_REQUEST.cls
PRODUCER_ID = 4000


def txn_batch(sequence: int, n: int = 2, *, producer_epoch: int = 0, transactional=True):
    # Timestamps near the markers' (wall clock): records from 1970 would roll the segment
    # (segment.ms) at the first marker.
    now_ms = int(time.time() * 1000)
    records = [Record(b"v%d" % (sequence + i), key=b"k", timestamp_ms=now_ms) for i in range(n)]
    return build_batch(
        records,
        producer_id=PRODUCER_ID,
        producer_epoch=producer_epoch,
        base_sequence=sequence,
        is_transactional=transactional,
    )


def markers_body(*markers: tuple[int, int, bool, int, dict[str, list[int]]]):
    """(producer_id, producer_epoch, committed, coordinator_epoch, {topic: [partitions]})."""
    return W(
        markers=[
            W.WritableTxnMarker(
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                transaction_result=committed,
                topics=[
                    W.WritableTxnMarkerTopic(name=name, partition_indexes=partitions)
                    for name, partitions in topics.items()
                ],
                coordinator_epoch=coordinator_epoch,
            )
            for producer_id, producer_epoch, committed, coordinator_epoch, topics in markers
        ]
    )


def codes(body) -> dict[tuple[int, str, int], int]:
    return {
        (m.producer_id, t.name, p.partition_index): p.error_code
        for m in body.markers
        for t in m.topics
        for p in t.partitions
    }


async def produce(client: WireClient, topic: str, partition: int, records: bytes) -> int:
    body = await client.call(0, 8, produce_body(topic, partition, records, acks=-1))
    return body.responses[0].partition_responses[0].error_code


async def test_markers_end_transactions_on_several_partitions(broker):
    await broker.create_topic("t", 2)
    completed: list[tuple[str, int, int, bool]] = []
    broker.server.ctx.replica_manager.add_transaction_completion_listener(
        lambda *args: completed.append(args)
    )
    client = await WireClient.connect(broker.port)
    assert await produce(client, "t", 0, txn_batch(0)) == ErrorCode.NONE
    assert await produce(client, "t", 1, txn_batch(0)) == ErrorCode.NONE
    # v1 (flexible; Kafka 4 removed v0); the second marker ends a transaction with no data here.
    body = await client.call(27, 1, markers_body((PRODUCER_ID, 0, True, 5, {"t": [0, 1]})))
    assert codes(body) == {(PRODUCER_ID, "t", 0): 0, (PRODUCER_ID, "t", 1): 0}
    assert sorted(completed) == [("t", 0, PRODUCER_ID, True), ("t", 1, PRODUCER_ID, True)]
    assert await produce(client, "t", 0, txn_batch(2)) == ErrorCode.NONE
    body = await client.call(27, 1, markers_body((PRODUCER_ID, 0, False, 5, {"t": [0]})))
    assert codes(body) == {(PRODUCER_ID, "t", 0): 0}

    body = await client.call(1, 11, fetch_body("t", 0, 0))
    data = body.responses[0].partitions[0]
    records = bytes(data.records)
    batches = list(iter_batches(records))
    assert [(h.base_offset, h.is_control, h.is_transactional) for _, h in batches] == [
        (0, False, True), (2, True, True), (3, False, True), (5, True, True),
    ]  # fmt: skip
    markers = [read_end_txn_marker(records, position) for position, h in batches if h.is_control]
    assert [(m.control_type, m.coordinator_epoch) for m in markers if m] == [
        (ControlRecordType.COMMIT, 5), (ControlRecordType.ABORT, 5),
    ]  # fmt: skip
    assert data.high_watermark == 6
    log = broker.server.ctx.replica_manager.get("t", 0).log
    assert log.producer_state_manager.last_entry(PRODUCER_ID).current_txn_first_offset is None
    await client.aclose()


async def test_markers_fence_old_producer_and_coordinator_epochs(broker):
    await broker.create_topic("t", 1)
    client = await WireClient.connect(broker.port)
    assert await produce(client, "t", 0, txn_batch(0, producer_epoch=3)) == ErrorCode.NONE
    body = await client.call(27, 1, markers_body((PRODUCER_ID, 2, False, 7, {"t": [0]})))
    assert codes(body) == {(PRODUCER_ID, "t", 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    body = await client.call(27, 1, markers_body((PRODUCER_ID, 3, True, 7, {"t": [0]})))
    assert codes(body) == {(PRODUCER_ID, "t", 0): ErrorCode.NONE}
    # The partition now knows coordinator epoch 7: a marker from epoch 6 is a zombie's.
    assert await produce(client, "t", 0, txn_batch(2, producer_epoch=3)) == ErrorCode.NONE
    body = await client.call(27, 1, markers_body((PRODUCER_ID, 3, False, 6, {"t": [0]})))
    assert codes(body) == {(PRODUCER_ID, "t", 0): ErrorCode.TRANSACTION_COORDINATOR_FENCED}
    # A bumped producer epoch (the coordinator aborting with a fenced epoch) is accepted.
    body = await client.call(27, 1, markers_body((PRODUCER_ID, 4, False, 7, {"t": [0]})))
    assert codes(body) == {(PRODUCER_ID, "t", 0): ErrorCode.NONE}
    entry = broker.server.ctx.replica_manager.get("t", 0).log.producer_state_manager.last_entry(
        PRODUCER_ID
    )
    assert (entry.producer_epoch, entry.coordinator_epoch) == (4, 7)
    assert entry.current_txn_first_offset is None
    # ...and the old epoch's data is fenced from then on.
    assert await produce(client, "t", 0, txn_batch(4, producer_epoch=3)) == (
        ErrorCode.INVALID_PRODUCER_EPOCH
    )
    await client.aclose()


async def test_markers_answer_per_partition_errors(broker):
    await broker.create_topic("t", 1)
    client = await WireClient.connect(broker.port)
    body = await client.call(
        27,
        1,
        markers_body(
            (PRODUCER_ID, 0, True, 1, {"t": [0, 9], "missing": [0]}),
            (PRODUCER_ID + 1, 0, False, 1, {"t": [0]}),
        ),
    )
    assert codes(body) == {
        (PRODUCER_ID, "t", 0): ErrorCode.NONE,
        (PRODUCER_ID, "t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        (PRODUCER_ID, "missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        (PRODUCER_ID + 1, "t", 0): ErrorCode.NONE,
    }
    await client.aclose()


async def test_write_txn_markers_is_served_but_not_advertised(broker):
    client = await WireClient.connect(broker.port)
    body = await client.call(18, 2, API_VERSIONS_REQUEST.cls())
    assert 27 not in {entry.api_key for entry in body.api_keys}
    body = await client.call(27, 1, markers_body())
    assert body.markers == []
    await client.aclose()


async def test_produce_refuses_control_batches_and_mixed_transactions(broker):
    await broker.create_topic("t", 1)
    client = await WireClient.connect(broker.port)
    marker = build_control_batch(
        ControlRecordType.COMMIT,
        producer_id=PRODUCER_ID,
        producer_epoch=0,
        coordinator_epoch=0,
        timestamp_ms=0,
    )
    assert await produce(client, "t", 0, marker) == ErrorCode.INVALID_RECORD
    assert await produce(client, "t", 0, txn_batch(0)) == ErrorCode.NONE
    plain = txn_batch(2, transactional=False)
    assert await produce(client, "t", 0, plain) == ErrorCode.INVALID_TXN_STATE
    body = await client.call(27, 1, markers_body((PRODUCER_ID, 0, True, 0, {"t": [0]})))
    assert codes(body) == {(PRODUCER_ID, "t", 0): ErrorCode.NONE}
    assert await produce(client, "t", 0, plain) == ErrorCode.NONE
    await client.aclose()


def fetch_committed(topic: str, partition: int, offset: int, *, read_committed=True, **kwargs):
    body = fetch_body(topic, partition, offset, **kwargs)
    return dataclasses.replace(body, isolation_level=1 if read_committed else 0)


def batch_offsets(data) -> list[tuple[int, bool]]:
    return [(h.base_offset, h.is_control) for _, h in iter_batches(bytes(data.records))]


def producer_batch(producer_id: int, sequence: int, n: int = 2) -> bytes:
    now_ms = int(time.time() * 1000)
    records = [Record(b"p%d-%d" % (producer_id, sequence + i), timestamp_ms=now_ms)
               for i in range(n)]  # fmt: skip
    return build_batch(
        records, producer_id=producer_id, producer_epoch=0, base_sequence=sequence,
        is_transactional=True,
    )  # fmt: skip


async def list_latest(client: WireClient, topic: str, isolation_level: int) -> int:
    L = LIST_OFFSETS_REQUEST.cls
    body = await client.call(2, 5, L(
        replica_id=-1, isolation_level=isolation_level,
        topics=[L.ListOffsetsTopic(name=topic, partitions=[
            L.ListOffsetsPartition(partition_index=0, timestamp=-1)])],
    ))  # fmt: skip
    partition = body.topics[0].partitions[0]
    assert partition.error_code == 0
    return partition.offset


async def test_read_committed_stops_at_the_lso_and_lists_aborted_transactions(broker):
    await broker.create_topic("t", 1)
    client = await WireClient.connect(broker.port)
    a, b = 7001, 7002
    assert await produce(client, "t", 0, producer_batch(a, 0)) == 0  # offsets 0-1
    assert await produce(client, "t", 0, producer_batch(b, 0)) == 0  # 2-3
    body = await client.call(27, 1, markers_body((a, 0, False, 1, {"t": [0]})))  # abort at 4
    assert codes(body) == {(a, "t", 0): 0}

    body = await client.call(1, 11, fetch_committed("t", 0, 0))
    data = body.responses[0].partitions[0]
    assert (data.high_watermark, data.last_stable_offset) == (5, 2)  # b still open at 2
    assert batch_offsets(data) == [(0, False)]
    assert [(t.producer_id, t.first_offset) for t in data.aborted_transactions] == [(a, 0)]
    assert await list_latest(client, "t", 1) == 2
    assert await list_latest(client, "t", 0) == 5

    body = await client.call(1, 11, fetch_committed("t", 0, 0, read_committed=False))
    data = body.responses[0].partitions[0]
    assert data.last_stable_offset == 2 and data.aborted_transactions is None
    assert batch_offsets(data) == [(0, False), (2, False), (4, True)]

    # A read_committed long poll from the LSO waits until b's commit moves it.
    results = []

    async def long_poll() -> None:
        poller = await WireClient.connect(broker.port)
        results.append(await poller.call(1, 11, fetch_committed("t", 0, 2, max_wait_ms=8000)))
        await poller.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(long_poll)
        await trio.testing.wait_all_tasks_blocked()
        assert not results
        body = await client.call(27, 1, markers_body((b, 0, True, 1, {"t": [0]})))  # at 5
        assert codes(body) == {(b, "t", 0): 0}
    data = results[0].responses[0].partitions[0]
    assert (data.high_watermark, data.last_stable_offset) == (6, 6)
    assert batch_offsets(data) == [(2, False), (4, True), (5, True)]
    # a's marker (4) is in the returned range: its transaction is listed (Kafka's rule: every
    # aborted transaction whose marker is at or after the fetch offset and that starts below
    # the end of what was returned).
    assert [(t.producer_id, t.first_offset) for t in data.aborted_transactions] == [(a, 0)]

    body = await client.call(1, 11, fetch_committed("t", 0, 0))
    data = body.responses[0].partitions[0]
    assert batch_offsets(data) == [(0, False), (2, False), (4, True), (5, True)]
    assert [(t.producer_id, t.first_offset) for t in data.aborted_transactions] == [(a, 0)]
    assert await list_latest(client, "t", 1) == 6
    await client.aclose()


async def test_bad_markers_get_error_codes_and_the_broker_lives(broker):
    await broker.create_topic("t", 1)
    client = await WireClient.connect(broker.port)
    body = await client.call(
        27,
        1,
        markers_body(
            (-1, 0, True, 0, {"t": [0]}),
            (5, -3, False, -7, {"t": [-1, 0], "": [0]}),
        ),
    )
    assert codes(body) == {
        (-1, "t", 0): ErrorCode.INVALID_RECORD,
        (5, "t", -1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        (5, "t", 0): ErrorCode.NONE,  # a producer the partition never saw: nothing to fence
        (5, "", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert await produce(client, "t", 0, txn_batch(0)) == ErrorCode.NONE
    await client.aclose()
