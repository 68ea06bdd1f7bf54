"""Our producer's transactions against one in-process broker: begin / send / commit or abort,
KIP-939's prepare (flush, leave open) ended from another client by (transactional id, producer
id, epoch), and FetchClient's read_committed (last stable offset, aborted records dropped)."""

from __future__ import annotations

import pytest
import trio

from log.common.errors import ErrorCode, KafkaError
from producer.fetch_client import READ_COMMITTED, FetchClient
from producer.producer import Producer
from producer.transaction_client import TransactionClient
from tests.broker.conftest import start_broker

PROPS = {
    "transaction.state.log.num.partitions": 3,
    "offsets.topic.num.partitions": 3,
    "transaction.two.phase.commit.enable": True,
}


async def values(bootstrap: str, topic: str, partitions: int, isolation: int) -> list[bytes]:
    async with FetchClient(bootstrap, isolation_level=isolation) as client:
        out = []
        for partition in range(partitions):
            out += [r.value for r in await client.read_all(topic, partition)]
        return sorted(out)


async def committed_when(bootstrap: str, topic: str, partitions: int, count: int) -> list[bytes]:
    """read_committed values once `count` are visible (the markers land after EndTxn)."""
    while len(seen := await values(bootstrap, topic, partitions, READ_COMMITTED)) < count:
        await trio.sleep(0.05)
    return seen


def rows(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i:04d}".encode() for i in range(n)]


async def test_transactions_commit_abort_and_prepare(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **PROPS)
    await broker.create_topic("out", partitions=2)
    bootstrap = broker.bootstrap

    async with Producer(bootstrap, transactional_id="plain", linger_ms=0) as producer:
        with pytest.raises(KafkaError) as outside:
            await producer.send_many("out", rows("x", 1))
        assert outside.value.error_code == ErrorCode.INVALID_TXN_STATE
        await producer.init_transactions()
        producer.begin_transaction()
        await (await producer.send_many("out", rows("a", 60), keys=rows("k", 60))).wait()
        await producer.commit_transaction()
        producer.begin_transaction()
        await (await producer.send_many("out", rows("b", 40), keys=rows("k", 40))).wait()
        await producer.abort_transaction()
    assert await committed_when(bootstrap, "out", 2, 60) == rows("a", 60)
    uncommitted = await values(bootstrap, "out", 2, 0)
    assert len(uncommitted) == 100  # the aborted records are in the log, not visible

    # KIP-939: prepare, then the producer goes away; the transaction stays open (LSO held).
    async with Producer(
        bootstrap, transactional_id="job-1-p0", transaction_two_phase_commit_enable=True,
        linger_ms=0,
    ) as producer:  # fmt: skip
        await producer.init_transactions()
        producer.begin_transaction()
        await (await producer.send_many("out", rows("c", 30), keys=rows("k", 30))).wait()
        producer_id, epoch = await producer.prepare_transaction()
    assert await values(bootstrap, "out", 2, READ_COMMITTED) == rows("a", 60)

    async with TransactionClient.open(bootstrap) as client:
        init = await client.init_producer_id("job-1-p0", 60_000, enable_2pc=True,
                                             keep_prepared_txn=True)  # fmt: skip
        assert init.ongoing == (producer_id, epoch)
        await client.end_txn("job-1-p0", producer_id, epoch, commit=True)
    assert await committed_when(bootstrap, "out", 2, 90) == sorted(rows("a", 60) + rows("c", 30))

    # A prepared transaction aborted by another process: a plain 2PC init aborts and fences.
    async with Producer(
        bootstrap, transactional_id="job-1-p1", transaction_two_phase_commit_enable=True,
        linger_ms=0,
    ) as producer:  # fmt: skip
        await producer.init_transactions()
        producer.begin_transaction()
        await (await producer.send_many("out", rows("d", 20), keys=rows("k", 20))).wait()
        await producer.prepare_transaction()
        async with TransactionClient.open(bootstrap) as client:
            await client.init_producer_id("job-1-p1", 60_000, enable_2pc=True)
        with pytest.raises(KafkaError):  # fenced
            await producer.commit_transaction()
    # the abort's markers unblock the LSO: everything up to the log end is decided
    async with FetchClient(bootstrap, isolation_level=READ_COMMITTED) as fetch:
        for partition in range(2):
            async with FetchClient(bootstrap) as plain:
                end = await plain.latest_offset("out", partition)
            while await fetch.latest_offset("out", partition) < end:
                await trio.sleep(0.05)
    assert await values(bootstrap, "out", 2, READ_COMMITTED) == sorted(
        rows("a", 60) + rows("c", 30)
    )
