"""transactional.id.expiration.ms through one in-process broker: an id left at rest longer than
the expiration is tombstoned in __transaction_state, DescribeTransactions no longer knows it, and
a new InitProducerId for it gets a new producer id."""

from __future__ import annotations

import trio

from log.common.errors import ErrorCode
from log.protocol.transaction_admin import DESCRIBE_TRANSACTIONS_REQUEST
from tests.broker.conftest import WireClient, start_broker
from tests.broker.test_txn_coordinator import PROPS, find_coordinator
from tests.broker.test_txn_verification import init

DT = DESCRIBE_TRANSACTIONS_REQUEST.cls


async def test_an_idle_transactional_id_expires(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **PROPS, **{
        "transactional.id.expiration.ms": 200,
        "transaction.remove.expired.transaction.cleanup.interval.ms": 50,
    })  # fmt: skip
    client = await WireClient.connect(broker.port)
    await find_coordinator(client, "idle")
    first = await init(client, "idle")
    assert first.error_code == 0
    with trio.fail_after(30):
        while True:
            body = await client.call(65, 0, DT(transactional_ids=["idle"]))
            code = body.transaction_states[0].error_code
            if code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                break
            assert code == 0
            await trio.sleep(0.05)
    partition = broker.server.transaction_coordinator.core.partition_for("idle")
    records = broker.server.transaction_coordinator._read_partition(
        broker.server.ctx.replica_manager.get("__transaction_state", partition)
    )
    assert records[-1][1] is None  # the last record of the id's partition is its tombstone
    again = await init(client, "idle")
    assert again.error_code == 0 and again.producer_id != first.producer_id
    await client.aclose()
