from log.common.errors import ErrorCode
from log.replication.follower_state import (
    FETCHER_SWEEP_INTERVAL_MS,
    LEADER_CHANGE_RETRY_MS,
    EpochQuery,
    FetcherState,
    FetchState,
    FollowerState,
    RecordsMeta,
    TruncationDecision,
)
from tests.replication_core.memory_log import Batch, MemoryLog


def log_with(*epochs_and_counts: tuple[int, int]) -> MemoryLog:
    """A log with `count` one-record batches per `epoch`, in order."""
    log = MemoryLog()
    for epoch, count in epochs_and_counts:
        for _ in range(count):
            log.append_as_leader(f"e{epoch}", 1, epoch)
    return log


def truncating(log: MemoryLog, leader_epoch: int = 9) -> FollowerState:
    f = FollowerState(replica_fetch_backoff_ms=100)
    f.on_become_follower(leader_id=2, leader_epoch=leader_epoch, log=log)
    assert f.state is FetchState.TRUNCATING
    return f


def test_no_epoch_information_truncates_to_high_watermark():
    log = MemoryLog()
    f = truncating(log)
    assert f.truncation_request(log) == TruncationDecision(0)
    assert f.state is FetchState.FETCHING


def test_epoch_query_asks_for_latest_epoch():
    log = log_with((1, 2), (3, 2))
    f = truncating(log)
    assert f.truncation_request(log) == EpochQuery(current_leader_epoch=9, leader_epoch=3)


def test_leader_has_our_epoch_shorter():
    log = log_with((1, 2), (3, 4))  # epoch 3: offsets 2..5
    f = truncating(log)
    assert f.on_epoch_end_offset(3, 4, log) == TruncationDecision(4)
    assert f.state is FetchState.FETCHING


def test_leader_answers_older_epoch_uses_min_of_both_ends():
    log = log_with((1, 3), (3, 2))  # we: epoch 1 ends at 3
    f = truncating(log)
    # Leader never had epoch 3; its epoch 1 ended at 5 (beyond ours): cut at our end, 3.
    assert f.on_epoch_end_offset(1, 5, log) == TruncationDecision(3)
    f = truncating(log)
    assert f.on_epoch_end_offset(1, 2, log) == TruncationDecision(2)


def test_unknown_leader_epoch_truncates_in_steps():
    log = log_with((1, 2), (4, 2), (6, 2))
    f = truncating(log)
    # Leader answers epoch 5 (which we never had): cut where our epoch 4 ends, ask again.
    decision = f.on_epoch_end_offset(5, 7, log)
    assert decision == TruncationDecision(4, truncation_completed=False)
    assert f.state is FetchState.TRUNCATING
    log.truncate_to(decision.offset)
    assert f.truncation_request(log) == EpochQuery(9, 4)
    assert f.on_epoch_end_offset(4, 3, log) == TruncationDecision(3)


def test_undefined_answers():
    log = log_with((1, 4))
    log.update_high_watermark(2)
    f = truncating(log)
    assert f.on_epoch_end_offset(-1, -1, log) == TruncationDecision(2)  # fall back to HW
    f = truncating(log)
    assert f.on_epoch_end_offset(-1, 3, log) == TruncationDecision(3)  # old protocol: min
    f = truncating(log)
    assert f.on_epoch_end_offset(-1, 9, log) == TruncationDecision(4)


def test_stale_answer_ignored_once_fetching():
    log = log_with((1, 2))
    f = truncating(log)
    f.on_epoch_end_offset(1, 2, log)
    assert f.on_epoch_end_offset(1, 0, log) is None


def fetching(log: MemoryLog) -> FollowerState:
    f = truncating(log)
    f.on_epoch_end_offset(log.latest_epoch, log.log_end_offset, log)
    assert f.state is FetchState.FETCHING
    return f


def test_fetch_and_adopt_high_watermark_and_log_start():
    log = log_with((1, 2))
    f = fetching(log)
    request = f.build_fetch(log, 1024)
    assert (request.fetch_offset, request.current_leader_epoch, request.log_start_offset) == (
        2,
        9,
        0,
    )
    outcome = f.on_fetch_response(
        request, ErrorCode.NONE, 10, 1, RecordsMeta(2, 5, 300), log, now_ms=0
    )
    assert outcome.append and outcome.high_watermark == 5 and outcome.log_start_offset == 1
    log.append_as_follower([Batch(2, 4, 9, "x")])
    request = f.build_fetch(log, 1024)
    outcome = f.on_fetch_response(request, ErrorCode.NONE, 4, 0, None, log, now_ms=0)
    assert not outcome.append and outcome.high_watermark == 4 and outcome.log_start_offset is None


