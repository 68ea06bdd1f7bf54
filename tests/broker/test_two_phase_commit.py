"""KIP-939 two-phase commit through the wire (one in-process broker, our ClientCodec):
InitProducerId v6's enable_2pc and keep_prepared_txn, the transaction timeout a 2PC transaction
is exempt from, and `transaction.two.phase.commit.enable` off."""

from __future__ import annotations

import trio

from log.common.errors import ErrorCode
from tests.broker.conftest import WireClient, start_broker
from tests.broker.test_txn_coordinator import (
    ET,
    IP,
    PROPS,
    add_partitions,
    find_coordinator,
    init,
    markers,
    partition_codes,
)

TWO_PC = {**PROPS, "transaction.two.phase.commit.enable": True}


async def init_v6(client: WireClient, tid: str, *, enable_2pc: bool, keep: bool = False):
    """InitProducerId v6, retried while the coordinator loads or aborts a fenced transaction."""
    request = IP(transactional_id=tid, transaction_timeout_ms=1000, enable2_pc=enable_2pc,
                 keep_prepared_txn=keep)  # fmt: skip
    while True:
        body = await client.call(22, 6, request)
        if body.error_code not in (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.CONCURRENT_TRANSACTIONS,
        ):
            return body
        await trio.sleep(0.05)


def state_of(broker, tid: str) -> str:
    metadata = broker.server.ctx.transaction_coordinator.core.transaction(tid)
    assert metadata is not None
    return metadata.state.kafka_name


async def test_a_prepared_transaction_is_kept_and_committed_by_another_client(nursery, tmp_path):
    broker = await start_broker(
        nursery, tmp_path, **TWO_PC,
        **{"transaction.abort.timed.out.transaction.cleanup.interval.ms": 50},
    )  # fmt: skip
    await broker.create_topic("out", partitions=2)
    writer = await WireClient.connect(broker.port)
    await find_coordinator(writer, "spark-0")
    await find_coordinator(writer, "plain")
    p = await init_v6(writer, "spark-0", enable_2pc=True)
    assert p.error_code == 0 and (p.ongoing_txn_producer_id, p.ongoing_txn_producer_epoch) == (
        -1, -1,
    )  # fmt: skip
    body = await writer.call(24, 1, add_partitions("spark-0", p.producer_id, p.producer_epoch,
                                                   "out", [0, 1]))  # fmt: skip
    assert partition_codes(body) == {("out", 0): 0, ("out", 1): 0}
    # A plain transaction asking the same 1 s timeout, opened after the 2PC one, times out and
    # is aborted; the older 2PC transaction stays open (it has no timeout).
    plain = await init(writer, "plain", timeout_ms=1000)
    body = await writer.call(24, 1, add_partitions("plain", plain.producer_id,
                                                   plain.producer_epoch, "out", [0]))  # fmt: skip
    assert partition_codes(body) == {("out", 0): 0}
    while state_of(broker, "plain") != "CompleteAbort":
        await trio.sleep(0.05)
    assert state_of(broker, "spark-0") == "Ongoing"
    await writer.aclose()

    # Another process: keep_prepared_txn answers the open transaction and leaves it open.
    committer = await WireClient.connect(broker.port)
    kept = await init_v6(committer, "spark-0", enable_2pc=True, keep=True)
    assert kept.error_code == 0
    ongoing = (kept.ongoing_txn_producer_id, kept.ongoing_txn_producer_epoch)
    assert ongoing == (p.producer_id, p.producer_epoch)
    assert (kept.producer_id, kept.producer_epoch) == ongoing
    assert state_of(broker, "spark-0") == "Ongoing"
    end = ET(transactional_id="spark-0", producer_id=kept.ongoing_txn_producer_id,
             producer_epoch=kept.ongoing_txn_producer_epoch, committed=True)  # fmt: skip
    assert (await committer.call(26, 1, end)).error_code == 0
    while state_of(broker, "spark-0") != "CompleteCommit":
        await trio.sleep(0.05)
    for partition in (0, 1):
        assert markers(broker, "out", partition)[-1] == (p.producer_id, p.producer_epoch, True)
    # Nothing open now: keep_prepared_txn is a plain (2PC) init, bumping the epoch.
    again = await init_v6(committer, "spark-0", enable_2pc=True, keep=True)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (
        0, p.producer_id, p.producer_epoch + 1,
    )  # fmt: skip
    assert (again.ongoing_txn_producer_id, again.ongoing_txn_producer_epoch) == (-1, -1)

    # Without keep_prepared_txn an open 2PC transaction is aborted, its writer fenced.
    body = await committer.call(24, 1, add_partitions("spark-0", again.producer_id,
                                                      again.producer_epoch, "out", [1]))  # fmt: skip
    assert partition_codes(body) == {("out", 1): 0}
    # (transaction version 2, the default: the fence bumps once, the abort once more, the new
    # instance's init once more)
    fresh = await init_v6(committer, "spark-0", enable_2pc=True)
    assert fresh.error_code == 0 and fresh.producer_epoch == again.producer_epoch + 3
    assert markers(broker, "out", 1)[-1] == (p.producer_id, again.producer_epoch + 2, False)

    # keep_prepared_txn needs enable_2pc; neither applies without a transactional id.
    assert (await committer.call(22, 6, IP(transactional_id="spark-0",
                                           transaction_timeout_ms=1000,
                                           keep_prepared_txn=True))).error_code == (
        ErrorCode.INVALID_REQUEST
    )  # fmt: skip
    body = await committer.call(22, 6, IP(transactional_id=None, transaction_timeout_ms=0,
                                          enable2_pc=True))  # fmt: skip
    assert body.error_code == ErrorCode.INVALID_REQUEST
    # v4/v5 clients are unaffected: no KIP-939 fields on their wire.
    v5 = await committer.call(22, 5, IP(transactional_id="v5", transaction_timeout_ms=1000))
    assert v5.error_code in (0, ErrorCode.NOT_COORDINATOR)
    await committer.aclose()


async def test_enable_2pc_is_refused_unless_the_node_allows_it(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **PROPS)
    client = await WireClient.connect(broker.port)
    await find_coordinator(client, "t")
    body = await init_v6(client, "t", enable_2pc=True)
    # KIP-939: an authorization failure, so that clients cannot probe the setting
    assert body.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert (await init_v6(client, "t", enable_2pc=False)).error_code == 0
    await client.aclose()
