"""transactional.id expiration in the TransactionCoordinator core (Kafka's
removeExpiredTransactionalIds): ids at rest and idle for transactional.id.expiration.ms are
tombstoned and forgotten; open or recently used ones are kept; a failed write keeps the id."""

from __future__ import annotations

from log.common.errors import ErrorCode
from log.coordinator.transaction_coordinator import AppendOrigin, replay
from tests.coordinator.test_transaction_coordinator import A0, ABORT, COMMIT, Broker

E = ErrorCode
EXPIRATION_MS = 10_000


def expire(b: Broker) -> list:
    return b.c.expired_transactional_ids(b.now_ms, EXPIRATION_MS)


def test_idle_ids_at_rest_are_tombstoned_and_forgotten():
    b = Broker()
    empty = b.init("empty")
    committed = b.init("committed")
    b.add(committed.producer_id, committed.producer_epoch, tid="committed")
    assert (
        b.end(committed.producer_id, committed.producer_epoch, COMMIT, tid="committed").error == 0
    )
    aborted = b.init("aborted")
    b.add(aborted.producer_id, aborted.producer_epoch, tid="aborted")
    assert b.end(aborted.producer_id, aborted.producer_epoch, ABORT, tid="aborted").error == 0
    assert expire(b) == []  # not idle long enough
    b.now_ms += EXPIRATION_MS
    steps = expire(b)
    assert sorted(s.append.transactional_id for s in steps) == ["aborted", "committed", "empty"]
    assert all(s.append.value is None for s in steps)  # tombstones
    assert all(s.append.origin == AppendOrigin.EXPIRE_TRANSACTIONAL_ID for s in steps)
    # While the tombstone is being written the id is busy.
    busy = b.c.handle_init_producer_id("empty", 1000, b.tick())
    assert busy.response.error == E.CONCURRENT_TRANSACTIONS
    for step in steps:
        assert b.write(step).response is None
    assert b.state("empty") is None and b.state("committed") is None
    assert replay(b.log) == {}  # the tombstones win on reload
    again = b.init("empty")  # starts afresh: a new producer id
    assert again.error == 0 and again.producer_id not in (
        empty.producer_id, committed.producer_id, aborted.producer_id,
    )  # fmt: skip


def test_open_transactions_and_failed_tombstones_keep_the_id():
    b = Broker()
    open_txn = b.init("open")
    b.add(open_txn.producer_id, open_txn.producer_epoch, (A0,), tid="open")
    rest = b.init("rest")
    b.now_ms += EXPIRATION_MS
    steps = expire(b)
    assert [s.append.transactional_id for s in steps] == ["rest"]  # Ongoing is never expired
    assert b.write(steps[0], E.NOT_ENOUGH_REPLICAS).response is None
    state = b.state("rest")
    assert state is not None and state.pending_state is None
    assert state.producer_id == rest.producer_id
    assert [s.append.transactional_id for s in expire(b)] == ["rest"]  # tried again later