def test_lag_is_the_leader_high_watermark_last_seen_minus_our_log_end():
    log = log_with((1, 2))
    f = fetching(log)
    assert f.lag(log.log_end_offset) is None  # no fetch answered yet
    request = f.build_fetch(log, 1024)
    f.on_fetch_response(request, ErrorCode.NONE, 10, 0, RecordsMeta(2, 5, 300), log, now_ms=0)
    log.append_as_follower([Batch(2, 4, 9, "x")])
    assert f.lag(log.log_end_offset) == 5  # the leader's HW is 10, we hold offsets below 5
    request = f.build_fetch(log, 1024)
    f.on_fetch_response(request, ErrorCode.NOT_LEADER_OR_FOLLOWER, 99, 0, None, log, now_ms=0)
    assert f.lag(log.log_end_offset) == 5  # an error answer carries no high watermark
    f.leader_high_watermark = 3
    assert f.lag(log.log_end_offset) == 0


def test_empty_log_starting_inside_leader_batch_restarts_at_batch_base():
    log = MemoryLog()
    log.truncate_fully_and_start_at(5)  # leader's log start 5 is inside its batch 3..7
    f = fetching(log)
    request = f.build_fetch(log, 1024)
    outcome = f.on_fetch_response(request, ErrorCode.NONE, 8, 5, RecordsMeta(3, 8, 100), log, 0)
    assert outcome.truncation == TruncationDecision(3, fully=True)
    assert outcome.append and outcome.high_watermark == 8 and outcome.log_start_offset == 5


def test_non_contiguous_records_are_refused_and_backed_off():
    log = log_with((1, 2))
    f = fetching(log)
    request = f.build_fetch(log, 1024)
    outcome = f.on_fetch_response(request, ErrorCode.NONE, 9, 0, RecordsMeta(4, 6, 100), log, 0)
    assert not outcome.append and outcome.error is ErrorCode.UNKNOWN_SERVER_ERROR
    assert f.state is FetchState.DELAYED


def test_fetch_response_for_old_request_is_ignored():
    log = log_with((1, 2))
    f = fetching(log)
    request = f.build_fetch(log, 1024)
    log.append_as_follower([Batch(2, 2, 9, "x")])
    outcome = f.on_fetch_response(request, ErrorCode.NONE, 3, 0, RecordsMeta(2, 3, 70), log, 0)
    assert outcome.ignored and not outcome.append


def test_epoch_errors_back_off_briefly_and_resume_other_errors_wait_the_backoff():
    """An answer saying the two sides have not applied the same leader change yet retries
    after LEADER_CHANGE_RETRY_MS (a fail-over's acks=all must not wait a whole
    replica.fetch.backoff.ms for it); any other error backs off replica.fetch.backoff.ms."""
    log = log_with((1, 2))
    f = fetching(log)
    assert f.replica_fetch_backoff_ms > LEADER_CHANGE_RETRY_MS
    request = f.build_fetch(log, 1024)
    outcome = f.on_fetch_response(request, ErrorCode.FENCED_LEADER_EPOCH, 0, 0, None, log, 1_000)
    assert outcome.error is ErrorCode.FENCED_LEADER_EPOCH and f.state is FetchState.DELAYED
    assert not f.is_ready(1_000 + LEADER_CHANGE_RETRY_MS - 1)
    assert f.is_ready(1_000 + LEADER_CHANGE_RETRY_MS) and f.state is FetchState.FETCHING
    request = f.build_fetch(log, 1024)
    f.on_fetch_response(request, ErrorCode.KAFKA_STORAGE_ERROR, 0, 0, None, log, 2_000)
    assert not f.is_ready(2_000 + f.replica_fetch_backoff_ms - 1)
    assert f.is_ready(2_000 + f.replica_fetch_backoff_ms) and f.state is FetchState.FETCHING
    f.on_become_follower(3, 10, log)
    assert f.state is FetchState.TRUNCATING


def test_offset_out_of_range_resets_per_leader_offsets():
    log = log_with((1, 5))
    f = fetching(log)
    request = f.build_fetch(log, 1024)
    outcome = f.on_fetch_response(request, ErrorCode.OFFSET_OUT_OF_RANGE, 0, 0, None, log, 0)
    assert outcome.needs_leader_offsets
    assert f.on_leader_offsets(0, 3, log) == TruncationDecision(3)  # we are ahead of the leader
    assert f.on_leader_offsets(9, 20, log) == TruncationDecision(9, fully=True)  # leader deleted
    assert f.on_leader_offsets(2, 20, log) == TruncationDecision(5)  # in range now: keep going


def test_diverging_epoch_in_fetch_response_truncates():
    log = log_with((1, 2), (3, 3))
    f = fetching(log)
    request = f.build_fetch(log, 1024, use_last_fetched_epoch=True)
    assert request.last_fetched_epoch == 3
    outcome = f.on_fetch_response(
        request, ErrorCode.NONE, 2, 0, None, log, 0, diverging_epoch=(1, 3)
    )
    assert outcome.truncation == TruncationDecision(2)
    assert f.state is FetchState.FETCHING


