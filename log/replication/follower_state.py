"""The follower's fetch decisions per partition (Kafka's ReplicaFetcherThread), sans-IO.

A follower first makes its log a prefix of the leader's, then fetches from its log end offset:

    TRUNCATING --(epoch end offset answered, truncation complete)--> FETCHING
    TRUNCATING --(answer names an epoch we lack: intermediate truncation)--> TRUNCATING
    FETCHING   --(diverging epoch in a fetch response)--> TRUNCATING (or FETCHING once truncated)
    TRUNCATING | FETCHING --(error)--> DELAYED --(replica.fetch.backoff.ms passed)--> same state
    any        --(the decided truncation failed: a storage error)--> DELAYED --> TRUNCATING
                          (LEADER_CHANGE_RETRY_MS instead when the leader is only behind on
                          metadata: see `on_error`)
    any        --(on_become_follower: new leader or leader epoch)--> TRUNCATING

Truncation (KIP-101/KIP-279): ask the leader where our latest leader epoch ends
(OffsetsForLeaderEpoch). With no epoch information, truncate to the high watermark. The answer's
epoch may be older than ours; then we look up our own end offset for that epoch and cut at the
smaller of the two. If we do not know the leader's answered epoch at all, we cut at the end of
our largest older epoch and ask again.

The cores read the log through `ReplicaLog`; they never mutate it. Every decision is returned to
the driver (truncate here, append this response, adopt this high watermark), which applies it.
`FetcherState` groups the partitions fetched from one source broker and picks, fairly, which go
into the next fetch.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from log.common.errors import ErrorCode, KafkaError
from log.replication.fetch_session_handler import FetchSessionHandler
from log.replication.replica_log import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, ReplicaLog

# Kafka's defaults for the follower's fetch configuration.
DEFAULT_REPLICA_FETCH_MAX_BYTES = 1_048_576
DEFAULT_REPLICA_FETCH_BACKOFF_MS = 1000
# Answers that mean the two sides have not applied the same leader change yet (the follower
# learned of the new epoch before the leader did, or the other way round): a metadata image
# away from working, so the follower asks again soon instead of after replica.fetch.backoff.ms,
# which would hold every acks=all produce to the new leader for up to a second after a fail-over.
LEADER_CHANGE_ERRORS = frozenset(
    {
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_ID,  # the leader has not replayed a new topic yet (Fetch v13+)
    }
)
LEADER_CHANGE_RETRY_MS = 50
# Bound on partitions one fetcher serves (one fetch request names at most this many): 100,000
# partitions of ~30 bytes each is a 3 MB request, well inside the leader's
# socket.request.max.bytes (100 MiB); a broker following more from one leader refuses the rest.
MAX_PARTITIONS_PER_FETCHER = 100_000
# How often a fetcher re-derives every partition's fetch, not only those marked dirty (see
# `FetcherState.poll`): heals what changed without passing through the fetcher (the follower's
# own retention moving its log start offset).
FETCHER_SWEEP_INTERVAL_MS = 5_000


class FetchState(enum.Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"
    DELAYED = "delayed"


@dataclass(frozen=True)
class EpochQuery:
    """One partition of an OffsetsForLeaderEpoch request."""

    current_leader_epoch: int
    leader_epoch: int


@dataclass(frozen=True)
class TruncationDecision:
    """Truncate the log to `offset` (or, with `fully`, drop everything and start at `offset`)."""

    offset: int
    truncation_completed: bool = True
    fully: bool = False


@dataclass(frozen=True)
class PartitionFetch:
    """One partition of a follower Fetch request."""

    fetch_offset: int
    current_leader_epoch: int
    log_start_offset: int
    partition_max_bytes: int
    last_fetched_epoch: int = UNDEFINED_EPOCH


@dataclass(frozen=True)
class RecordsMeta:
    """What the core needs to know about the fetched records (never the records themselves)."""

    first_offset: int
    next_offset: int  # last offset + 1
    size_bytes: int


@dataclass(frozen=True)
class FetchOutcome:
    """What the driver does with one partition's fetch response, in this order.

    1. `truncation`: truncate (diverging epoch: nothing appended; or `fully`, when our empty
       log starts inside the leader's first batch: then append).
    2. `append`: append the response's records as follower (if that fails, call `on_error`).
    3. `high_watermark`: `log.update_high_watermark(...)` when not None.
    4. `log_start_offset`: `log.maybe_increment_log_start_offset(...)` when not None.
    `needs_leader_offsets`: ask the leader's log start/end (ListOffsets), then `on_leader_offsets`.
    """

    ignored: bool = False
    append: bool = False
    high_watermark: int | None = None
    log_start_offset: int | None = None
    truncation: TruncationDecision | None = None
    needs_leader_offsets: bool = False
    error: ErrorCode = ErrorCode.NONE


class FollowerState:
    """Fetch state of one partition this broker follows."""

    def __init__(self, replica_fetch_backoff_ms: int = DEFAULT_REPLICA_FETCH_BACKOFF_MS) -> None:
        assert replica_fetch_backoff_ms >= 0
        self.replica_fetch_backoff_ms = replica_fetch_backoff_ms
        self.leader_id = -1
        self.leader_epoch = UNDEFINED_EPOCH
        self.state = FetchState.TRUNCATING
        self.state_after_delay = FetchState.TRUNCATING
        self.delayed_until_ms = 0
        self.last_error = ErrorCode.NONE
        # The leader's high watermark from the last fetch answer (-1 before any): the follower's
        # lag is how far its log end offset is behind it (Kafka's FetcherLagMetrics).
        self.leader_high_watermark = -1
        self._last_fetch: PartitionFetch | None = None  # what build_fetch returned last
        self.on_change: Callable[[], None] | None = None  # set by the owning FetcherState

    def lag(self, log_end_offset: int) -> int | None:
        """max(leader HW last seen - our LEO, 0); None before the first fetch answer."""
        if self.leader_high_watermark < 0:
            return None
        return max(self.leader_high_watermark - log_end_offset, 0)

    def on_become_follower(self, leader_id: int, leader_epoch: int, log: ReplicaLog) -> None:
        """New leader or leader epoch: truncate first (the log is read on `truncation_request`)."""
        assert leader_epoch >= self.leader_epoch, (leader_epoch, self.leader_epoch)
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.state = FetchState.TRUNCATING
        self.delayed_until_ms = 0
        self.last_error = ErrorCode.NONE
        self._changed()

    def _changed(self) -> None:
        """Tell the owning FetcherState that this partition's next fetch must be derived again
        (every input that changes it passes through here, or through the driver right after)."""
        if self.on_change is not None:
            self.on_change()

    def is_ready(self, now_ms: int) -> bool:
        self._maybe_resume(now_ms)
        return self.state is not FetchState.DELAYED

    def _maybe_resume(self, now_ms: int) -> None:
        if self.state is FetchState.DELAYED and now_ms >= self.delayed_until_ms:
            self.state = self.state_after_delay

    # ---------------------------------------------------------------- truncation

    def truncation_request(self, log: ReplicaLog) -> EpochQuery | TruncationDecision:
        """Ask where our latest epoch ends, or (no epoch information) truncate to the HW now.

        A TruncationDecision returned here has already moved this partition to FETCHING.
        """
        assert self.state is FetchState.TRUNCATING, self.state
        latest_epoch = log.latest_epoch
        if latest_epoch == UNDEFINED_EPOCH:
            return self._truncated(TruncationDecision(log.high_watermark))
        return EpochQuery(current_leader_epoch=self.leader_epoch, leader_epoch=latest_epoch)

    def on_epoch_end_offset(
        self, leader_epoch: int, end_offset: int, log: ReplicaLog
    ) -> TruncationDecision | None:
        """The leader's OffsetsForLeaderEpoch answer -> where to truncate (None: stale answer)."""
        self._changed()
        if self.state is not FetchState.TRUNCATING:
            return None
        log_end_offset = log.log_end_offset
        if end_offset == UNDEFINED_EPOCH_OFFSET:
            decision = TruncationDecision(min(log.high_watermark, log_end_offset))
        elif leader_epoch == UNDEFINED_EPOCH:
            decision = TruncationDecision(min(end_offset, log_end_offset))
        else:
            decision = self._truncation_for_leader_epoch(leader_epoch, end_offset, log)
        return self._truncated(decision)

    def _truncation_for_leader_epoch(
        self, leader_epoch: int, end_offset: int, log: ReplicaLog
    ) -> TruncationDecision:
        log_end_offset = log.log_end_offset
        if log.latest_epoch == UNDEFINED_EPOCH:
            return TruncationDecision(min(end_offset, log_end_offset))
        our_epoch, our_end_offset = log.end_offset_for_epoch(leader_epoch)
        if our_epoch == UNDEFINED_EPOCH or our_end_offset == UNDEFINED_EPOCH_OFFSET:
            return TruncationDecision(min(end_offset, log_end_offset))
        if our_epoch != leader_epoch:
            # We never had the leader's epoch: cut to where our older epoch ends, ask again.
            return TruncationDecision(
                min(our_end_offset, log_end_offset), truncation_completed=False
            )
        return TruncationDecision(min(our_end_offset, end_offset, log_end_offset))

    def _truncated(self, decision: TruncationDecision) -> TruncationDecision:
        if decision.truncation_completed:
            self.state = FetchState.FETCHING
        return decision

    def on_leader_offsets(
        self, leader_log_start_offset: int, leader_log_end_offset: int, log: ReplicaLog
    ) -> TruncationDecision | None:
        """Reset after OFFSET_OUT_OF_RANGE, given the leader's log start and end offsets.

        None: the partition left FETCHING meanwhile (new leader epoch, back-off), answer is stale.
        """
        self._changed()
        if self.state is not FetchState.FETCHING:
            return None
        log_end_offset = log.log_end_offset
        if leader_log_end_offset < log_end_offset:
            return TruncationDecision(leader_log_end_offset)
        if leader_log_start_offset > log_end_offset:
            return TruncationDecision(leader_log_start_offset, fully=True)
        return TruncationDecision(log_end_offset)

    # ---------------------------------------------------------------- fetching

    def build_fetch(
        self, log: ReplicaLog, partition_max_bytes: int, *, use_last_fetched_epoch: bool = False
    ) -> PartitionFetch:
        assert self.state is FetchState.FETCHING, self.state
        assert partition_max_bytes > 0
        last_fetched_epoch = log.latest_epoch if use_last_fetched_epoch else UNDEFINED_EPOCH
        fetch = self._last_fetch
        if (
            fetch is None
            or fetch.fetch_offset != log.log_end_offset
            or fetch.current_leader_epoch != self.leader_epoch
            or fetch.log_start_offset != log.log_start_offset
            or fetch.partition_max_bytes != partition_max_bytes
            or fetch.last_fetched_epoch != last_fetched_epoch
        ):
            # A new object only when something changed: an idle partition hands out the same
            # one every round, which the fetch session recognises by identity.
            fetch = self._last_fetch = PartitionFetch(
                fetch_offset=log.log_end_offset,
                current_leader_epoch=self.leader_epoch,
                log_start_offset=log.log_start_offset,
                partition_max_bytes=partition_max_bytes,
                last_fetched_epoch=last_fetched_epoch,
            )
        return fetch

    def on_fetch_response(
        self,
        request: PartitionFetch,
        error: ErrorCode,
        high_watermark: int,
        log_start_offset: int,
        records_meta: RecordsMeta | None,
        log: ReplicaLog,
        now_ms: int,
        diverging_epoch: tuple[int, int] | None = None,
    ) -> FetchOutcome:
        """Decide what one partition's fetch response means for our log."""
        self._changed()
        if (
            self.state is not FetchState.FETCHING
            or request.current_leader_epoch != self.leader_epoch
            or request.fetch_offset != log.log_end_offset
        ):
            return FetchOutcome(ignored=True)  # an old response: state moved on meanwhile
        if error == ErrorCode.NONE:
            self.leader_high_watermark = high_watermark
            if diverging_epoch is not None:
                self.state = FetchState.TRUNCATING
                epoch, end_offset = diverging_epoch
                decision = self.on_epoch_end_offset(epoch, end_offset, log)
                return FetchOutcome(truncation=decision)
            return self._on_records(high_watermark, log_start_offset, records_meta, log, now_ms)
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            return FetchOutcome(needs_leader_offsets=True, error=error)
        self.on_error(error, now_ms)
        return FetchOutcome(error=error)

    def _on_records(
        self,
        high_watermark: int,
        leader_log_start_offset: int,
        records_meta: RecordsMeta | None,
        log: ReplicaLog,
        now_ms: int,
    ) -> FetchOutcome:
        end_offset = log.log_end_offset
        log_start_offset = log.log_start_offset
        truncation = None
        append = records_meta is not None and records_meta.size_bytes > 0
        if append:
            assert records_meta is not None
            first_offset, next_offset = records_meta.first_offset, records_meta.next_offset
            if first_offset < end_offset < next_offset and end_offset == log_start_offset:
                # Our empty log starts inside the leader's first batch (the leader's log start
                # offset fell mid-batch): restart the log at the batch's base offset, as Kafka does.
                truncation = TruncationDecision(first_offset, fully=True)
                log_start_offset = first_offset
            elif first_offset != end_offset or next_offset <= end_offset:
                # Not contiguous with our log: never append it. Kafka fails the partition here;
                # we back off and retry, and the error stays visible in `last_error`.
                self.on_error(ErrorCode.UNKNOWN_SERVER_ERROR, now_ms)
                return FetchOutcome(error=ErrorCode.UNKNOWN_SERVER_ERROR)
            end_offset = next_offset
        new_high_watermark = min(high_watermark, end_offset)
        return FetchOutcome(
            truncation=truncation,
            append=append,
            high_watermark=new_high_watermark if new_high_watermark > log.high_watermark else None,
            log_start_offset=(
                leader_log_start_offset if leader_log_start_offset > log_start_offset else None
            ),
        )

    def on_truncation_failed(self, error: ErrorCode, now_ms: int) -> None:
        """The log could not be cut where a TruncationDecision said (a storage error): it still
        holds records past the diverging point, so never fetch on top of them. Back off, then
        ask the leader again (TRUNCATING), whichever state the decision had moved us to."""
        self.state = FetchState.TRUNCATING
        self.on_error(error, now_ms)

    def on_error(self, error: ErrorCode, now_ms: int) -> None:
        """Back off `replica.fetch.backoff.ms` (LEADER_CHANGE_RETRY_MS for a leader change
        one side has not applied yet), then resume in the state we were in."""
        self._changed()
        if self.state is not FetchState.DELAYED:
            self.state_after_delay = self.state
        self.state = FetchState.DELAYED
        backoff_ms = self.replica_fetch_backoff_ms
        if error in LEADER_CHANGE_ERRORS:
            backoff_ms = min(backoff_ms, LEADER_CHANGE_RETRY_MS)
        self.delayed_until_ms = now_ms + backoff_ms
        self.last_error = error


@dataclass(frozen=True)
class FetcherPoll:
    """What a fetcher should do now (see `FetcherState.poll`)."""

    truncate_now: dict[object, TruncationDecision]
    epoch_queries: dict[object, EpochQuery]
    fetch: dict[object, PartitionFetch]
    wakeup_ms: int | None  # the earliest back-off end, if any partition is delayed


class FetcherFullError(KafkaError):
    """More partitions than one fetcher may serve (`max_partitions`)."""

    error_code = ErrorCode.REPLICA_NOT_AVAILABLE


class FetcherState:
    """All partitions this broker fetches from one source broker (one fetch session).

    A poll costs O(partitions that changed), not O(partitions): a FollowerState tells its
    FetcherState when an answer, an error or a truncation changed it (`on_change`), and only
    those partitions' fetches are derived again; the driver applies each decision (append,
    truncate) before it polls again. Every FETCHER_SWEEP_INTERVAL_MS, and when a back-off ends,
    a poll derives every partition's fetch.

    Every ready FETCHING partition is in every Fetch (within the fetch `session`: a partition
    whose fetch state did not change is in it without being named again), as in Kafka: the
    request is never what limits a fetch, the leader bounds the response (`replica.fetch.max.bytes` per partition,
    `replica.fetch.response.max.bytes` in all) and fills it in request order. Partitions are kept
    in fetch order; a partition that just received data moves to the end (`mark_fetched`), so
    the ones the budget left out are read first next time and a busy partition cannot starve the
    others. (Naming only the partitions whose shares fit the budget, as this once did, let idle
    partitions at the front shut every partition behind them out of replication.)
    """

    def __init__(
        self,
        source_broker_id: int,
        replica_fetch_max_bytes: int = DEFAULT_REPLICA_FETCH_MAX_BYTES,
        max_partitions: int = MAX_PARTITIONS_PER_FETCHER,
        *,
        use_last_fetched_epoch: bool = False,
    ) -> None:
        """`use_last_fetched_epoch`: Fetch v12+, the leader detects divergence in the fetch."""
        assert replica_fetch_max_bytes > 0
        assert max_partitions > 0
        self.source_broker_id = source_broker_id
        self.replica_fetch_max_bytes = replica_fetch_max_bytes
        self.max_partitions = max_partitions
        self.use_last_fetched_epoch = use_last_fetched_epoch
        self.partitions: OrderedDict[object, FollowerState] = OrderedDict()
        # Between sweeps `poll` re-derives only the partitions marked dirty (added, or their
        # FollowerState changed: answered, truncated, errored) and reuses the others' last fetch.
        self._fetch: dict[object, PartitionFetch] = {}
        self._dirty: set[object] = set()
        self._next_sweep_ms = 0
        self._delayed_until_ms: int | None = None
        # What of `poll`'s fetch goes on the wire: incremental within a fetch session.
        self.session = FetchSessionHandler()

    def add_partition(self, topic_partition: object, state: FollowerState) -> None:
        if topic_partition not in self.partitions and len(self.partitions) >= self.max_partitions:
            raise FetcherFullError(f"fetcher for broker {self.source_broker_id} is full")
        self.partitions[topic_partition] = state
        self._dirty.add(topic_partition)
        state.on_change = lambda: self._dirty.add(topic_partition)

    def remove_partition(self, topic_partition: object) -> FollowerState | None:
        self._fetch.pop(topic_partition, None)
        self._dirty.discard(topic_partition)
        state = self.partitions.pop(topic_partition, None)
        if state is not None:
            state.on_change = None
        return state

    def partitions_to_truncate(self, now_ms: int) -> list[object]:
        return [
            tp
            for tp, state in self.partitions.items()
            if state.is_ready(now_ms) and state.state is FetchState.TRUNCATING
        ]

    def partitions_to_fetch(self, now_ms: int) -> list[object]:
        """Every ready FETCHING partition, in fair order (least recently fed first)."""
        return [
            tp
            for tp, state in self.partitions.items()
            if state.is_ready(now_ms) and state.state is FetchState.FETCHING
        ]

    def poll(self, now_ms: int, log_for: Callable[[object], ReplicaLog]) -> FetcherPoll:
        """One round of Kafka's doWork (maybeTruncate, then maybeFetch), as requests to send.

        Apply `truncate_now` first (partitions without epoch information truncate to their HW at
        once; they fetch from the next poll on). Send `epoch_queries` as one OffsetsForLeaderEpoch
        request and feed each answer to that partition's `on_epoch_end_offset`; send `fetch` as
        one Fetch request (in this order: it is the fairness order) and feed each partition's
        response to `on_fetch_response`. Poll again after the responses, or at `wakeup_ms`.
        """
        truncate_now: dict[object, TruncationDecision] = {}
        epoch_queries: dict[object, EpochQuery] = {}
        if now_ms >= self._next_sweep_ms or (
            self._delayed_until_ms is not None and now_ms >= self._delayed_until_ms
        ):
            # A sweep: every partition, in fetch order.
            self._next_sweep_ms = now_ms + FETCHER_SWEEP_INTERVAL_MS
            self._delayed_until_ms = None
            self._fetch = {}
            self._dirty.clear()
            for tp, state in self.partitions.items():
                self._derive(tp, state, now_ms, log_for, truncate_now, epoch_queries)
        elif self._dirty:
            # Between sweeps: only what the driver touched since the last poll; the rest keep
            # their fetch (an idle partition's is the same object every round).
            dirty, self._dirty = self._dirty, set()
            for tp in dirty:
                self._fetch.pop(tp, None)
                follower = self.partitions.get(tp)
                if follower is not None:
                    self._derive(tp, follower, now_ms, log_for, truncate_now, epoch_queries)
        return FetcherPoll(truncate_now, epoch_queries, dict(self._fetch), self._delayed_until_ms)

    def _derive(self, tp: object, state: FollowerState, now_ms: int,
                log_for: Callable[[object], ReplicaLog],
                truncate_now: dict[object, TruncationDecision],
                epoch_queries: dict[object, EpochQuery]) -> None:  # fmt: skip
        """One partition's part of a poll: fetch it, truncate it, ask for its epoch, or wait."""
        if not state.is_ready(now_ms):
            if self._delayed_until_ms is None or state.delayed_until_ms < self._delayed_until_ms:
                self._delayed_until_ms = state.delayed_until_ms
        elif state.state is FetchState.FETCHING:
            self._fetch[tp] = state.build_fetch(
                log_for(tp), self.replica_fetch_max_bytes,
                use_last_fetched_epoch=self.use_last_fetched_epoch,
            )  # fmt: skip
        else:
            step = state.truncation_request(log_for(tp))
            if isinstance(step, TruncationDecision):
                truncate_now[tp] = step
                self._dirty.add(tp)  # truncated now: fetches from the next poll on
            else:
                epoch_queries[tp] = step
                self._dirty.add(tp)  # asked again each poll until the answer moves it on

    def mark_fetched(self, topic_partition: object) -> None:
        """Data arrived for this partition: move it to the back of the fetch order."""
        if topic_partition in self.partitions:
            self.partitions.move_to_end(topic_partition)

    def next_wakeup_ms(self) -> int | None:
        """When a delayed partition becomes ready again (None: none is delayed)."""
        delayed = [
            s.delayed_until_ms for s in self.partitions.values() if s.state is FetchState.DELAYED
        ]
        return min(delayed) if delayed else None
