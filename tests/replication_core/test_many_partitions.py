"""Replication of many partitions from one leader: nothing starves, whatever is idle or hot.

A seeded simulation of one leader and two followers hosting hundreds of partitions, most idle,
a few hot, new ones created while it runs. The followers are the real sans-IO cores
(`FetcherState` building each Fetch, `FollowerState` deciding truncation and appends); the leader
fills each response with the real `FetchFillOrder` under Kafka's byte limits (max_bytes for the
response, partition_max_bytes per partition, the first batch whole). Every round each follower
sends one Fetch; the checks: every partition's follower reaches each leader offset within a
bounded number of rounds of its append, and every follower ends byte-identical to the leader.

Property tests beside it: the fetch a follower builds names every ready partition, whatever the
number of partitions and the byte limits; and a leader answering a client that never rotates
still feeds every partition with data within a bounded number of responses.
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from log.common.errors import ErrorCode
from log.replication.fetch_fill_order import FetchFillOrder
from log.replication.fetch_session import CachedPartition, FetchSessionCache, update_session
from log.replication.follower_state import (
    FetcherState,
    FetchState,
    FollowerState,
    RecordsMeta,
    TruncationDecision,
)
from tests.replication_core.memory_log import Batch, MemoryLog

LEADER_ID, LEADER_EPOCH = 0, 1
PARTITION_MAX_BYTES = 1_000
RESPONSE_MAX_BYTES = 4_000  # four partitions' shares: far fewer than the partitions named
MAX_CATCH_UP_ROUNDS = 12
ROUND_MS = 10
BACKOFF_MS = 20  # replica.fetch.backoff.ms after a partition error: two rounds


def read_for_fetch(log: MemoryLog, fetch_offset: int, max_bytes: int, first: bool) -> list[Batch]:
    """The leader's read of one partition: whole batches up to max_bytes, the first whole only
    when nothing else is in the response yet (KIP-74)."""
    batches = log.read(fetch_offset, max(max_bytes, 0), log.log_end_offset)
    if batches and not first and batches[0].size_bytes > max_bytes:
        return []
    return batches


class Follower:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.fetcher = FetcherState(LEADER_ID, replica_fetch_max_bytes=PARTITION_MAX_BYTES)
        self.logs: dict[object, MemoryLog] = {}

    def add_partition(self, tp: object) -> None:
        self.logs[tp] = MemoryLog()
        follower = FollowerState(BACKOFF_MS)
        follower.on_become_follower(LEADER_ID, LEADER_EPOCH, self.logs[tp])
        self.fetcher.add_partition(tp, follower)

    def truncate(self, tp: object, decision: TruncationDecision | None) -> None:
        if decision is None:
            return
        if decision.fully:
            self.logs[tp].truncate_fully_and_start_at(decision.offset)
        else:
            self.logs[tp].truncate_to(decision.offset)


class ManyPartitionSim:
    def __init__(self, seed: int, initial_partitions: int, hot_share: float,
                 sessions: bool = True, fault_probability: float = 0.0) -> None:  # fmt: skip
        self.rng = random.Random(seed)
        self.leader_logs: dict[object, MemoryLog] = {}
        self.followers = [Follower(1), Follower(2)]
        self.fill_orders = {f.broker_id: FetchFillOrder() for f in self.followers}
        self.session_cache = FetchSessionCache()
        self.sessions = sessions
        # Per round: a follower's session is evicted, or a partition answers with an error.
        self.fault_probability = fault_probability
        self.incremental_fetches = 0
        self.hot: set[object] = set()
        self.hot_share = hot_share
        self.round = 0
        # (round appended, partition, offset the followers must reach)
        self.pending: list[tuple[int, object, int]] = []
        self.max_catch_up_rounds = 0
        self.add_partitions(initial_partitions)

    def add_partitions(self, count: int) -> None:
        first = len(self.leader_logs)
        for index in range(first, first + count):
            tp = ("t", index)
            self.leader_logs[tp] = MemoryLog()
            for follower in self.followers:
                follower.add_partition(tp)
            if self.rng.random() < self.hot_share:
                self.hot.add(tp)

    def produce(self) -> None:
        # Hot partitions write most rounds; an idle one now and then gets a single record.
        # What is written per round stays below one response's budget, so a fair follower
        # keeps up; bursts (three batches at once) overshoot it for a while.
        for tp in sorted(self.hot):
            if self.rng.random() < 0.3:
                for _ in range(self.rng.choice((1, 1, 3))):
                    self.append(tp, self.rng.randrange(40, 300))
        if self.rng.random() < 0.5:
            self.append(self.rng.choice(list(self.leader_logs)), 10)

    def append(self, tp: object, payload_bytes: int) -> None:
        log = self.leader_logs[tp]
        log.append_as_leader("x" * payload_bytes, self.rng.randrange(1, 5), LEADER_EPOCH)
        self.pending.append((self.round, tp, log.log_end_offset))

    def fetch_round(self, follower: Follower) -> None:
        now_ms = self.round * ROUND_MS
        poll = follower.fetcher.poll(now_ms, lambda tp: follower.logs[tp])
        for tp, decision in poll.truncate_now.items():
            follower.truncate(tp, decision)
        for tp, query in poll.epoch_queries.items():
            epoch, end_offset = self.leader_logs[tp].end_offset_for_epoch(query.leader_epoch)
            state = follower.fetcher.partitions[tp]
            follower.truncate(tp, state.on_epoch_end_offset(epoch, end_offset, follower.logs[tp]))
        if not poll.fetch:
            return
        request = follower.fetcher.session.build(poll.fetch)
        if self.rng.random() < self.fault_probability:
            self.session_cache.sessions.pop(request.session_id, None)  # evicted
        decision = self.session_cache.decide(
            request.session_id, request.session_epoch, may_create=self.sessions
        )
        if decision.error != ErrorCode.NONE:
            assert not follower.fetcher.session.on_response(decision.error, 0)
            return
        if decision.session is None:
            assert request.full
            fetch = {tp: CachedPartition(f.fetch_offset, f.log_start_offset,
                                         f.partition_max_bytes, f.current_leader_epoch)
                     for tp, f in request.to_send.items()}  # fmt: skip
        else:
            self.incremental_fetches += decision.incremental
            update_session(
                decision.session,
                [(tp, CachedPartition(f.fetch_offset, f.log_start_offset, f.partition_max_bytes,
                                      f.current_leader_epoch))
                 for tp, f in request.to_send.items()],
                request.forgotten,
                full=not decision.incremental,
            )  # fmt: skip
            fetch = decision.session.partitions
        keys = list(fetch)
        failing = self.rng.choice(keys) if self.rng.random() < self.fault_probability else None

        def read(index: int, budget_bytes: int, first: bool) -> tuple[list[Batch], int]:
            cached = fetch[keys[index]]
            batches = read_for_fetch(
                self.leader_logs[keys[index]],
                cached.fetch_offset,
                min(cached.partition_max_bytes, budget_bytes),
                first,
            )
            return batches, sum(b.size_bytes for b in batches)

        answers, _ = self.fill_orders[follower.broker_id].fill(keys, RESPONSE_MAX_BYTES, read)
        assert follower.fetcher.session.on_response(ErrorCode.NONE, decision.response_session_id)
        for tp, batches in zip(keys, answers, strict=True):
            leader_log = self.leader_logs[tp]
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER if tp == failing else ErrorCode.NONE
            size = sum(b.size_bytes for b in batches)
            cached = fetch[tp]
            if decision.session is not None:
                news = cached.must_respond(
                    error, size, leader_log.high_watermark, leader_log.log_start_offset
                )
                if decision.incremental and not news:
                    continue
            # The leader answers the fetch the follower made this round, never an older one.
            assert poll.fetch[tp].fetch_offset == cached.fetch_offset, tp
            self.apply_answer(follower, tp, poll.fetch[tp], error, batches, now_ms)

    def apply_answer(self, follower: Follower, tp: object, request: object, error: ErrorCode,
                     batches: list[Batch], now_ms: int) -> None:  # fmt: skip
        log = follower.logs[tp]
        if error != ErrorCode.NONE:
            batches = []
        meta = None
        if batches:
            size = sum(b.size_bytes for b in batches)
            meta = RecordsMeta(batches[0].base_offset, batches[-1].next_offset, size)
        leader_log = self.leader_logs[tp]
        outcome = follower.fetcher.partitions[tp].on_fetch_response(
            request, error, leader_log.high_watermark, leader_log.log_start_offset, meta, log,
            now_ms,
        )  # fmt: skip
        assert not outcome.ignored and not outcome.needs_leader_offsets
        follower.truncate(tp, outcome.truncation)
        if outcome.append:
            log.append_as_follower(batches)
            follower.fetcher.mark_fetched(tp)
        if outcome.high_watermark is not None:
            log.update_high_watermark(outcome.high_watermark)

    def step(self) -> None:
        self.round += 1
        self.produce()
        if self.rng.random() < 0.05:
            self.add_partitions(self.rng.randrange(1, 40))
        for follower in self.followers:
            self.fetch_round(follower)
        self.check_catch_up()

    def check_catch_up(self) -> None:
        still_pending = []
        for appended_round, tp, offset in self.pending:
            caught_up = all(f.logs[tp].log_end_offset >= offset for f in self.followers)
            waited = self.round - appended_round
            if caught_up:
                self.max_catch_up_rounds = max(self.max_catch_up_rounds, waited)
                continue
            assert waited <= MAX_CATCH_UP_ROUNDS, (
                f"{tp} offset {offset}: followers at "
                f"{[f.logs[tp].log_end_offset for f in self.followers]} after {waited} rounds "
                f"(round {self.round}, {len(self.leader_logs)} partitions)"
            )
            still_pending.append((appended_round, tp, offset))
        self.pending = still_pending

    def check_replicas_identical(self) -> None:
        for tp, leader_log in self.leader_logs.items():
            for follower in self.followers:
                assert follower.logs[tp].batches == leader_log.batches, (tp, follower.broker_id)


@pytest.mark.parametrize(
    ("seed", "sessions", "fault_probability"),
    [(seed, True, 0.0) for seed in range(4)]
    + [(seed, True, 0.05) for seed in range(4, 8)]
    + [(seed, False, 0.05) for seed in range(8, 11)],
)
def test_every_partition_catches_up_among_hundreds(
    seed: int, sessions: bool, fault_probability: float
) -> None:
    sim = ManyPartitionSim(seed, 200, 0.04, sessions, fault_probability)
    for _ in range(200):
        sim.step()
    # Quiet: no more writes; every follower drains what is left within a few rounds.
    for _ in range(MAX_CATCH_UP_ROUNDS):
        sim.round += 1
        for follower in sim.followers:
            sim.fetch_round(follower)
    sim.check_catch_up()
    assert not sim.pending, f"seed {seed}: {sim.pending[:5]}"
    sim.check_replicas_identical()
    assert len(sim.leader_logs) > 200  # partitions were created while running
    assert (sim.incremental_fetches > 0) == sessions


def test_a_new_partition_replicates_at_once_behind_hundreds_of_idle_ones() -> None:
    sim = ManyPartitionSim(seed=99, initial_partitions=500, hot_share=0.0)
    for _ in range(3):
        sim.step()
    sim.add_partitions(1)
    newest = ("t", len(sim.leader_logs) - 1)
    sim.append(newest, 100)
    for _ in range(2):  # an empty log truncates to its HW in the first round, then fetches
        for follower in sim.followers:
            sim.fetch_round(follower)
    assert all(f.logs[newest].log_end_offset == sim.leader_logs[newest].log_end_offset
               for f in sim.followers)  # fmt: skip


# ---------------------------------------------------------------------- properties


@settings(max_examples=60, deadline=None)
@given(
    partition_count=st.integers(1, 400),
    replica_fetch_max_bytes=st.integers(1, 10_000_000),
    delayed=st.sets(st.integers(0, 399), max_size=50),
    fed=st.lists(st.integers(0, 399), max_size=100),
)
def test_fetch_names_every_ready_partition(
    partition_count: int, replica_fetch_max_bytes: int, delayed: set[int], fed: list[int]
) -> None:
    fetcher = FetcherState(LEADER_ID, replica_fetch_max_bytes=replica_fetch_max_bytes)
    logs = {}
    for index in range(partition_count):
        logs[index] = MemoryLog()
        follower = FollowerState()
        follower.on_become_follower(LEADER_ID, LEADER_EPOCH, logs[index])
        fetcher.add_partition(index, follower)
    poll = fetcher.poll(0, logs.__getitem__)  # empty logs: truncate to the HW, then fetch
    assert set(poll.truncate_now) == set(range(partition_count))
    for index in fed:
        fetcher.mark_fetched(index)
    for index in delayed:
        if index < partition_count:
            fetcher.partitions[index].on_error(ErrorCode.NOT_LEADER_OR_FOLLOWER, 0)
    poll = fetcher.poll(0, logs.__getitem__)
    ready = {i for i in range(partition_count) if i not in delayed}
    assert set(poll.fetch) == ready
    assert all(f.partition_max_bytes == replica_fetch_max_bytes for f in poll.fetch.values())
    assert all(s.state is not FetchState.TRUNCATING for s in fetcher.partitions.values())


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 5_000), min_size=1, max_size=200),
    max_bytes=st.integers(1, 20_000),
)
def test_a_client_that_never_rotates_still_gets_every_partition_fed(
    sizes: list[int], max_bytes: int
) -> None:
    """Every partition always has `size` bytes waiting (0: idle); the client sends the same
    order each time. Within ceil(busy / fed-per-response) responses all busy ones were fed."""
    order = FetchFillOrder()
    keys = [("t", i) for i in range(len(sizes))]
    fed_at: dict[int, int] = {}

    def read(index: int, budget_bytes: int, first: bool) -> tuple[int, int]:
        size = sizes[index]
        if size == 0 or (size > budget_bytes and not first):
            return 0, 0
        return size, size

    busy = sum(1 for s in sizes if s)
    # Each response feeds at least one partition (the first batch is returned whole).
    for response in range(busy):
        answers, total = order.fill(keys, max_bytes, read)
        assert total == sum(answers)
        assert total <= max_bytes or sum(1 for a in answers if a) == 1
        for index, answer in enumerate(answers):
            if answer:
                fed_at.setdefault(index, response)
    assert set(fed_at) == {i for i, s in enumerate(sizes) if s}
    assert math.isfinite(max(fed_at.values(), default=0))
