"""The transaction coordinator's handlers through the wire (one real broker, our ClientCodec):
FindCoordinator key_type 1, InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn and TxnOffsetCommit, with the error codes clients rely on."""

from __future__ import annotations

import trio

from log.common.errors import ErrorCode
from log.protocol.coordinator import FIND_COORDINATOR_REQUEST
from log.protocol.groups import OFFSET_FETCH_REQUEST
from log.protocol.producer_id import INIT_PRODUCER_ID_REQUEST
from log.protocol.transactions import (
    ADD_OFFSETS_TO_TXN_REQUEST,
    ADD_PARTITIONS_TO_TXN_REQUEST,
    END_TXN_REQUEST,
    TXN_OFFSET_COMMIT_REQUEST,
)
from tests.broker.conftest import WireClient, markers, start_broker

FC = FIND_COORDINATOR_REQUEST.cls
IP = INIT_PRODUCER_ID_REQUEST.cls
AP = ADD_PARTITIONS_TO_TXN_REQUEST.cls
AO = ADD_OFFSETS_TO_TXN_REQUEST.cls
ET = END_TXN_REQUEST.cls
TO = TXN_OFFSET_COMMIT_REQUEST.cls
OF = OFFSET_FETCH_REQUEST.cls
PROPS = {"transaction.state.log.num.partitions": 3, "offsets.topic.num.partitions": 3}
TV1_CLUSTER = {"quorumlog.bootstrap.features": "transaction.version=1"}


async def find_coordinator(client: WireClient, key: str, key_type: int = 1):
    """FindCoordinator until it answers (the internal topic is created on the first call)."""
    while True:
        body = await client.call(10, 2, FC(key=key, key_type=key_type))
        if body.error_code != ErrorCode.COORDINATOR_NOT_AVAILABLE:
            return body
        await trio.sleep(0.05)


async def init(client: WireClient, tid: str, timeout_ms: int = 60_000, version: int = 1):
    """InitProducerId, retried while the coordinator loads or aborts a fenced transaction."""
    while True:
        body = await client.call(22, version, IP(transactional_id=tid,
                                                 transaction_timeout_ms=timeout_ms))  # fmt: skip
        if body.error_code not in (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.CONCURRENT_TRANSACTIONS,
        ):
            return body
        await trio.sleep(0.05)


def add_partitions(tid: str, pid: int, epoch: int, topic: str, partitions: list[int]):
    return AP(
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AP.AddPartitionsToTxnTopic(name=topic, partitions=partitions)],
    )


