"""KIP-890 part 1 and the newer transaction API versions through the wire (one in-process broker,
our ClientCodec): FindCoordinator v3/v4, AddPartitionsToTxn v3 and v4/v5 (batched, verify_only),
InitProducerId v5, EndTxn v3/v4, and the partition leader's verification of transactional
Produce requests (a partition not added to the transaction is refused, nothing appended)."""

from __future__ import annotations

import dataclasses

import trio

from log.common.errors import ErrorCode
from log.protocol.coordinator import FIND_COORDINATOR_REQUEST
from log.protocol.producer_id import INIT_PRODUCER_ID_REQUEST
from log.protocol.transactions import ADD_PARTITIONS_TO_TXN_REQUEST, END_TXN_REQUEST
from log.records.builder import Record, build_batch
from tests.broker.conftest import WireClient, produce_body, start_broker
from tests.broker.test_txn_coordinator import PROPS, add_partitions, find_coordinator, markers

FC = FIND_COORDINATOR_REQUEST.cls
IP = INIT_PRODUCER_ID_REQUEST.cls
AP = ADD_PARTITIONS_TO_TXN_REQUEST.cls
ET = END_TXN_REQUEST.cls
TOPIC = "verified"


async def init(client: WireClient, tid: str, version: int = 5):
    while True:
        body = await client.call(22, version, IP(transactional_id=tid,
                                                 transaction_timeout_ms=60_000))  # fmt: skip
        if body.error_code not in (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.CONCURRENT_TRANSACTIONS,
        ):
            return body
        await trio.sleep(0.05)


def verify(tid: str, pid: int, epoch: int, partitions: dict[str, list[int]], only: bool = True):
    return AP.AddPartitionsToTxnTransaction(
        transactional_id=tid,
        producer_id=pid,
        producer_epoch=epoch,
        verify_only=only,
        topics=[AP.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in partitions.items()],
    )


def results(body) -> dict[str, dict[tuple[str, int], int]]:
    return {
        r.transactional_id: {
            (t.name, p.partition_index): p.partition_error_code
            for t in r.topic_results
            for p in t.results_by_partition
        }
        for r in body.results_by_transaction
    }


def txn_batch(pid: int, epoch: int, sequence: int, value: bytes = b"v") -> bytes:
    return build_batch([Record(value)], producer_id=pid, producer_epoch=epoch,
                       base_sequence=sequence, is_transactional=True)  # fmt: skip


async def produce(client: WireClient, tid: str | None, partition: int, batch: bytes):
    body = produce_body(TOPIC, partition, batch, acks=-1)
    body = dataclasses.replace(body, transactional_id=tid)
    answer = await client.call(0, 9, body)
    return answer.responses[0].partition_responses[0]


async def test_find_coordinator_v3_and_batched_v4(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **PROPS)
    client = await WireClient.connect(broker.port)
    await find_coordinator(client, "t1")  # creates __transaction_state
    await find_coordinator(client, "g1", key_type=0)  # creates __consumer_offsets
    v3 = await client.call(10, 3, FC(key="t1", key_type=1))
    assert (v3.error_code, v3.node_id, v3.port) == (0, 1, broker.port)
    v4 = await client.call(10, 4, FC(key_type=1, coordinator_keys=["t1", "t2", ""]))
    got = {(c.key, c.error_code, c.node_id, c.port) for c in v4.coordinators}
    assert got == {("t1", 0, 1, broker.port), ("t2", 0, 1, broker.port),
                   ("", ErrorCode.INVALID_REQUEST, -1, -1)}  # fmt: skip
    groups = await client.call(10, 4, FC(key_type=0, coordinator_keys=["g1", "g2"]))
    assert [(c.key, c.error_code, c.node_id) for c in groups.coordinators] == [
        ("g1", 0, 1), ("g2", 0, 1),
    ]  # fmt: skip
    bad = await client.call(10, 4, FC(key_type=7, coordinator_keys=["x"]))
    assert [c.error_code for c in bad.coordinators] == [ErrorCode.INVALID_REQUEST]
    await client.aclose()


