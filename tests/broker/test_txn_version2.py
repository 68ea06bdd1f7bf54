"""Transaction version 2 (KIP-890 part 2) on the wire, against a real in-process broker, as a
Kafka 4 client uses it (no such Java client here: our ClientCodec sends its requests):
InitProducerId, Produce v12 to partitions never added, TxnOffsetCommit v5 without
AddOffsetsToTxn, EndTxn v5 commit then abort, each bumping the epoch the client continues
with; the markers carry the bumped epoch; a zombie with an older epoch is fenced; a
read_committed consumer (confluent-kafka) sees only the committed data, and a transaction
version 1 client (confluent-kafka, AddPartitionsToTxn + EndTxn v<=4) keeps working on the same
broker. A cluster that finalized transaction.version 1 serves the same requests with version 1
rules: no implicit add, no epoch bump."""

from __future__ import annotations

import dataclasses

import click
import pytest
import trio

from log.common.errors import ErrorCode
from log.protocol.api_versions import API_VERSIONS_REQUEST
from log.protocol.groups import OFFSET_FETCH_REQUEST
from log.protocol.transactions import END_TXN_REQUEST, TXN_OFFSET_COMMIT_REQUEST
from tests.broker.conftest import WireClient, fetch_body, markers, produce_body, start_broker
from tests.broker.test_transaction_clients import _read
from tests.broker.test_txn_coordinator import (
    PROPS,
    TV1_CLUSTER,
    add_partitions,
    find_coordinator,
)
from tests.broker.test_txn_verification import init, txn_batch

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

ET = END_TXN_REQUEST.cls
TO = TXN_OFFSET_COMMIT_REQUEST.cls
OF = OFFSET_FETCH_REQUEST.cls
TOPIC = "tv2"
GROUP = "tv2-group"


async def produce_v12(client: WireClient, tid: str, partition: int, batch: bytes) -> int:
    body = dataclasses.replace(produce_body(TOPIC, partition, batch, acks=-1), transactional_id=tid)
    answer = await client.call(0, 12, body)
    return answer.responses[0].partition_responses[0].error_code


async def end_txn_v5(client: WireClient, tid: str, pid: int, epoch: int, commit: bool):
    return await client.call(26, 5, ET(transactional_id=tid, producer_id=pid,
                                       producer_epoch=epoch, committed=commit))  # fmt: skip


async def txn_offset_commit(client: WireClient, version: int, tid: str, pid: int, epoch: int,
                            offset: int, **member: object) -> list[int]:  # fmt: skip
    body = TO(transactional_id=tid, group_id=GROUP, producer_id=pid, producer_epoch=epoch,
              topics=[TO.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=[
                  TO.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                     committed_metadata=None)])],
              **member)  # fmt: skip
    answer = await client.call(28, version, body)
    return [p.error_code for t in answer.topics for p in t.partitions]


async def committed_offset(client: WireClient) -> int:
    body = await client.call(9, 7, OF(group_id=GROUP, topics=[
        OF.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])], require_stable=True))  # fmt: skip
    partition = body.topics[0].partitions[0]
    return (
        -2
        if partition.error_code == ErrorCode.UNSTABLE_OFFSET_COMMIT
        else partition.committed_offset
    )


async def wait_markers(broker, partition: int, count: int) -> list[tuple[int, int, bool]]:
    with trio.fail_after(30):
        while len(markers(broker, TOPIC, partition)) < count:
            await trio.sleep(0.02)
    return markers(broker, TOPIC, partition)


