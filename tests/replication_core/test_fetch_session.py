"""Fetch sessions (KIP-227): the leader's cache and the fetcher's handler, against each other."""

from __future__ import annotations

from log.common.errors import ErrorCode
from log.replication.fetch_session import (
    CachedPartition,
    FetchSessionCache,
    update_session,
)
from log.replication.fetch_session_handler import FetchSessionHandler
from log.replication.follower_state import PartitionFetch


def fetch(offset: int, epoch: int = 1) -> PartitionFetch:
    return PartitionFetch(offset, epoch, 0, 1000)


def cached(f: PartitionFetch) -> CachedPartition:
    return CachedPartition(
        f.fetch_offset, f.log_start_offset, f.partition_max_bytes, f.current_leader_epoch
    )


def exchange(handler: FetchSessionHandler, cache: FetchSessionCache, fetches: dict,
             may_create: bool = True):  # fmt: skip
    """One round trip; returns (request, decision) after both sides adopted it."""
    request = handler.build(fetches)
    decision = cache.decide(request.session_id, request.session_epoch, may_create)
    if decision.error != ErrorCode.NONE:
        assert not handler.on_response(decision.error, 0)
        return request, decision
    if decision.session is not None:
        update_session(
            decision.session,
            [(tp, cached(f)) for tp, f in request.to_send.items()],
            request.forgotten,
            full=not decision.incremental,
        )
    assert handler.on_response(ErrorCode.NONE, decision.response_session_id)
    return request, decision


def test_full_then_incremental_names_only_changes_and_forgets_removed() -> None:
    handler, cache = FetchSessionHandler(), FetchSessionCache()
    a, b, c = ("t", 0), ("t", 1), ("t", 2)
    fetches = {a: fetch(0), b: fetch(0), c: fetch(5)}
    request, decision = exchange(handler, cache, fetches)
    assert request.full and set(request.to_send) == {a, b, c}
    assert decision.session is not None and not decision.incremental
    session = decision.session
    # Nothing changed: an incremental request naming nothing; the session keeps all three.
    request, decision = exchange(handler, cache, dict(fetches))
    assert request.session_epoch == 1 and request.to_send == {} and request.forgotten == []
    assert decision.incremental and set(session.partitions) == {a, b, c}
    # a advanced, c stopped (truncating / delayed): a is named, c forgotten.
    request, decision = exchange(handler, cache, {a: fetch(3), b: fetches[b]})
    assert request.session_epoch == 2 and set(request.to_send) == {a} and request.forgotten == [c]
    assert set(session.partitions) == {a, b} and session.partitions[a].fetch_offset == 3
    # c comes back at its offset: named again.
    request, _ = exchange(handler, cache, {a: fetch(3), b: fetches[b], c: fetch(5)})
    assert set(request.to_send) == {c}
    assert {tp: p.fetch_offset for tp, p in session.partitions.items()} == {a: 3, b: 0, c: 5}


def test_evicted_or_out_of_step_sessions_start_over_with_a_full_fetch() -> None:
    handler, cache = FetchSessionHandler(), FetchSessionCache(max_slots=1)
    a = ("t", 0)
    _, first = exchange(handler, cache, {a: fetch(0)})
    other = FetchSessionHandler()
    exchange(other, cache, {a: fetch(0)})  # takes the only slot: ours is evicted
    assert cache.evictions_total == 1
    request, decision = exchange(handler, cache, {a: fetch(1)})
    assert decision.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    request, decision = exchange(handler, cache, {a: fetch(1)})
    assert request.full and request.session_id == first.response_session_id
    assert decision.session is not None
    # An answer lost on the way: the leader moved its epoch on, the fetcher resets (its
    # connection dropped) and starts over with a full fetch, which closes the old session.
    session_id = decision.response_session_id
    lost = handler.build({a: fetch(2)})
    assert cache.decide(lost.session_id, lost.session_epoch, True).incremental
    handler.reset()
    request, decision = exchange(handler, cache, {a: fetch(2)})
    assert request.full and request.session_id == session_id
    assert session_id not in cache.sessions and decision.response_session_id in cache.sessions
    # A fetcher out of step with the leader's epoch is told so.
    stale = cache.decide(decision.response_session_id, 7, True)
    assert stale.error == ErrorCode.INVALID_FETCH_SESSION_EPOCH


def test_consumers_are_declined_and_stay_sessionless() -> None:
    handler, cache = FetchSessionHandler(), FetchSessionCache()
    for _ in range(3):
        request, decision = exchange(handler, cache, {("t", 0): fetch(0)}, may_create=False)
        assert request.full and decision.session is None and decision.response_session_id == 0
    assert not cache.sessions


def test_incremental_answers_carry_only_news() -> None:
    partition = CachedPartition(0, 0, 1000, 1)
    assert partition.must_respond(ErrorCode.NONE, 0, 5, 0)  # the HW moved (from unknown)
    assert not partition.must_respond(ErrorCode.NONE, 0, 5, 0)
    assert partition.must_respond(ErrorCode.NONE, 100, 5, 0)  # records
    assert partition.must_respond(ErrorCode.NONE, 0, 5, 2)  # log start moved
    assert partition.must_respond(ErrorCode.NOT_LEADER_OR_FOLLOWER, 0, -1, -1)
    assert not partition.must_respond(ErrorCode.NONE, 0, 5, 2)


def test_a_round_reads_only_named_signalled_or_unsettled_partitions_until_a_sweep() -> None:
    """The leader's side of O(changed) rounds: `candidates` are the partitions named by the
    request, marked dirty since (a partition signalled, or was not settled when read), or all
    of them once per sweep interval."""
    cache = FetchSessionCache(sweep_interval_ms=1000)
    session = cache.decide(0, 0, may_create=True).session
    assert session is not None
    keys = [("t", p) for p in range(5)]
    update_session(session, [(k, cached(fetch(0))) for k in keys], [], full=True)
    assert set(session.candidates(now_ms=0)) == set(keys)  # the first round reads all
    assert session.candidates(now_ms=10) == []  # nothing named, nothing signalled
    update_session(session, [(keys[1], cached(fetch(4)))], [], full=False)
    session.mark_dirty(keys[3])  # e.g. an append to t-3 woke the session
    session.mark_dirty(("other", 0))  # not in the session: ignored
    assert set(session.candidates(now_ms=20)) == {keys[1], keys[3]}
    assert session.candidates(now_ms=30) == []
    assert set(session.candidates(now_ms=1000)) == set(keys)  # the sweep
    assert session.candidates(now_ms=1001) == []
    # Closing the session (a new full fetch on its id) tells its watchers to let go.
    assert cache.decide(session.session_id, 0, may_create=True).session is not session
    assert session.evicted