async def test_add_partitions_v3_verify_only_v4_and_end_txn_v4(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **PROPS)
    await broker.create_topic(TOPIC, partitions=3)
    client = await WireClient.connect(broker.port)
    await find_coordinator(client, "t1")
    first = await init(client, "t1", version=5)
    assert first.error_code == 0
    pid, epoch = first.producer_id, first.producer_epoch
    # v3 (flexible) from the client adds partition 0.
    added = await client.call(24, 3, add_partitions("t1", pid, epoch, TOPIC, [0]))
    assert [p.partition_error_code for t in added.results_by_topic_v3_and_below
            for p in t.results_by_partition] == [0]  # fmt: skip
    # v4 verify_only (a partition leader's question): 0 is in, 1 is not; nothing written.
    body = await client.call(24, 4, AP(transactions=[
        verify("t1", pid, epoch, {TOPIC: [0, 1]}),
        verify("t1-unknown", pid, epoch, {TOPIC: [0]}),
        verify("", pid, epoch, {TOPIC: [0]}),
    ]))  # fmt: skip
    assert body.error_code == 0
    assert results(body) == {
        "t1": {(TOPIC, 0): 0, (TOPIC, 1): ErrorCode.TRANSACTION_ABORTABLE},
        "t1-unknown": {(TOPIC, 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING},
        "": {(TOPIC, 0): ErrorCode.INVALID_REQUEST},
    }
    # A stale epoch is fenced; an unknown topic fails the transaction, the rest not attempted.
    body = await client.call(24, 5, AP(transactions=[verify("t1", pid, epoch + 1, {TOPIC: [0]})]))
    assert results(body) == {"t1": {(TOPIC, 0): ErrorCode.PRODUCER_FENCED}}
    body = await client.call(24, 5, AP(transactions=[
        verify("t1", pid, epoch, {TOPIC: [0], "nope": [0]}),
    ]))  # fmt: skip
    assert results(body) == {
        "t1": {(TOPIC, 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
               ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION},
    }  # fmt: skip
    # v5 without verify_only adds partition 1 (broker-initiated add); now it verifies.
    body = await client.call(24, 5, AP(transactions=[verify("t1", pid, epoch, {TOPIC: [1]},
                                                            only=False)]))  # fmt: skip
    assert results(body) == {"t1": {(TOPIC, 1): 0}}
    body = await client.call(24, 5, AP(transactions=[verify("t1", pid, epoch, {TOPIC: [1]})]))
    assert results(body) == {"t1": {(TOPIC, 1): 0}}
    # EndTxn v4 (flexible) commits; v3 on a stale epoch is PRODUCER_FENCED.
    fenced = await client.call(26, 3, ET(transactional_id="t1", producer_id=pid,
                                         producer_epoch=epoch + 1, committed=True))  # fmt: skip
    assert fenced.error_code == ErrorCode.PRODUCER_FENCED
    ended = await client.call(26, 4, ET(transactional_id="t1", producer_id=pid,
                                        producer_epoch=epoch, committed=True))  # fmt: skip
    assert ended.error_code == 0
    with trio.fail_after(30):
        while len(markers(broker, TOPIC, 0)) < 1 or len(markers(broker, TOPIC, 1)) < 1:
            await trio.sleep(0.05)
    assert markers(broker, TOPIC, 1) == [(pid, epoch, True)]
    await client.aclose()


async def test_transactional_produce_to_a_partition_not_added_is_refused(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **PROPS)
    await broker.create_topic(TOPIC, partitions=2)
    client = await WireClient.connect(broker.port)
    await find_coordinator(client, "t1")
    first = await init(client, "t1")
    pid, epoch = first.producer_id, first.producer_epoch
    await client.call(24, 2, add_partitions("t1", pid, epoch, TOPIC, [0]))
    # Partition 1 was never added: refused, nothing appended.
    refused = await produce(client, "t1", 1, txn_batch(pid, epoch, 0))
    assert refused.error_code == ErrorCode.INVALID_TXN_STATE
    assert broker.server.ctx.replica_manager.get(TOPIC, 1).log.log_end_offset == 0
    # The same partition named twice in one request: both entries refused.
    twice = produce_body(TOPIC, 1, txn_batch(pid, epoch, 0), acks=-1)
    topic_data = twice.topic_data[0]
    parts = topic_data.partition_data * 2
    twice = dataclasses.replace(twice, transactional_id="t1", topic_data=[
        dataclasses.replace(topic_data, partition_data=parts)])  # fmt: skip
    answer = await client.call(0, 9, twice)
    assert [p.error_code for p in answer.responses[0].partition_responses] == [
        ErrorCode.INVALID_TXN_STATE, ErrorCode.INVALID_TXN_STATE,
    ]  # fmt: skip
    assert broker.server.ctx.replica_manager.get(TOPIC, 1).log.log_end_offset == 0
    # Partition 0 was: the first batch is verified, the next needs no question.
    ok = await produce(client, "t1", 0, txn_batch(pid, epoch, 0))
    assert (ok.error_code, ok.base_offset) == (0, 0)
    ok = await produce(client, "t1", 0, txn_batch(pid, epoch, 1))
    assert (ok.error_code, ok.base_offset) == (0, 1)
    # Another epoch is fenced by the coordinator, answered as the producer expects it.
    stale = await produce(client, "t1", 1, txn_batch(pid, epoch + 5, 0))
    assert stale.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    # A transactional batch of an id no coordinator knows.
    other = await produce(client, "never-initialised", 1, txn_batch(pid + 1000, 0, 0))
    assert other.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert broker.server.ctx.replica_manager.get(TOPIC, 1).log.log_end_offset == 0
    verifier = broker.server.add_partitions_to_txn_manager  # the metrics' counters
    assert (verifier.verified_partition_count, verifier.failed_partition_count) == (5, 4)
    await client.aclose()


async def test_verification_can_be_disabled(nursery, tmp_path):
    broker = await start_broker(
        nursery, tmp_path, **PROPS, **{"transaction.partition.verification.enable": False}
    )
    await broker.create_topic(TOPIC, partitions=2)
    client = await WireClient.connect(broker.port)
    await find_coordinator(client, "t1")
    first = await init(client, "t1")
    pid, epoch = first.producer_id, first.producer_epoch
    # Without verification the leader appends what it is sent (Kafka before KIP-890).
    accepted = await produce(client, "t1", 1, txn_batch(pid, epoch, 0))
    assert accepted.error_code == 0
    await client.aclose()


async def test_list_offsets_max_timestamp_stops_at_the_lso_for_read_committed(nursery, tmp_path):
    """ListOffsets -3 (max timestamp): read_committed does not see a record at or above the last
    stable offset (Kafka's Partition.fetchOffsetForTimestamp filter), read_uncommitted does."""
    from log.protocol.offsets import LIST_OFFSETS_REQUEST

    L = LIST_OFFSETS_REQUEST.cls
    broker = await start_broker(nursery, tmp_path, **PROPS)
    await broker.create_topic(TOPIC, partitions=1)
    client = await WireClient.connect(broker.port)
    plain = build_batch([Record(b"old", timestamp_ms=100)])
    assert (await produce(client, None, 0, plain)).error_code == 0
    # An open transaction (written without a transactional id: not verified) holds the LSO at 1.
    open_txn = build_batch([Record(b"new", timestamp_ms=500)], producer_id=77, producer_epoch=0,
                           base_sequence=0, is_transactional=True)  # fmt: skip
    assert (await produce(client, None, 0, open_txn)).error_code == 0

    async def max_timestamp(isolation_level: int) -> tuple[int, int]:
        body = await client.call(2, 7, L(replica_id=-1, isolation_level=isolation_level, topics=[
            L.ListOffsetsTopic(name=TOPIC, partitions=[
                L.ListOffsetsPartition(partition_index=0, timestamp=-3)])]))  # fmt: skip
        answer = body.topics[0].partitions[0]
        assert answer.error_code == 0
        return answer.offset, answer.timestamp

    assert await max_timestamp(0) == (1, 500)
    assert await max_timestamp(1) == (-1, -1)
    await client.aclose()


async def test_txn_offset_commit_needs_the_offsets_partition_in_the_transaction(nursery, tmp_path):
    """TxnOffsetCommit without AddOffsetsToTxn: the group's __consumer_offsets partition is not in
    the transaction, so nothing is written (INVALID_TXN_STATE); after AddOffsetsToTxn it is."""
    from log.protocol.transactions import ADD_OFFSETS_TO_TXN_REQUEST, TXN_OFFSET_COMMIT_REQUEST

    AO = ADD_OFFSETS_TO_TXN_REQUEST.cls
    TO = TXN_OFFSET_COMMIT_REQUEST.cls
    broker = await start_broker(nursery, tmp_path, **PROPS)
    await broker.create_topic(TOPIC)
    client = await WireClient.connect(broker.port)
    await find_coordinator(client, "t1")
    assert (await find_coordinator(client, "grp", key_type=0)).error_code == 0
    first = await init(client, "t1")
    pid, epoch = first.producer_id, first.producer_epoch
    commit = TO(transactional_id="t1", group_id="grp", producer_id=pid, producer_epoch=epoch,
                topics=[TO.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=[
                    TO.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                        partition_index=0, committed_offset=7, committed_metadata="")])])  # fmt: skip

    async def commit_code() -> int:
        return (await client.call(28, 2, commit)).topics[0].partitions[0].error_code

    assert await commit_code() == ErrorCode.INVALID_TXN_STATE
    groups = broker.server.ctx.group_coordinator.core
    assert not groups.has_pending_txn_offsets("grp")
    added = await client.call(25, 2, AO(transactional_id="t1", producer_id=pid,
                                        producer_epoch=epoch, group_id="grp"))  # fmt: skip
    assert added.error_code == 0
    assert await commit_code() == 0
    assert groups.has_pending_txn_offsets("grp")
    await client.aclose()
