"""Fetch: read record batches from led partitions up to the high watermark, long-polling.

Versions 4-18 (_Fetch reads any of them; v18's tagged high_watermark, the one a follower
knows (KIP-1166), is read and not used: a follower's fetch waits as before): v13+ names topics by id (resolved through this
broker's image; an id it does not know -> UNKNOWN_TOPIC_ID for those partitions), v15+ carries
the fetching replica and its broker epoch in the tagged replica_state (KIP-903: a fetch from an
incarnation older than the registration in our image -> STALE_BROKER_EPOCH for the request; the
epoch is what the follower's fetch state records), v12+ a replica's last_fetched_epoch (a log
that diverges from ours gets `diverging_epoch`, no records, and its fetch state untouched), v12+
NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH name the current leader (node_endpoints v16+,
KIP-951).

Per partition: unknown -> UNKNOWN_TOPIC_OR_PARTITION; not the leader -> NOT_LEADER_OR_FOLLOWER;
current_leader_epoch older/newer than ours -> FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH;
fetch_offset outside [log_start_offset, log_end_offset] -> OFFSET_OUT_OF_RANGE. Consumers read
below the high watermark (read_uncommitted) or below the last stable offset (read_committed,
isolation_level 1, v4+), and a read_committed answer lists the aborted transactions overlapping
the returned batches (`UnifiedLog.collect_aborted_transactions`: producer id, first offset) so
the consumer drops their records; every answer carries the last stable offset. A
read_committed long poll wakes when the LSO moves: it moves only with the high watermark or a
marker's append, both of which signal the partition. Replica fetches
(replica_id >= 0) are checked by `PartitionState.validate_fetch` (the replica must be a follower
of ours in the same leader epoch), read to the log end offset, and then recorded
(`ReplicaManager.record_follower_fetch`: the follower's log end offset is its fetch offset),
which may move the high watermark -- waking acks=all produce requests and consumer long-polls
-- and may propose an ISR expansion. The stored file bytes go into the response as they are:
the connection writes them with a vectored send, no copy, no re-encoding.

Sizes: each partition gets at most partition_max_bytes and the response at most max_bytes,
except that the first batch found is returned whole even if larger (progress, KIP-74). Which
partitions get the budget first: the connection's `FetchFillOrder` (least recently fed first),
so no partition waits behind others whatever order the client sends.

Long poll: while fewer than min_bytes are available, no partition had an error and max_wait_ms
has not passed, wait until any fetched partition signals (an append or a HW move wakes us at
once) and read again the partitions that signalled.

Fetch sessions (KIP-227, `log.replication.fetch_session`): replica fetches get one, so a
follower's incremental fetch names only the partitions whose fetch state changed and the answer
only the partitions with news. A round reads only the session's candidates (the partitions
named, signalled or unsettled since the last round, all of them at each sweep): the session's
`SessionWatcher`, subscribed to every partition it read, marks a partition dirty when it
signals and wakes the session's long poll, so a round with one busy partition among thousands
idle costs one read. A HW move only marks it (the follower waits for data; the HW rides on its
next answer), and a HW its own fetch moved not even that: that answer already carries it.
Consumers asking for a session get session id 0 ("declined") and keep sending full fetches.

Reads run inline: a read is one pread of at most the requested bytes from the page cache.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import trio

from log.common.acl import AclOperation, ResourceType
from log.common.errors import ErrorCode, KafkaError
from log.protocol.connection import Request
from log.protocol.fetch import FETCH_RESPONSE
from log.replication.fetch_fill_order import FetchFillOrder
from log.replication.fetch_session import (
    CachedPartition,
    FetchSession,
    SessionDecision,
    update_session,
)
from log.replication.partition import FetchWaiter, HostedPartition, SessionWatcher
from log.server.authorization import allowed, allowed_cluster
from log.server.broker_context import BrokerContext
from log.server.handlers.leader_hints import LeaderHints
from log.server.handlers.metadata import listener_of

R = FETCH_RESPONSE.cls
NO_HINT = R.PartitionData.LeaderIdAndEpoch()  # leader -1, epoch -1: not written
ZERO_UUID = uuid.UUID(int=0)
# Partition errors whose answer names the current leader (v12+; node_endpoints v16+, KIP-951).
_HINTED_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})
MAX_WAIT_MS = 30_000  # a bound on one long poll, whatever the client asks
# Closed sessions' watchers are dropped from a partition when it signals; one that never
# signals prunes them when a new watcher subscribes past this many.
PRUNE_WATCHERS_PAST = 4


# One partition to read: ((topic, partition), its fetch state, the session's cache entry or
# None). The fetch state has fetch_offset, log_start_offset, partition_max_bytes and
# current_leader_epoch: the request's own entry when sessionless, else the session's.
_Item = tuple[tuple[str, int], Any, CachedPartition | None]


class _FetchPass:
    """Reads a Fetch's partitions, fairly within max_bytes, and re-reads those that signal."""

    def __init__(self, ctx: BrokerContext, fetch: _Fetch, items: list[_Item],
                 fill_order: FetchFillOrder, incremental: bool,
                 watcher: SessionWatcher | None = None) -> None:  # fmt: skip
        self.ctx = ctx
        self.incremental = incremental
        self.watcher = watcher
        self.replica_id = fetch.replica_id
        self.replica_epoch = fetch.replica_epoch
        self.version = fetch.version
        self.max_bytes = fetch.body.max_bytes
        self.read_committed = (
            fetch.replica_id < 0 and fetch.version >= 4 and fetch.body.isolation_level == 1
        )
        self.items: list[_Item] = []
        self.keys: list[tuple[str, int]] = []
        self.fill_order = fill_order
        self.position_of: dict[tuple[str, int], int] = {}
        self.results: list[Any] = []
        self.sizes: list[int] = []
        self.hosted: list[HostedPartition | None] = []
        self.answer_now = bool(fetch.unknown_topic_ids)  # an error or a diverging log: no wait
        image = fetch.image
        self.topic_ids = image.topic_ids_by_name  # v13+ answers name topics by id
        self.hints = LeaderHints(image, R.PartitionData.LeaderIdAndEpoch, R.NodeEndpoint)
        self.add(items, reuse=False)  # a sessionless request may name a partition twice

    def add(self, items: list[_Item], reuse: bool = True) -> list[int]:
        """Take `items` into this pass (a session's partitions that signalled during the long
        poll); their positions, reusing those of partitions already in it."""
        positions = []
        for item in items:
            position = self.position_of.get(item[0]) if reuse else None
            if position is None:
                position = len(self.items)
                self.position_of.setdefault(item[0], position)
                self.items.append(item)
                self.keys.append(item[0])
                self.results.append(None)
                self.sizes.append(0)
                self.hosted.append(None)
            positions.append(position)
        return positions

    def _watch(self, hosted: HostedPartition) -> None:
        """Subscribe this pass's session to the partition's signals (idempotent)."""
        watchers = hosted.session_watchers
        if self.watcher is None or self.watcher in watchers:
            return
        if len(watchers) >= PRUNE_WATCHERS_PAST:
            for closed in [w for w in watchers if w.closed]:
                watchers.discard(closed)
        watchers.add(self.watcher)

    def unsettled_keys(self) -> list[tuple[str, int]]:
        """Partitions read in full this pass (not passed over as caught up with no news): the
        session reads them again next round."""
        return [k for k, result in zip(self.keys, self.results, strict=True) if result is not None]

    @property
    def total_bytes(self) -> int:
        return sum(self.sizes)

    def read(self, indices: list[int] | None = None) -> None:
        """Read every partition (or only `indices`), in the connection's fair order.

        An incremental fetch first sets aside its partitions with no news (`_no_news`), so
        only the others are ordered and read: a round costs little per idle partition."""
        image = self.ctx.replica_manager.sync()
        now_ms = self.ctx.clock_ms()
        positions: Any = range(len(self.items)) if indices is None else indices
        already_bytes = 0 if indices is None else self.total_bytes
        if self.incremental:
            broker_epoch = self._broker_epoch(image)
            no_news = self._no_news
            positions = [p for p in positions if not no_news(p, broker_epoch, now_ms)]

        def read_one(index: int, budget_bytes: int, first: bool) -> tuple[Any, int]:
            position = positions[index]
            result, size = self._read_partition(
                image, self.items[position], position, budget_bytes, first and not already_bytes,
                now_ms,
            )  # fmt: skip
            self.results[position], self.sizes[position] = result, size
            return result, size

        keys = self.keys if indices is None and not self.incremental else [
            self.keys[p] for p in positions
        ]  # fmt: skip
        self.fill_order.fill(keys, max(self.max_bytes - already_bytes, 0), read_one)

    def _no_news(self, position: int, broker_epoch: int, now_ms: int) -> bool:
        """The fast path of an incremental fetch: a session partition whose follower is in the
        ISR, caught up, and was told the current HW and log start offset, in the same leader
        epoch as when last validated. Nothing to read or answer: only record the fetch (the
        follower's caught-up time moves)."""
        (topic, partition), _, cached = self.items[position]
        if cached is None or cached.hosted is None:
            return False
        hosted = self.ctx.replica_manager.get(topic, partition)
        if hosted is None or hosted is not cached.hosted:
            return False
        state, log = hosted.state, hosted.log
        if (
            state.leader_epoch != cached.validated_leader_epoch
            or not state.is_leader
            or cached.fetch_offset != log.log_end_offset
            or log.high_watermark != cached.high_watermark_sent
            or log.log_start_offset != cached.log_start_offset_sent
            or self.replica_id not in state.isr
        ):
            return False
        self._record_follower_fetch(
            hosted, cached.fetch_offset, cached.log_start_offset, broker_epoch, now_ms
        )
        self.hosted[position] = hosted
        self.results[position] = None
        self.sizes[position] = 0
        self._watch(hosted)
        return True

    def _record_follower_fetch(self, hosted: HostedPartition, fetch_offset: int,
                               log_start_offset: int, broker_epoch: int, now_ms: int) -> None:  # fmt: skip
        """`ReplicaManager.record_follower_fetch`. A HW this very fetch moved marks the
        partition dirty in every session, ours too; ours is not read again for it (it would
        read nothing new: the follower learns the HW with its next answer, as in Kafka, whose
        follower read takes the HW before it records the fetch)."""
        session = self.watcher.session if self.watcher is not None else None
        key = (hosted.topic, hosted.partition)
        was_dirty = session is None or key in session.dirty
        self.ctx.replica_manager.record_follower_fetch(
            hosted, self.replica_id, fetch_offset, log_start_offset, broker_epoch, now_ms
        )
        if session is not None and not was_dirty:
            session.dirty.discard(key)

    def _broker_epoch(self, image: Any) -> int:
        """The fetching replica's broker epoch (KIP-903): the one the request carries (v15+),
        else its registration's in our image (-1: unknown)."""
        if self.replica_epoch >= 0:
            return self.replica_epoch
        registration = image.brokers.get(self.replica_id)
        return registration.broker_epoch if registration is not None else -1

    def _read_partition(self, image: Any, item: _Item, position: int,
                        budget_bytes: int, first: bool, now_ms: int) -> tuple[Any, int]:  # fmt: skip
        (topic, partition), fp, cached = item
        is_replica = self.replica_id >= 0
        try:
            hosted = self.ctx.replica_manager.leader(topic, partition, image)
            if is_replica:
                validation = hosted.state.validate_fetch(
                    self.replica_id, fp.fetch_offset, fp.current_leader_epoch,
                    fp.last_fetched_epoch if self.version >= 12 else -1,
                )  # fmt: skip
                if validation.diverging_epoch is not None:
                    return self._diverging(hosted, position, validation.diverging_epoch)
            else:
                hosted.state.validate_current_leader_epoch(fp.current_leader_epoch)
            log = hosted.log
            if is_replica:
                upper_bound_offset = None
            elif self.read_committed:
                upper_bound_offset = log.last_stable_offset
            else:
                upper_bound_offset = log.high_watermark
            info = log.read(
                fp.fetch_offset,
                min(max(fp.partition_max_bytes, 0), budget_bytes),
                upper_bound_offset=upper_bound_offset,
                min_one_batch=first,
            )
            aborted = None
            if self.read_committed:
                aborted = []
                if info.records:
                    aborted = [
                        R.PartitionData.AbortedTransaction(
                            producer_id=txn.producer_id, first_offset=txn.first_offset
                        )
                        for txn in log.collect_aborted_transactions(
                            fp.fetch_offset, info.next_fetch_offset
                        )
                    ]
            if is_replica:
                self._record_follower_fetch(
                    hosted, fp.fetch_offset, fp.log_start_offset, self._broker_epoch(image),
                    now_ms,
                )  # fmt: skip
                if cached is not None:
                    cached.hosted = hosted
                    cached.validated_leader_epoch = hosted.state.leader_epoch
            high_watermark = log.high_watermark
            last_stable_offset = log.last_stable_offset
        except KafkaError as exc:
            self.answer_now = True
            self.hosted[position] = None
            hint = NO_HINT
            if exc.error_code in _HINTED_ERRORS and self.version >= 12:
                hint = self.hints.current_leader(topic, partition)
            return R.PartitionData(
                partition_index=partition, error_code=exc.error_code,
                high_watermark=-1, records=b"", current_leader=hint,
            ), 0  # fmt: skip
        self.hosted[position] = hosted
        return R.PartitionData(
            partition_index=partition,
            error_code=0,
            high_watermark=high_watermark,
            last_stable_offset=last_stable_offset,
            log_start_offset=log.log_start_offset,
            aborted_transactions=aborted,
            records=info.records,
        ), len(info.records)

    def _diverging(self, hosted: HostedPartition, position: int, diverging: Any) -> tuple[Any, int]:
        """A follower whose log diverges from ours (Fetch v12+): no records, its follower state
        untouched (as Kafka's), the end of its last epoch in our log to truncate to."""
        self.answer_now = True
        self.hosted[position] = hosted
        log = hosted.log
        return R.PartitionData(
            partition_index=hosted.partition,
            error_code=0,
            high_watermark=log.high_watermark,
            last_stable_offset=log.last_stable_offset,
            log_start_offset=log.log_start_offset,
            diverging_epoch=R.PartitionData.EpochEndOffset(
                epoch=diverging.leader_epoch, end_offset=diverging.end_offset
            ),
            aborted_transactions=None,
            records=b"",
        ), 0

    def watch_read(self) -> None:
        """Subscribe the session to every partition this pass found (after the reads)."""
        if self.watcher is not None:
            for hosted in self.hosted:
                if hosted is not None:
                    self._watch(hosted)

    def response_topics(self, incremental: bool) -> list[Any]:
        """The answer grouped by topic; an incremental one keeps only partitions with news."""
        topics: list[Any] = []
        by_topic: dict[str, list[Any]] = {}
        for ((topic, _), _, cached), result, size in zip(
            self.items, self.results, self.sizes, strict=True
        ):
            if result is None:
                continue  # no news (incremental fast path)
            if cached is not None:
                if result.error_code != ErrorCode.NONE:
                    cached.hosted = None
                news = cached.must_respond(
                    result.error_code, size, result.high_watermark, result.log_start_offset
                )
                if incremental and not news and result.diverging_epoch.epoch < 0:
                    continue
            partitions = by_topic.get(topic)
            if partitions is None:
                partitions = by_topic[topic] = []
                topics.append(R.FetchableTopicResponse(
                    topic=topic, topic_id=self.topic_ids.get(topic, ZERO_UUID),
                    partitions=partitions,
                ))  # fmt: skip
            partitions.append(result)
        return topics


