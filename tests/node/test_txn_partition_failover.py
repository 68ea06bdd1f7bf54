"""Transactions on 3 real nodes: a partition holding committed, aborted and open transactions
loses its leader to kill -9. A read_committed confluent-kafka consumer sees exactly the same
committed records through the new leader, and the killed node's directory, recovered as after
the crash, holds the same aborted transactions (.txnindex rebuilt) and the open transaction."""

from __future__ import annotations

import time

import pytest
import trio
from cluster_harness import Cluster, wait_until

from log.common.errors import ErrorCode
from log.storage.config import LogConfig
from log.storage.manager import LogManager
from tests.broker.conftest import WireClient, produce_body
from tests.broker.test_txn_clients import batch, confluent_read
from tests.broker.test_txn_markers import codes, markers_body

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TOPIC = "txn-fo"
COMMITTED, ABORTED, OPEN = 41, 42, 43


async def write(port: int) -> tuple[list[str], int]:
    """Transactions through the leader at `port`; (committed values, the open one's offset)."""
    client = await WireClient.connect(port)
    sequences: dict[int, int] = {}

    async def produce(values: list[str], producer_id: int = -1) -> int:
        sequence = sequences.get(producer_id, 0) if producer_id >= 0 else -1
        records = batch(values, producer_id, sequence)
        body = await client.call(0, 8, produce_body(TOPIC, 0, records, acks=-1))
        answer = body.responses[0].partition_responses[0]
        assert answer.error_code == ErrorCode.NONE, answer
        sequences[producer_id] = sequence + len(values)
        return answer.base_offset

    async def end(producer_id: int, commit: bool) -> None:
        body = await client.call(27, 1, markers_body((producer_id, 0, commit, 2, {TOPIC: [0]})))
        assert set(codes(body).values()) == {ErrorCode.NONE}, body

    committed: list[str] = []
    for round_ in range(20):
        values = [f"c{round_}-{i}" for i in range(3)]
        await produce(values, COMMITTED)
        await produce([f"a{round_}"], ABORTED)
        await end(ABORTED, False)
        await end(COMMITTED, True)
        committed += values
    open_offset = await produce(["open"], OPEN)
    await produce(["plain"])  # above the LSO
    await client.aclose()
    return committed, open_offset


async def test_kill9_partition_leader_keeps_read_committed_view(tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = Cluster(tmp_path, 3)
    cluster.start_all()
    bootstrap = cluster.layout.bootstrap_servers

    def create() -> None:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=3)])[
            TOPIC
        ].result(timeout=30)

    await trio.to_thread.run_sync(create)

    async def leader_of(node_id: int) -> int:
        image = await cluster.image_from(node_id)
        topic = image.topic(TOPIC)
        return -1 if topic is None else topic.partitions[0].leader

    async def has_leader() -> bool:
        return await leader_of(1) > 0

    assert await wait_until(has_leader, 30)
    leader = await leader_of(1)
    committed, open_offset = await write(cluster.layout.kafka_port(leader))
    with trio.fail_after(60):
        before = await trio.to_thread.run_sync(confluent_read, bootstrap, TOPIC, "read_committed")
    assert before == committed

    cluster.kill9(leader)
    survivor = next(n for n in (1, 2, 3) if n != leader)

    async def moved() -> bool:
        return await leader_of(survivor) not in (leader, -1)

    assert await wait_until(moved, 30)
    deadline = time.monotonic() + 60
    while True:  # librdkafka needs a metadata refresh to find the new leader
        after = await trio.to_thread.run_sync(confluent_read, bootstrap, TOPIC, "read_committed")
        if after == committed or time.monotonic() > deadline:
            break
        await trio.sleep(0.5)
    assert after == committed

    # The killed node's directory, recovered as its next start would (no clean-shutdown mark).
    log = LogManager(cluster.config(leader).log_dir, LogConfig(), now_ms=0).get_log(TOPIC, 0)
    assert log is not None
    aborted = log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset)
    assert [t.producer_id for t in aborted] == [ABORTED] * 20
    assert log.producer_state_manager.ongoing_txns == {open_offset: OPEN}
    cluster.stop_all()