def partition_codes(body) -> dict[tuple[str, int], int]:
    return {
        (t.name, p.partition_index): p.partition_error_code
        for t in body.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


async def test_find_coordinator_creates_the_log_and_init_bumps_the_epoch(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **PROPS)
    client = await WireClient.connect(broker.port)
    # Before __transaction_state exists nobody coordinates the id.
    body = await client.call(22, 1, IP(transactional_id="t1", transaction_timeout_ms=60_000))
    assert body.error_code == ErrorCode.NOT_COORDINATOR
    body = await find_coordinator(client, "t1")
    assert (body.error_code, body.node_id, body.port) == (0, 1, broker.port)
    image = broker.server.ctx.image
    topic = image.topic("__transaction_state")
    assert topic is not None and len(topic.partitions) == 3
    assert {len(p.replicas) for p in topic.partitions.values()} == {1}  # min(3, live brokers)
    assert dict(image.topic_configs("__transaction_state")) == {
        "cleanup.policy": "compact",
        "min.insync.replicas": "1",  # min(transaction.state.log.min.isr 2, replication factor)
        "segment.bytes": "104857600",
    }
    first = await init(client, "t1")
    assert first.error_code == 0 and first.producer_id >= 0 and first.producer_epoch == 0
    again = await init(client, "t1")
    assert (again.error_code, again.producer_id, again.producer_epoch) == (
        0, first.producer_id, 1,
    )  # fmt: skip
    other = await init(client, "t2")
    assert other.error_code == 0 and other.producer_id != first.producer_id
    # An idempotent producer (no transactional id) still gets a fresh id.
    plain = await client.call(22, 1, IP(transactional_id=None, transaction_timeout_ms=0))
    assert plain.error_code == 0 and plain.producer_id not in (first.producer_id, -1)
    await client.aclose()


async def test_bad_timeout_and_empty_ids(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **PROPS, **{"transaction.max.timeout.ms": 5000})
    client = await WireClient.connect(broker.port)
    await find_coordinator(client, "t1")
    body = await init(client, "t1", timeout_ms=5001)
    assert body.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    body = await init(client, "t1", timeout_ms=0)
    assert body.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert (await init(client, "t1", timeout_ms=5000)).error_code == 0
    body = await client.call(10, 2, FC(key="", key_type=1))
    assert body.error_code == ErrorCode.INVALID_REQUEST
    await client.aclose()


async def test_a_zombie_is_fenced(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **PROPS)
    await broker.create_topic("out", partitions=2)
    client = await WireClient.connect(broker.port)
    await find_coordinator(client, "z")
    old = await init(client, "z")
    new = await init(client, "z")
    assert new.producer_epoch == old.producer_epoch + 1
    pid = old.producer_id
    # The old instance: v0-1 clients hear INVALID_PRODUCER_EPOCH, v2 PRODUCER_FENCED (Kafka).
    for version, expected in ((0, ErrorCode.INVALID_PRODUCER_EPOCH),
                              (2, ErrorCode.PRODUCER_FENCED)):  # fmt: skip
        body = await client.call(24, version, add_partitions("z", pid, old.producer_epoch, "out",
                                                             [0]))  # fmt: skip
        assert partition_codes(body) == {("out", 0): expected}
    body = await client.call(26, 1, ET(transactional_id="z", producer_id=pid,
                                       producer_epoch=old.producer_epoch, committed=True))  # fmt: skip
    assert body.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    body = await client.call(25, 2, AO(transactional_id="z", producer_id=pid,
                                       producer_epoch=old.producer_epoch, group_id="g"))  # fmt: skip
    assert body.error_code == ErrorCode.PRODUCER_FENCED
    # A wrong producer id is not this transactional id's.
    body = await client.call(24, 1, add_partitions("z", pid + 1000, new.producer_epoch, "out", [0]))
    assert partition_codes(body) == {("out", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    # The current one works.
    body = await client.call(24, 1, add_partitions("z", pid, new.producer_epoch, "out", [0, 1]))
    assert partition_codes(body) == {("out", 0): 0, ("out", 1): 0}
    await client.aclose()


async def test_init_aborts_the_open_transaction_of_the_fenced_instance(nursery, tmp_path):
    """A new instance's InitProducerId while the old one's transaction is Ongoing: the
    coordinator aborts it first (CONCURRENT_TRANSACTIONS meanwhile), then bumps again. On a
    transaction version 1 cluster (version 2's abort bumps once more: test_txn_version2.py)."""
    broker = await start_broker(nursery, tmp_path, **PROPS, **TV1_CLUSTER)
    await broker.create_topic("out")
    client = await WireClient.connect(broker.port)
    await find_coordinator(client, "c")
    old = await init(client, "c")
    body = await client.call(24, 1, add_partitions("c", old.producer_id, old.producer_epoch,
                                                   "out", [0]))  # fmt: skip
    assert partition_codes(body) == {("out", 0): 0}
    body = await client.call(22, 1, IP(transactional_id="c", transaction_timeout_ms=60_000))
    assert body.error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    new = await init(client, "c")
    assert new.error_code == 0 and new.producer_id == old.producer_id
    assert new.producer_epoch == old.producer_epoch + 2  # one for the fence, one for the init
    state = broker.server.ctx.transaction_coordinator.core.transaction("c")
    assert state is not None and state.state.kafka_name == "Empty"
    # The old instance's transaction was aborted on its partition: an ABORT marker there.
    assert markers(broker, "out", 0) == [(old.producer_id, old.producer_epoch + 1, False)]
    await client.aclose()


async def test_end_txn_states(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **PROPS)
    await broker.create_topic("out")
    client = await WireClient.connect(broker.port)
    await find_coordinator(client, "e")
    p = await init(client, "e")
    end = ET(transactional_id="e", producer_id=p.producer_id, producer_epoch=p.producer_epoch,
             committed=True)  # fmt: skip
    # Nothing was added: there is no transaction to end.
    assert (await client.call(26, 1, end)).error_code == ErrorCode.INVALID_TXN_STATE
    body = await client.call(24, 1, add_partitions("e", p.producer_id, p.producer_epoch, "out",
                                                   [0]))  # fmt: skip
    assert partition_codes(body) == {("out", 0): 0}
    assert (await client.call(26, 1, end)).error_code == 0
    # Aborting what was committed is an invalid transition; committing again is a retry.
    abort = ET(transactional_id="e", producer_id=p.producer_id, producer_epoch=p.producer_epoch,
               committed=False)  # fmt: skip
    while (
        code := (await client.call(26, 1, abort)).error_code
    ) == ErrorCode.CONCURRENT_TRANSACTIONS:
        await trio.sleep(0.05)
    assert code == ErrorCode.INVALID_TXN_STATE
    await client.aclose()


async def test_txn_offset_commit_stays_pending(nursery, tmp_path):
    """TxnOffsetCommit writes the offsets, but OffsetFetch shows them only after the COMMIT
    marker lands on __consumer_offsets (not before: here no marker has been written)."""
    broker = await start_broker(nursery, tmp_path, **PROPS)
    await broker.create_topic("in")
    client = await WireClient.connect(broker.port)
    await find_coordinator(client, "o")
    group = await find_coordinator(client, "grp", key_type=0)
    assert group.error_code == 0
    p = await init(client, "o")
    body = await client.call(25, 1, AO(transactional_id="o", producer_id=p.producer_id,
                                       producer_epoch=p.producer_epoch, group_id="grp"))  # fmt: skip
    assert body.error_code == 0
    commit = TO(
        transactional_id="o",
        group_id="grp",
        producer_id=p.producer_id,
        producer_epoch=p.producer_epoch,
        topics=[TO.TxnOffsetCommitRequestTopic(name="in", partitions=[
            TO.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=42, committed_metadata="m")])],
    )  # fmt: skip
    body = await client.call(28, 2, commit)
    assert [(t.name, [(x.partition_index, x.error_code) for x in t.partitions])
            for t in body.topics] == [("in", [(0, 0)])]  # fmt: skip
    fetched = await client.call(9, 5, OF(group_id="grp", topics=[
        OF.OffsetFetchRequestTopic(name="in", partition_indexes=[0])]))  # fmt: skip
    assert fetched.topics[0].partitions[0].committed_offset == -1
    groups = broker.server.ctx.group_coordinator.core
    assert groups.has_pending_txn_offsets("grp")
    await client.aclose()


async def fetch_offset(client: WireClient, group: str, topic: str, partition: int) -> int:
    body = await client.call(9, 5, OF(group_id=group, topics=[
        OF.OffsetFetchRequestTopic(name=topic, partition_indexes=[partition])]))  # fmt: skip
    return body.topics[0].partitions[0].committed_offset


async def test_txn_offsets_appear_at_commit_and_vanish_at_abort(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **PROPS)
    await broker.create_topic("in", partitions=2)
    await broker.create_topic("out")
    client = await WireClient.connect(broker.port)
    await find_coordinator(client, "x")
    assert (await find_coordinator(client, "grp", key_type=0)).error_code == 0
    p = await init(client, "x")
    for partition, offset, committed in ((0, 10, True), (1, 20, False)):
        # The first EndTxn was answered once its Prepare record was written; until the markers
        # and CompleteCommit follow, the coordinator answers CONCURRENT_TRANSACTIONS (as Kafka
        # does), which clients retry.
        with trio.fail_after(10):
            while True:
                body = await client.call(24, 1, add_partitions("x", p.producer_id,
                                                               p.producer_epoch, "out", [0]))  # fmt: skip
                if partition_codes(body) != {("out", 0): ErrorCode.CONCURRENT_TRANSACTIONS}:
                    break
                await trio.sleep(0.02)
        assert partition_codes(body) == {("out", 0): 0}
        body = await client.call(25, 1, AO(transactional_id="x", producer_id=p.producer_id,
                                           producer_epoch=p.producer_epoch, group_id="grp"))  # fmt: skip
        assert body.error_code == 0
        commit = TO(transactional_id="x", group_id="grp", producer_id=p.producer_id,
                    producer_epoch=p.producer_epoch, topics=[TO.TxnOffsetCommitRequestTopic(
                        name="in", partitions=[
                            TO.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                                partition_index=partition, committed_offset=offset,
                                committed_metadata=None)])])  # fmt: skip
        body = await client.call(28, 1, commit)
        assert body.topics[0].partitions[0].error_code == 0
        end = ET(transactional_id="x", producer_id=p.producer_id,
                 producer_epoch=p.producer_epoch, committed=committed)  # fmt: skip
        assert (await client.call(26, 1, end)).error_code == 0
        # The coordinator answers once the Prepare record is written; the markers follow.
        groups = broker.server.ctx.group_coordinator.core
        while groups.has_pending_txn_offsets("grp"):
            await trio.sleep(0.02)
    assert await fetch_offset(client, "grp", "in", 0) == 10
    assert await fetch_offset(client, "grp", "in", 1) == -1
    assert markers(broker, "out", 0) == [(p.producer_id, p.producer_epoch, True),
                                         (p.producer_id, p.producer_epoch, False)]  # fmt: skip
    await client.aclose()


async def test_describe_and_list_transactions(nursery, tmp_path):
    from log.protocol.transaction_admin import (
        DESCRIBE_TRANSACTIONS_REQUEST,
        LIST_TRANSACTIONS_REQUEST,
    )

    DT = DESCRIBE_TRANSACTIONS_REQUEST.cls
    LT = LIST_TRANSACTIONS_REQUEST.cls
    broker = await start_broker(nursery, tmp_path, **PROPS)
    await broker.create_topic("out", partitions=2)
    client = await WireClient.connect(broker.port)
    await find_coordinator(client, "d1")
    p1 = await init(client, "d1", timeout_ms=30_000)
    await init(client, "d2")
    body = await client.call(24, 1, add_partitions("d1", p1.producer_id, p1.producer_epoch, "out",
                                                   [1, 0]))  # fmt: skip
    assert partition_codes(body) == {("out", 0): 0, ("out", 1): 0}
    exposition = broker.server.metrics.exposition().decode()
    assert (
        "\nquorumlog_txn_coordinator_open_transactions 1.0\n" in exposition
    )  # d1 Ongoing, d2 Empty
    assert "\nquorumlog_txn_coordinator_markers_queued 0.0\n" in exposition
    body = await client.call(65, 0, DT(transactional_ids=["d1", "d2", "nobody"]))
    d1, d2, nobody = body.transaction_states
    assert (d1.error_code, d1.transaction_state, d1.producer_id, d1.producer_epoch) == (
        0, "Ongoing", p1.producer_id, p1.producer_epoch,
    )  # fmt: skip
    assert d1.transaction_timeout_ms == 30_000 and d1.transaction_start_time_ms > 0
    assert [(t.topic, t.partitions) for t in d1.topics] == [("out", [0, 1])]
    assert (d2.error_code, d2.transaction_state, d2.topics) == (0, "Empty", [])
    assert nobody.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    body = await client.call(66, 1, LT(state_filters=[], producer_id_filters=[]))
    listed = {(t.transactional_id, t.transaction_state) for t in body.transaction_states}
    assert listed == {("d1", "Ongoing"), ("d2", "Empty")}
    body = await client.call(66, 0, LT(state_filters=["Ongoing", "Bogus"], producer_id_filters=[]))
    assert [t.transactional_id for t in body.transaction_states] == ["d1"]
    assert body.unknown_state_filters == ["Bogus"]
    body = await client.call(66, 1, LT(state_filters=[], producer_id_filters=[p1.producer_id],
                                       duration_filter=3_600_000))  # fmt: skip
    assert body.transaction_states == []
    await client.aclose()


async def test_offsets_partition_replay_applies_committed_and_drops_aborted(nursery, tmp_path):
    """The group coordinator reloads __consumer_offsets (as a new leader would): offsets of a
    committed transaction are there, of an aborted one not, of an open one still pending."""
    from log.coordinator.group_coordinator import partition_for as group_partition

    broker = await start_broker(nursery, tmp_path, **PROPS)
    await broker.create_topic("in", partitions=3)
    client = await WireClient.connect(broker.port)
    assert (await find_coordinator(client, "grp", key_type=0)).error_code == 0
    await find_coordinator(client, "r")
    groups = broker.server.ctx.group_coordinator

    async def transaction(tid: str, partition: int, offset: int, end: bool | None) -> None:
        p = await init(client, tid)
        body = await client.call(25, 1, AO(transactional_id=tid, producer_id=p.producer_id,
                                           producer_epoch=p.producer_epoch, group_id="grp"))  # fmt: skip
        assert body.error_code == 0
        commit = TO(transactional_id=tid, group_id="grp", producer_id=p.producer_id,
                    producer_epoch=p.producer_epoch, topics=[TO.TxnOffsetCommitRequestTopic(
                        name="in", partitions=[
                            TO.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                                partition_index=partition, committed_offset=offset,
                                committed_metadata="")])])  # fmt: skip
        assert (await client.call(28, 2, commit)).topics[0].partitions[0].error_code == 0
        if end is None:
            return
        body = await client.call(26, 1, ET(transactional_id=tid, producer_id=p.producer_id,
                                           producer_epoch=p.producer_epoch, committed=end))  # fmt: skip
        assert body.error_code == 0
        while groups.core.pending_txn_offsets.get(p.producer_id):
            await trio.sleep(0.02)

    await transaction("r1", 0, 5, True)
    await transaction("r2", 1, 6, False)
    await transaction("r3", 2, 7, None)
    partition = group_partition("grp", PROPS["offsets.topic.num.partitions"])
    groups.core.unload(partition)
    groups.sync_ownership()  # leads it still: replays the log
    assert await fetch_offset(client, "grp", "in", 0) == 5
    assert await fetch_offset(client, "grp", "in", 1) == -1
    assert await fetch_offset(client, "grp", "in", 2) == -1
    assert groups.core.has_pending_txn_offsets("grp")
    await client.aclose()