def test_fetcher_names_every_ready_partition_least_recently_fed_first():
    fetcher = FetcherState(1, replica_fetch_max_bytes=100)
    logs = {}
    for tp in ("a", "b", "c", "d"):
        logs[tp] = MemoryLog()
        f = FollowerState()
        f.on_become_follower(1, 1, logs[tp])
        fetcher.add_partition(tp, f)
    assert fetcher.partitions_to_truncate(0) == ["a", "b", "c", "d"]
    for tp, state in fetcher.partitions.items():
        state.truncation_request(logs[tp])
    # Every partition is named, whatever the byte limits: the leader bounds the response.
    assert fetcher.partitions_to_fetch(0) == ["a", "b", "c", "d"]
    fetcher.mark_fetched("a")
    fetcher.mark_fetched("b")
    assert fetcher.partitions_to_fetch(0) == ["c", "d", "a", "b"]
    fetcher.partitions["c"].on_error(ErrorCode.UNKNOWN_SERVER_ERROR, 0)
    assert fetcher.next_wakeup_ms() == 1000
    assert fetcher.partitions_to_fetch(0) == ["d", "a", "b"]
    assert fetcher.partitions_to_fetch(1000) == ["c", "d", "a", "b"]


def test_fetcher_poll_truncates_queries_and_fetches():
    logs = {"empty": MemoryLog(), "epochs": log_with((2, 3)), "ready": log_with((1, 1))}
    fetcher = FetcherState(1)
    for tp, log in logs.items():
        f = FollowerState()
        f.on_become_follower(1, 4, log)
        fetcher.add_partition(tp, f)
    fetcher.partitions["ready"].on_epoch_end_offset(1, 1, logs["ready"])
    first = fetcher.poll(0, logs.__getitem__)
    assert first.truncate_now == {"empty": TruncationDecision(0)}
    assert first.epoch_queries == {"epochs": EpochQuery(4, 2)}
    assert list(first.fetch) == ["ready"] and first.fetch["ready"].fetch_offset == 1
    assert first.wakeup_ms is None
    second = fetcher.poll(0, logs.__getitem__)
    assert second.truncate_now == {} and set(second.fetch) == {"empty", "ready"}


def test_fetcher_poll_derives_only_changed_partitions_between_sweeps():
    """Between sweeps a poll reuses an untouched partition's fetch (O(changed) per round); what
    changed behind the fetcher's back (the log itself) shows at the next sweep."""
    logs = {tp: log_with((1, 2)) for tp in ("a", "b")}
    fetcher = FetcherState(1)
    for tp, log in logs.items():
        f = FollowerState()
        f.on_become_follower(1, 1, log)
        fetcher.add_partition(tp, f)
        f.on_epoch_end_offset(1, 2, log)
    first = fetcher.poll(0, logs.__getitem__)
    assert {tp: f.fetch_offset for tp, f in first.fetch.items()} == {"a": 2, "b": 2}
    # "a" is answered with a record (the core hears of it); "b" changes without it.
    outcome = fetcher.partitions["a"].on_fetch_response(
        first.fetch["a"], ErrorCode.NONE, 3, 0, RecordsMeta(2, 3, 70), logs["a"], 10
    )
    assert outcome.append
    logs["a"].append_as_follower([Batch(2, 2, 1, "x")])
    logs["b"].append_as_follower([Batch(2, 2, 1, "x")])
    second = fetcher.poll(20, logs.__getitem__)
    assert second.fetch["a"].fetch_offset == 3
    assert second.fetch["b"] is first.fetch["b"]  # untouched: not derived again
    swept = fetcher.poll(FETCHER_SWEEP_INTERVAL_MS, logs.__getitem__)
    assert {tp: f.fetch_offset for tp, f in swept.fetch.items()} == {"a": 3, "b": 3}
    # An error backs "a" off: left out until its back-off ends, then fetched again.
    fetcher.partitions["a"].on_error(ErrorCode.NOT_LEADER_OR_FOLLOWER, FETCHER_SWEEP_INTERVAL_MS)
    delayed = fetcher.poll(FETCHER_SWEEP_INTERVAL_MS + 1, logs.__getitem__)
    assert set(delayed.fetch) == {"b"} and delayed.wakeup_ms is not None
    resumed = fetcher.poll(delayed.wakeup_ms, logs.__getitem__)
    assert set(resumed.fetch) == {"a", "b"}


def test_a_failed_truncation_never_fetches_above_the_diverging_point():
    """The decision moved the partition to FETCHING; the driver could not cut the log (a
    storage error): it backs off and asks the leader again instead of fetching from its
    untruncated log end."""
    log = log_with((1, 2), (3, 4))
    f = truncating(log)
    assert f.on_epoch_end_offset(3, 4, log) == TruncationDecision(4)
    assert f.state is FetchState.FETCHING
    f.on_truncation_failed(ErrorCode.KAFKA_STORAGE_ERROR, now_ms=1000)
    assert not f.is_ready(1050) and f.last_error == ErrorCode.KAFKA_STORAGE_ERROR
    assert f.is_ready(1100) and f.state is FetchState.TRUNCATING
    assert f.truncation_request(log) == EpochQuery(current_leader_epoch=9, leader_epoch=3)