@dataclasses.dataclass
class _Fetch:
    """A Fetch request as this handler reads it, whatever its version: who fetches (v15+ in
    the tagged replica_state, with its broker epoch: KIP-903) and its topics by name (v13+
    names them by id: resolved through the image; ids it does not know are set aside)."""

    body: Any
    image: Any  # the MetadataImage the request was read against
    version: int
    replica_id: int
    replica_epoch: int
    topics: list[tuple[str, Any]]  # (name, FetchTopic)
    forgotten: list[tuple[str, int]]
    unknown_topic_ids: list[Any]  # FetchTopics naming an id the image does not know

    @classmethod
    def read(cls, body: Any, version: int, image: Any) -> _Fetch:
        if version >= 15:
            replica_id, replica_epoch = (
                body.replica_state.replica_id,
                body.replica_state.replica_epoch,
            )
        else:
            replica_id, replica_epoch = body.replica_id, -1
        forgotten_data = body.forgotten_topics_data or ()
        if version < 13:
            topics = [(t.topic, t) for t in body.topics]
            forgotten = [(t.topic, p) for t in forgotten_data for p in t.partitions]
            return cls(body, image, version, replica_id, replica_epoch, topics, forgotten, [])
        topics, unknown = [], []
        for t in body.topics:
            known = image.topics.get(t.topic_id)
            if known is None:
                unknown.append(t)
            else:
                topics.append((known.name, t))
        forgotten = [
            (image.topics[t.topic_id].name, p)
            for t in forgotten_data
            if t.topic_id in image.topics
            for p in t.partitions
        ]
        return cls(body, image, version, replica_id, replica_epoch, topics, forgotten, unknown)

    def set_aside_unauthorized(self, ctx: BrokerContext, request: Request) -> list[Any]:
        """Authorization: a replica needs CLUSTER_ACTION on the cluster, a consumer READ on
        each topic (Kafka's KafkaApis.handleFetchRequest). The partitions refused leave this
        fetch; their TOPIC_AUTHORIZATION_FAILED answers are returned."""
        if self.replica_id >= 0:
            may_read = allowed_cluster(ctx, request, AclOperation.CLUSTER_ACTION)
            refused = [] if may_read else self.topics
        else:
            refused = [(name, t) for name, t in self.topics
                       if not allowed(ctx, request, AclOperation.READ, ResourceType.TOPIC, name)]  # fmt: skip
        if not refused:
            return []
        names = {name for name, _ in refused}
        self.topics = [(name, t) for name, t in self.topics if name not in names]
        return [
            R.FetchableTopicResponse(
                topic=name, topic_id=getattr(t, "topic_id", ZERO_UUID), partitions=[
                    R.PartitionData(partition_index=fp.partition, high_watermark=-1,
                                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    for fp in t.partitions
                ],
            )
            for name, t in refused
        ]  # fmt: skip

    def unknown_topic_responses(self) -> list[Any]:
        return [
            R.FetchableTopicResponse(topic_id=t.topic_id, partitions=[
                R.PartitionData(partition_index=fp.partition,
                                error_code=ErrorCode.UNKNOWN_TOPIC_ID, high_watermark=-1)
                for fp in t.partitions
            ])
            for t in self.unknown_topic_ids
        ]  # fmt: skip


def _session_items(fetch: _Fetch, decision: SessionDecision, now_ms: int) -> list[_Item]:
    """Apply the request to its session (if any); the partitions this fetch reads."""
    session = decision.session
    if session is None:
        return [((name, fp.partition), fp, None) for name, t in fetch.topics for fp in t.partitions]
    requested = [
        ((name, fp.partition), CachedPartition(
            fp.fetch_offset, fp.log_start_offset, fp.partition_max_bytes, fp.current_leader_epoch,
            fp.last_fetched_epoch,
        ))
        for name, t in fetch.topics
        for fp in t.partitions
    ]  # fmt: skip
    forgotten = fetch.forgotten
    update_session(session, requested, forgotten, full=not decision.incremental)
    return _cached_items(session, session.candidates(now_ms))


def _cached_items(session: FetchSession, keys: list[Any]) -> list[_Item]:
    partitions = session.partitions
    return [(key, partitions[key], partitions[key]) for key in keys if key in partitions]


async def _wait_for_any(fetch_pass: _FetchPass, timeout_ms: int) -> list[int]:
    """Wait until any read partition signals (or `timeout_ms`); the positions that did."""
    waiter = FetchWaiter(for_data=fetch_pass.replica_id >= 0)
    watched = [(i, h) for i, h in enumerate(fetch_pass.hosted) if h is not None]
    for _, hosted in watched:
        hosted.fetch_waiters.add(waiter)
    try:
        with trio.move_on_after(min(max(timeout_ms, 0), MAX_WAIT_MS) / 1000):
            await waiter.event.wait()
    finally:
        for _, hosted in watched:
            hosted.fetch_waiters.discard(waiter)
    return [i for i, hosted in watched if id(hosted) in waiter.signalled]


async def _wait_for_session(fetch_pass: _FetchPass, session: FetchSession,
                            timeout_ms: float) -> list[int]:  # fmt: skip
    """A session's long poll: wait until any of its partitions signals (or `timeout_ms`); the
    positions in the pass of those that did (partitions new to the pass are added to it)."""
    watcher = session.watcher
    if not session.dirty:
        watcher.event = trio.Event()
        try:
            with trio.move_on_after(min(max(timeout_ms, 0), MAX_WAIT_MS) / 1000):
                await watcher.event.wait()
        finally:
            watcher.event = None
    keys = [key for key in session.dirty if key in session.partitions]
    session.dirty.clear()
    return fetch_pass.add(_cached_items(session, keys))


async def handle_fetch(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    image = ctx.replica_manager.sync()
    fetch = _Fetch.read(body, request.api_version, image)
    if fetch.replica_id < 0:  # a consumer: as Produce, wait for a dead leader's successor
        named = ((name, fp.partition) for name, t in fetch.topics for fp in t.partitions)
        image = await ctx.await_new_leaders(image, partitions=named)
    refused = fetch.set_aside_unauthorized(ctx, request)
    if refused and fetch.replica_id >= 0:  # a replica without CLUSTER_ACTION: no session
        return R(error_code=0, session_id=0, responses=refused)
    if fetch.replica_id >= 0 and fetch.replica_epoch >= 0:
        # KIP-903: a fetch from an incarnation older than the broker's registration in our
        # image comes from a process that is gone (or lost its disk since): refused.
        registration = image.brokers.get(fetch.replica_id)
        if registration is not None and registration.broker_epoch > fetch.replica_epoch:
            return R(error_code=ErrorCode.STALE_BROKER_EPOCH, session_id=0, responses=[])
    decision = SessionDecision(None)
    if request.api_version >= 7:
        decision = ctx.fetch_sessions.decide(
            body.session_id, body.session_epoch, may_create=fetch.replica_id >= 0
        )
        if decision.error != ErrorCode.NONE:
            return R(error_code=decision.error, session_id=0, responses=[])
        if fetch.unknown_topic_ids and decision.session is not None:
            # The session holds topics by name, so it would not hold these partitions and the
            # fetcher's incremental fetches would never name them again: no session. The
            # fetcher starts over with a full fetch (our image is only behind on a new topic).
            ctx.fetch_sessions.close(decision.session.session_id)
            decision = SessionDecision(None)
    fill_order = request.connection_state.get("fetch_fill_order")
    if fill_order is None:
        fill_order = request.connection_state["fetch_fill_order"] = FetchFillOrder()
    session = decision.session
    if session is not None and session.watcher is None:
        session.watcher = SessionWatcher(session)
    items = _session_items(fetch, decision, ctx.clock_ms())
    fetch_pass = _FetchPass(ctx, fetch, items, fill_order, decision.incremental,
                            session.watcher if session is not None else None)  # fmt: skip
    fetch_pass.hints.listener = listener_of(request)
    fetch_pass.read()
    fetch_pass.watch_read()
    deadline = trio.current_time() + min(max(body.max_wait_ms, 0), MAX_WAIT_MS) / 1000
    while (
        fetch_pass.total_bytes < body.min_bytes
        and not fetch_pass.answer_now
        and trio.current_time() < deadline
    ):
        remaining_ms = (deadline - trio.current_time()) * 1000
        if session is None:
            signalled = await _wait_for_any(fetch_pass, remaining_ms)
        else:
            signalled = await _wait_for_session(fetch_pass, session, remaining_ms)
        if signalled:
            fetch_pass.read(signalled)
            fetch_pass.watch_read()
    if session is not None:
        for key in fetch_pass.unsettled_keys():
            session.mark_dirty(key)
    return R(
        error_code=0,
        session_id=decision.response_session_id,
        responses=fetch_pass.response_topics(decision.incremental)
        + fetch.unknown_topic_responses()
        + refused,
        node_endpoints=fetch_pass.hints.node_endpoints(),
    )