def _confluent_tv1_transactions(bootstrap: str) -> None:
    """A transaction version 1 client: an aborted, then a committed transaction."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tv1-client"})
    producer.init_transactions(30)
    for outcome in ("abort", "commit"):
        producer.begin_transaction()
        for i in range(4):
            producer.produce(TOPIC, b"tv1-%s-%d" % (outcome.encode(), i), partition=i % 3)
        producer.flush(30)
        if outcome == "abort":
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)


async def test_a_tv2_transaction_bumps_the_epoch_and_adds_partitions_itself(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **PROPS)
    await broker.create_topic(TOPIC, partitions=3)
    client = await WireClient.connect(broker.port)
    # ApiVersions: v4 lists every supported feature, v3 only those whose min is not 0; both
    # carry the finalized levels of this new cluster (Kafka 4.0's defaults).
    v4 = await client.call(18, 4, API_VERSIONS_REQUEST.cls())
    assert {(f.name, f.min_version, f.max_version) for f in v4.supported_features} == {
        ("transaction.version", 0, 2), ("group.version", 0, 1),
    }  # fmt: skip
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in v4.finalized_features}
    assert finalized == {"transaction.version": (2, 2), "group.version": (1, 1)}
    assert v4.finalized_features_epoch >= 0
    v3 = await client.call(18, 3, API_VERSIONS_REQUEST.cls())
    assert v3.supported_features == [] and len(v3.finalized_features) == 2
    ranges = {k.api_key: k.max_version for k in v4.api_keys}
    assert (ranges[0], ranges[26], ranges[28]) == (13, 5, 5)

    await find_coordinator(client, "tv2")
    await find_coordinator(client, GROUP, key_type=0)
    first = await init(client, "tv2")
    pid, epoch = first.producer_id, first.producer_epoch

    # Transaction 1: Produce v12 to two partitions nobody added, offsets without
    # AddOffsetsToTxn, then commit: the answer is the epoch to continue with.
    assert await produce_v12(client, "tv2", 0, txn_batch(pid, epoch, 0, b"tv2-commit-0")) == 0
    assert await produce_v12(client, "tv2", 1, txn_batch(pid, epoch, 0, b"tv2-commit-1")) == 0
    assert await produce_v12(client, "tv2", 0, txn_batch(pid, epoch, 1, b"tv2-commit-2")) == 0
    assert await txn_offset_commit(client, 5, "tv2", pid, epoch, 42) == [0]
    assert await committed_offset(client) == -2  # pending in the open transaction
    ended = await end_txn_v5(client, "tv2", pid, epoch, commit=True)
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (0, pid, epoch + 1)
    # The markers carry the bumped epoch; the offsets become visible once theirs lands.
    assert await wait_markers(broker, 0, 1) == [(pid, epoch + 1, True)]
    assert await wait_markers(broker, 1, 1) == [(pid, epoch + 1, True)]
    with trio.fail_after(30):
        while await committed_offset(client) != 42:
            await trio.sleep(0.02)
    # A retried EndTxn (its epoch one below) is answered as the first was, once the
    # coordinator has logged the commit complete (the markers land before that record does;
    # until then CONCURRENT_TRANSACTIONS, which clients retry: seen on a slow box).
    with trio.fail_after(30):
        while (retried := await end_txn_v5(client, "tv2", pid, epoch, commit=True)).error_code == (
            ErrorCode.CONCURRENT_TRANSACTIONS
        ):
            await trio.sleep(0.02)
    assert (retried.error_code, retried.producer_epoch) == (0, epoch + 1)

    # Transaction 2 with the new epoch (sequences start again at 0), aborted: epoch + 2.
    epoch += 1
    assert await produce_v12(client, "tv2", 0, txn_batch(pid, epoch, 0, b"tv2-abort-0")) == 0
    assert await produce_v12(client, "tv2", 2, txn_batch(pid, epoch, 0, b"tv2-abort-1")) == 0
    aborted = await end_txn_v5(client, "tv2", pid, epoch, commit=False)
    assert (aborted.error_code, aborted.producer_epoch) == (0, epoch + 1)
    assert (await wait_markers(broker, 0, 2))[-1] == (pid, epoch + 1, False)
    assert await wait_markers(broker, 2, 1) == [(pid, epoch + 1, False)]

    # A zombie still on an older epoch is fenced everywhere: by the partition that saw the
    # bumped marker, by the coordinator for a partition it would add, and at EndTxn.
    zombie = epoch
    code = await produce_v12(client, "tv2", 0, txn_batch(pid, zombie, 5, b"zombie"))
    assert code == ErrorCode.INVALID_PRODUCER_EPOCH
    code = await produce_v12(client, "tv2", 1, txn_batch(pid, zombie - 1, 9, b"zombie"))
    assert code == ErrorCode.INVALID_PRODUCER_EPOCH
    fenced = await end_txn_v5(client, "tv2", pid, zombie - 1, commit=True)
    assert (fenced.error_code, fenced.producer_epoch) == (ErrorCode.PRODUCER_FENCED, -1)
    assert await txn_offset_commit(client, 5, "tv2", pid, zombie - 1, 7) != [0]

    # A transaction version 1 client on the same broker, then read_committed reads.
    await trio.to_thread.run_sync(_confluent_tv1_transactions, broker.bootstrap)
    values = await trio.to_thread.run_sync(_read, broker.bootstrap, TOPIC, 3, "read_committed", 6)
    assert sorted(values) == sorted(
        [b"tv2-commit-0", b"tv2-commit-1", b"tv2-commit-2"]
        + [b"tv1-commit-%d" % i for i in range(4)]
    )
    # read_committed Fetch names the aborted TV2 transaction on partition 0.
    body = dataclasses.replace(fetch_body(TOPIC, 0, 3), isolation_level=1)
    data = (await client.call(1, 11, body)).responses[0].partitions[0]
    assert (pid, 3) in {(a.producer_id, a.first_offset) for a in data.aborted_transactions}
    await client.aclose()


async def test_a_tv1_cluster_keeps_version_1_rules_for_tv2_requests(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **PROPS, **TV1_CLUSTER)
    await broker.create_topic(TOPIC, partitions=2)
    client = await WireClient.connect(broker.port)
    v4 = await client.call(18, 4, API_VERSIONS_REQUEST.cls())
    finalized = {f.name: f.max_version_level for f in v4.finalized_features}
    assert finalized == {"transaction.version": 1, "group.version": 1}
    await find_coordinator(client, "tv1")
    await find_coordinator(client, GROUP, key_type=0)
    first = await init(client, "tv1")
    pid, epoch = first.producer_id, first.producer_epoch
    # Produce v12 to a partition not added: verified, not added (TRANSACTION_ABORTABLE).
    code = await produce_v12(client, "tv1", 0, txn_batch(pid, epoch, 0))
    assert code == ErrorCode.TRANSACTION_ABORTABLE
    assert broker.server.ctx.replica_manager.get(TOPIC, 0).log.log_end_offset == 0
    # TxnOffsetCommit v5 without AddOffsetsToTxn: refused as v4 would be.
    assert await txn_offset_commit(client, 5, "tv1", pid, epoch, 3) != [0]
    # KIP-447 (v3+): a commit naming a generation of a group with no such member is fenced.
    codes = await txn_offset_commit(client, 3, "tv1", pid, epoch, 3, generation_id=5,
                                    member_id="ghost")  # fmt: skip
    assert codes == [ErrorCode.ILLEGAL_GENERATION]
    # EndTxn v5 aborting nothing is INVALID_TXN_STATE under version 1 (TV2 would bump).
    ended = await end_txn_v5(client, "tv1", pid, epoch, commit=False)
    assert ended.error_code == ErrorCode.INVALID_TXN_STATE
    # The version 1 way works and EndTxn v5 answers the unchanged epoch.
    added = await client.call(24, 3, add_partitions("tv1", pid, epoch, TOPIC, [0]))
    assert [p.partition_error_code for t in added.results_by_topic_v3_and_below
            for p in t.results_by_partition] == [0]  # fmt: skip
    assert await produce_v12(client, "tv1", 0, txn_batch(pid, epoch, 0)) == 0
    ended = await end_txn_v5(client, "tv1", pid, epoch, commit=True)
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (0, pid, epoch)
    assert await wait_markers(broker, 0, 1) == [(pid, epoch, True)]
    await client.aclose()


async def test_update_features_changes_the_transaction_version_of_a_running_cluster(
    nursery, tmp_path
):
    """kafka-features.sh's requests (the `quorumlog features` functions over our AdminClient):
    describe, a refused upgrade, a safe downgrade to version 1 that the partition leaders
    follow at once (Produce v12 no longer adds a partition), and the upgrade back."""
    from tools.admin_client import AdminClient
    from tools.features_cmd import describe_features, update_features

    broker = await start_broker(nursery, tmp_path, **PROPS)
    await broker.create_topic(TOPIC, partitions=1)
    client = await WireClient.connect(broker.port)
    await find_coordinator(client, "tv")
    async with AdminClient(broker.bootstrap) as admin:
        rows = {r["feature"]: r for r in await describe_features(admin)}
        assert rows["transaction.version"]["finalized_version_level"] == 2
        assert rows["transaction.version"]["supported_max_version"] == 2
        for levels, kind, needle in [
            ({"transaction.version": 3}, 1, "outside the supported levels 0-2"),
            ({"transaction.version": 1}, 1, "without setting the upgrade type"),
            ({"group.version": 0}, 2, "group.version is fixed at 1"),
            ({"no.such.feature": 1}, 1, "unknown feature"),
        ]:
            with pytest.raises(click.ClickException, match=needle):
                await update_features(admin, levels, kind, dry_run=False)
        await update_features(admin, {"transaction.version": 1}, 2, dry_run=True)
        assert (await describe_features(admin))[1]["finalized_version_level"] == 2
        await update_features(admin, {"transaction.version": 1}, 2, dry_run=False)
        rows = {r["feature"]: r for r in await describe_features(admin)}
        assert rows["transaction.version"]["finalized_version_level"] == 1
        first = await init(client, "tv")
        pid, epoch = first.producer_id, first.producer_epoch
        code = await produce_v12(client, "tv", 0, txn_batch(pid, epoch, 0))
        assert code == ErrorCode.TRANSACTION_ABORTABLE
        await update_features(admin, {"transaction.version": 2}, 1, dry_run=False)
        assert await produce_v12(client, "tv", 0, txn_batch(pid, epoch, 0)) == 0
        ended = await end_txn_v5(client, "tv", pid, epoch, commit=True)
        assert (ended.error_code, ended.producer_epoch) == (0, epoch + 1)
    await client.aclose()


async def test_tv2_adds_partitions_even_with_verification_disabled(nursery, tmp_path):
    """Without the add nobody puts the partition in the transaction (its marker would never
    come), so transaction.partition.verification.enable=false does not switch it off."""
    props = {**PROPS, "transaction.partition.verification.enable": False}
    broker = await start_broker(nursery, tmp_path, **props)
    await broker.create_topic(TOPIC, partitions=1)
    client = await WireClient.connect(broker.port)
    await find_coordinator(client, "tv")
    first = await init(client, "tv")
    pid, epoch = first.producer_id, first.producer_epoch
    assert await produce_v12(client, "tv", 0, txn_batch(pid, epoch, 0)) == 0
    ended = await end_txn_v5(client, "tv", pid, epoch, commit=True)
    assert (ended.error_code, ended.producer_epoch) == (0, epoch + 1)
    assert await wait_markers(broker, 0, 1) == [(pid, epoch + 1, True)]
    await client.aclose()
