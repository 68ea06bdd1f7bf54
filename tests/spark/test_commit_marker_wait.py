"""The exactly-once commit waits for the winners' COMMIT markers (issue 17).

EndTxn answers once the coordinator has written its decision; the COMMIT markers that make the
rows readable follow. `commit_job` returns only once no winner is left in PrepareCommit, so a
read_committed read right after it sees the job's whole output.

Here the markers cannot be written for a while: the output topic has replication factor 3 and
min.insync.replicas 3, and one of its followers (neither the partition's leader nor the
winners' transaction coordinator) is SIGSTOPped after the tasks prepared. Once the controller
has fenced it and shrunk the ISR, the leader refuses the markers (NOT_ENOUGH_REPLICAS) while it
stays responsive, so a read_committed read through it would see none of the rows. The follower
is resumed only after commit_job had the chance to return early (HOLD_S; the correct commit
cannot return then), it catches up, the markers go in, and only then may commit_job return.
Plain trio + the writer's producer, no Spark session: it uses this directory's 2PC cluster.
"""

from __future__ import annotations

import functools
import os
import signal

import pytest
import trio
from cluster_harness import wait_until

from log.common.errors import ErrorCode
from log.protocol.coordinator import find_coordinator_request, single_coordinator
from log.protocol.metadata import METADATA_REQUEST
from producer.transaction_client import TransactionClient
from quorum import controller as c
from spark.exactly_once import PreparedTxn, commit_job, ensure_intent_topic, transactional_id
from tests.broker.conftest import WireClient
from tests.broker.test_txn_clients import confluent_read

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TOPIC = "eos-marker-wait"
TASKS = 2
ROWS_PER_TASK = 100
# How long the follower stays stopped once the decision is durable, giving a commit that does
# not wait for its markers the time to return (and its read to come back short). A correct
# commit_job cannot return then, so the test's outcome never depends on this.
HOLD_S = 2.0
TRANSACTION = 1  # FindCoordinator's key type of a transactional id


async def _create_topic(cluster) -> None:
    client = cluster.client()
    try:
        with trio.fail_after(30):
            topic = c.CreatableTopic(TOPIC, 1, 3, {"min.insync.replicas": "3"})
            response = await client.create_topics(c.CreateTopicsRequest((topic,)))
    finally:
        await client.aclose()
    assert response.results[0].error_code == 0, response


