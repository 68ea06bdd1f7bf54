"""Incremental fetch sessions (KIP-227), the leader's side, sans-IO.

A follower names every partition it follows in every Fetch; with thousands of partitions that
is thousands of entries to encode, decode, read and answer per round even when one partition
changed. A fetch session lets both sides send only what changed: the leader caches the
session's partitions (fetch offset, log start offset, partition_max_bytes, leader epoch) and
what it last told the fetcher about each (high watermark, log start offset); an incremental
request lists only partitions whose fetch state changed (and `forgotten_topics_data` for those
removed); the response lists only partitions with records, a changed high watermark or log
start offset, or an error.

    session_id  session_epoch   meaning
    0           -1              sessionless full fetch (FINAL_EPOCH; librdkafka always)
    0           0               full fetch, create a session (INITIAL_EPOCH)
    X           -1              close session X, then a sessionless full fetch
    X           0               close session X, create a new one (full)
    X           N > 0           incremental fetch in session X; N must be the next epoch,
                                else INVALID_FETCH_SESSION_EPOCH; unknown X is
                                FETCH_SESSION_ID_NOT_FOUND

Which partitions a round reads (`FetchSession.candidates`): reading and answering every
partition of a session each round costs O(partitions) per replication round trip, which a
cluster with thousands of idle partitions cannot afford. A session therefore keeps `dirty`: the
partitions that may have news -- named in a request, signalled by their partition since (an
append, a high watermark or log start move, a leader or ISR change), or not settled when last
read (the follower is behind, not in the ISR, got an error or records). Only those are read; a
caught-up partition that nothing touched is skipped. Every `sweep_interval_ms` (a quarter of
`replica.lag.time.max.ms`) a round reads all of them, so a change that did not signal (a
retention log start move) still reaches the follower and its fetch is recorded.

Sessions are created for replica fetches only: a consumer asking for one gets session id 0
back, which the protocol allows ("the server declined"), and keeps sending full fetches. The
cache holds at most `max.incremental.fetch.session.cache.slots` sessions (Kafka's 1000); when
full, the least recently used one is evicted (its fetcher gets FETCH_SESSION_ID_NOT_FOUND and
starts a new one).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from log.common.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
NO_SESSION_ID = 0
DEFAULT_MAX_SESSION_SLOTS = 1000  # Kafka's max.incremental.fetch.session.cache.slots
MAX_SESSION_ID = 0x7FFFFFFF
# How often a session reads all its partitions (module docstring): a quarter of Kafka's default
# replica.lag.time.max.ms (30 s), so a follower's fetch is recorded well within it.
DEFAULT_SWEEP_INTERVAL_MS = 7_500


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: the fetcher's last fetch state and what we last answered."""

    fetch_offset: int
    log_start_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int = -1  # Fetch v12+: the leader checks divergence with it
    high_watermark_sent: int = -1
    log_start_offset_sent: int = -1
    # The leader's fast path (nothing new for a caught-up follower): the hosted partition and
    # leader epoch this fetch state was last fully validated against (None: validate again).
    hosted: Any = None
    validated_leader_epoch: int = -1

    def must_respond(self, error_code: int, records_bytes: int, high_watermark: int,
                     log_start_offset: int) -> bool:  # fmt: skip
        """Whether this partition goes into an incremental response; remembers what was sent."""
        respond = (
            error_code != ErrorCode.NONE
            or records_bytes > 0
            or high_watermark != self.high_watermark_sent
            or log_start_offset != self.log_start_offset_sent
        )
        if respond and error_code == ErrorCode.NONE:
            self.high_watermark_sent = high_watermark
            self.log_start_offset_sent = log_start_offset
        return respond