async def test_init_producer_id_v3_plus_bumps_the_callers_own_epoch(nursery, tmp_path):
    """KIP-360 (v3+): a producer naming its current producer id and epoch gets the epoch
    bumped (how librdkafka recovers from an abortable error); naming an older epoch is fenced
    (PRODUCER_FENCED from v4, INVALID_PRODUCER_EPOCH before); the previous epoch is a retry."""
    broker = await start_broker(nursery, tmp_path, **PROPS)
    client = await WireClient.connect(broker.port)
    await find_coordinator(client, "k")
    first = await init(client, "k", version=4)
    assert (first.error_code, first.producer_epoch) == (0, 0)

    async def init_expecting(version: int, producer_id: int, producer_epoch: int):
        while True:
            body = await client.call(22, version, IP(
                transactional_id="k", transaction_timeout_ms=60_000, producer_id=producer_id,
                producer_epoch=producer_epoch))  # fmt: skip
            if body.error_code != ErrorCode.CONCURRENT_TRANSACTIONS:
                return body

    bumped = await init_expecting(4, first.producer_id, 0)
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (
        0, first.producer_id, 1,
    )  # fmt: skip
    # The same request again is a retry (the epoch before the bump): answered as the first.
    retry = await init_expecting(4, first.producer_id, 0)
    assert (retry.error_code, retry.producer_epoch) == (0, 1)
    assert (await init_expecting(4, first.producer_id, 1)).producer_epoch == 2
    stale = await init_expecting(4, first.producer_id, 0)
    assert stale.error_code == ErrorCode.PRODUCER_FENCED
    stale = await init_expecting(3, first.producer_id, 0)
    assert stale.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    await client.aclose()