def _prepare(bootstrap: str, txn_id: str, values: list[bytes]) -> PreparedTxn:
    """What an exactlyOnce write task does: write in a 2PC transaction, flush, prepare."""
    from producer.sync_producer import SyncProducer

    producer = SyncProducer(
        config={"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                "transaction.two.phase.commit.enable": "true"}
    )  # fmt: skip
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for value in values:
            producer.send(TOPIC, value, partition=0)
        producer.flush()
        producer_id, epoch = producer.prepare_transaction()
    finally:
        producer.close(0)
    return PreparedTxn(txn_id, producer_id, epoch)


async def _follower_gone(cluster, node: int, follower: int) -> bool:
    """Whether broker `node`'s Metadata lists neither the follower nor it in TOPIC's ISR."""
    M = METADATA_REQUEST.cls  # noqa: N806
    wire = await WireClient.connect(cluster.layout.kafka_port(node))
    try:
        request = M(topics=[M.MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False)
        body = await wire.call(3, 8, request)
    finally:
        await wire.aclose()
    listed = {b.node_id for b in body.brokers}
    return follower not in listed and follower not in body.topics[0].partitions[0].isr_nodes


async def test_commit_job_returns_only_once_the_commit_markers_are_written(cluster):
    bootstrap = cluster.layout.bootstrap_servers
    await trio.to_thread.run_sync(ensure_intent_topic, bootstrap)
    await _create_topic(cluster)
    nodes = list(cluster.layout.node_ids)

    async def fully_replicated():
        current = await cluster.image_from(nodes[0])
        topic = current.topic(TOPIC)
        partition = None if topic is None else topic.partitions.get(0)
        return current if partition is not None and len(partition.isr) == 3 else None

    current = await wait_until(fully_replicated, 60)
    leader = current.topic(TOPIC).partitions[0].leader
    # the stopped follower: not the leader, and not the controller where there is a choice
    followers = [n for n in nodes if n != leader]
    follower = next((n for n in followers if n != current.controller_id), followers[0])
    # a job whose winners' coordinators stay up, so the decision goes through at once
    wire = await WireClient.connect(cluster.layout.kafka_port(leader))
    try:

        async def coordinator(txn_id: str) -> int:
            while True:  # the first FindCoordinator creates __transaction_state
                body = await wire.call(10, 4, find_coordinator_request(txn_id, TRANSACTION))
                code, node_id, _host, _port = single_coordinator(body)
                if code == ErrorCode.NONE:
                    return node_id
                assert code in (ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), body  # fmt: skip
                await trio.sleep(0.1)

        with trio.fail_after(60):
            for job_id in (f"marker-wait-{i}" for i in range(1000)):
                ids = [transactional_id(job_id, p, 0) for p in range(TASKS)]
                if follower not in [await coordinator(t) for t in ids]:
                    break
    finally:
        await wire.aclose()
    values = [[f"{p}-{i}".encode() for i in range(ROWS_PER_TASK)] for p in range(TASKS)]
    prepared = [
        await trio.to_thread.run_sync(_prepare, bootstrap, transactional_id(job_id, p, 0), rows)
        for p, rows in enumerate(values)
    ]
    winner_ids = {t.transactional_id for t in prepared}
    # clients of the live nodes only (a stopped node accepts connections but never answers)
    live = ",".join(
        f"{cluster.layout.host(n)}:{cluster.layout.kafka_port(n)}" for n in nodes if n != follower
    )
    leader_only = f"{cluster.layout.host(leader)}:{cluster.layout.kafka_port(leader)}"

    pid = cluster.processes[follower].pid
    os.kill(pid, signal.SIGSTOP)
    try:

        async def follower_out_of_isr():
            current = await cluster.image_from(leader)
            partition = current.topic(TOPIC).partitions[0]
            return current.brokers[follower].fenced and follower not in partition.isr

        await wait_until(follower_out_of_isr, 60)

        async def live_brokers_know():  # so no client below is sent to the stopped node
            for node in nodes:
                if node != follower and not await _follower_gone(cluster, node, follower):
                    return False
            return True

        await wait_until(live_brokers_know, 60)

        returned = trio.Event()
        read_done = trio.Event()
        seen: list[str] = []

        async def commit_then_read():
            assert await commit_job(live, job_id, prepared)
            returned.set()
            # a read_committed read right after the commit returned (a real Kafka client)
            polls = TASKS * ROWS_PER_TASK + 300  # a hang guard: 300 empty polls of 0.2 s
            read = functools.partial(confluent_read, polls=polls)
            seen.extend(await trio.to_thread.run_sync(read, leader_only, TOPIC, "read_committed"))
            read_done.set()

        async with TransactionClient.open(live) as client:

            async def decided_markers_pending():
                listed = await client.list_transactions(["PrepareCommit"])
                return winner_ids <= {tid for tid, _pid, _state in listed}

            async with trio.open_nursery() as nursery:
                nursery.start_soon(commit_then_read)
                # decided, markers held back (were they written, this would time out)
                await wait_until(decided_markers_pending, 120)
                with trio.move_on_after(HOLD_S):
                    await returned.wait()
                if returned.is_set():  # commit_job returned with its markers unwritten
                    await read_done.wait()
                os.kill(pid, signal.SIGCONT)
    finally:
        os.kill(pid, signal.SIGCONT)

    expected = sorted(v.decode() for rows in values for v in rows)
    assert sorted(seen) == expected, f"read right after the commit: {len(seen)} rows"

    async def follower_back():
        current = await cluster.image_from(leader)
        return not current.brokers[follower].fenced and follower in (
            current.topic(TOPIC).partitions[0].isr
        )

    await wait_until(follower_back, 60)  # the shared cluster is whole again for the next test