class FetchSession:
    def __init__(self, session_id: int, sweep_interval_ms: int = DEFAULT_SWEEP_INTERVAL_MS) -> None:
        assert sweep_interval_ms > 0
        self.session_id = session_id
        self.next_epoch = 1
        self.partitions: OrderedDict[Hashable, CachedPartition] = OrderedDict()
        self.dirty: set[Hashable] = set()  # partitions that may have news (module docstring)
        self.sweep_interval_ms = sweep_interval_ms
        self.next_sweep_ms = 0  # the first round reads everything
        self.evicted = False  # closed or evicted: whoever still signals it may drop it
        # The driver's object woken by partition signals (it marks `dirty`); None until used.
        self.watcher: Any = None

    def mark_dirty(self, key: Hashable) -> None:
        self.dirty.add(key)

    def candidates(self, now_ms: int) -> list[Hashable]:
        """The partitions this round reads: the dirty ones, or all of them when a sweep is due.
        Takes them out of `dirty`; the reader puts back those it could not settle."""
        if now_ms >= self.next_sweep_ms:
            self.next_sweep_ms = now_ms + self.sweep_interval_ms
            self.dirty.clear()
            return list(self.partitions)
        keys = [key for key in self.dirty if key in self.partitions]
        self.dirty.clear()
        return keys


@dataclass(frozen=True)
class SessionDecision:
    """What the handler does with one Fetch: which session (None: sessionless), whether the
    response is full or incremental, or a top-level error to answer with at once."""

    session: FetchSession | None
    incremental: bool = False
    error: ErrorCode = ErrorCode.NONE

    @property
    def response_session_id(self) -> int:
        return self.session.session_id if self.session is not None else NO_SESSION_ID


class FetchSessionCache:
    """The broker's sessions, least recently used first."""

    def __init__(self, max_slots: int = DEFAULT_MAX_SESSION_SLOTS, seed_id: int = 1,
                 sweep_interval_ms: int = DEFAULT_SWEEP_INTERVAL_MS) -> None:  # fmt: skip
        assert max_slots >= 0
        self.max_slots = max_slots
        self.sweep_interval_ms = sweep_interval_ms
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._next_id = seed_id
        self.evictions_total = 0

    def decide(self, session_id: int, session_epoch: int, may_create: bool) -> SessionDecision:
        """Map a request's (session_id, session_epoch) to a decision (table in the docstring)."""
        if session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != NO_SESSION_ID:
                self._close(self.sessions.pop(session_id, None))
            if session_epoch == INITIAL_EPOCH and may_create and self.max_slots > 0:
                return SessionDecision(self._create())
            return SessionDecision(None)
        session = self.sessions.get(session_id)
        if session is None:
            return SessionDecision(None, error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session_epoch != session.next_epoch:
            return SessionDecision(None, error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        self.sessions.move_to_end(session_id)
        session.next_epoch = session.next_epoch + 1 if session.next_epoch < MAX_SESSION_ID else 1
        return SessionDecision(session, incremental=True)

    def close(self, session_id: int) -> None:
        """Close a session now (the next request naming it gets FETCH_SESSION_ID_NOT_FOUND)."""
        self._close(self.sessions.pop(session_id, None))

    def _create(self) -> FetchSession:
        while len(self.sessions) >= self.max_slots:
            self._close(self.sessions.popitem(last=False)[1])
            self.evictions_total += 1
        session_id = self._next_id
        while session_id in self.sessions or session_id == NO_SESSION_ID:
            session_id = session_id + 1 if session_id < MAX_SESSION_ID else 1
        self._next_id = session_id + 1 if session_id < MAX_SESSION_ID else 1
        session = FetchSession(session_id, self.sweep_interval_ms)
        self.sessions[session_id] = session
        return session

    @staticmethod
    def _close(session: FetchSession | None) -> None:
        if session is not None:
            session.evicted = True


def update_session(
    session: FetchSession,
    requested: Iterable[tuple[Hashable, CachedPartition]],
    forgotten: Iterable[Hashable],
    full: bool,
) -> None:
    """Apply a request to its session: a full request replaces the partition set, an
    incremental one adds/updates the partitions it names and drops the forgotten ones."""
    if full:
        session.partitions.clear()
    for key in forgotten:
        session.partitions.pop(key, None)
    for key, fetch in requested:
        session.dirty.add(key)
        cached = session.partitions.get(key)
        if cached is None:
            session.partitions[key] = fetch
        else:
            cached.fetch_offset = fetch.fetch_offset
            cached.log_start_offset = fetch.log_start_offset
            cached.partition_max_bytes = fetch.partition_max_bytes
            cached.current_leader_epoch = fetch.current_leader_epoch
            cached.last_fetched_epoch = fetch.last_fetched_epoch
            cached.hosted = None
