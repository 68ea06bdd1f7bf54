"""HostedPartition: one partition this broker hosts (Kafka's Partition), and who waits on it.

A hosted partition joins its `UnifiedLog` with the sans-IO replication state
(`log.replication.partition_state.PartitionState`: role, leader epoch, ISR, follower fetch
state, the high-watermark rule) and the copies of that state the request paths read without a
lookup (`leader_epoch`, `isr`, `replicas`, `is_leader`, refreshed by the ReplicaManager).

Waiting. Everything that waits on a partition is woken by `signal_high_watermark`, which the
ReplicaManager calls when the log start offset moves and when leadership or the ISR changes.
Two narrower signals wake only the waits that can progress (Kafka's DelayedFetch.tryComplete:
a consumer reads up to the high watermark, a follower up to the log end offset), so no task
wakes to read nothing and wait again: `signal_appended` (records appended, the high watermark
and last stable offset unmoved) wakes replica fetches only; `signal_high_watermark_moved` (a
follower's fetch moved the HW) wakes acks=all appends, DeleteRecords and consumer fetches, and
only marks the partition dirty in fetch sessions (a follower's long poll waits for data; the
new HW rides on its next answer). The waits:
- an acks=all append or a DeleteRecords waits on the `high_watermark_changed` trio Event
  (replaced after each set) and re-checks its condition when woken;
- a long-polling Fetch names many partitions, so it registers one `FetchWaiter` in each
  partition's `fetch_waiters` (no task per partition), which remembers which signalled;
- a fetch session's `SessionWatcher` stays subscribed across rounds and marks its partition
  dirty in the session. No timer loops anywhere.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import trio

from log.replication.partition_state import PartitionState
from log.storage.log import UnifiedLog


class FetchWaiter:
    """A long-polling fetch: woken by any partition it reads, remembering which signalled.
    A replica's fetch (`for_data`) waits for appended records, a consumer's for the HW."""

    __slots__ = ("event", "signalled", "for_data")

    def __init__(self, for_data: bool = False) -> None:
        self.event = trio.Event()
        self.signalled: set[int] = set()  # id() of the HostedPartition objects that signalled
        self.for_data = for_data

    def wake(self, hosted: HostedPartition) -> None:
        self.signalled.add(id(hosted))
        self.event.set()


class SessionWatcher:
    """A fetch session's standing subscription to its partitions' signals: each signal marks
    the partition dirty in the session (so the next round reads it) and wakes the session's
    long poll, if one is waiting. Unlike a FetchWaiter it stays subscribed across rounds."""

    __slots__ = ("session", "event")

    def __init__(self, session: Any) -> None:
        self.session = session  # a log.replication.fetch_session.FetchSession
        self.event: trio.Event | None = None  # set while a long poll waits

    @property
    def closed(self) -> bool:
        return bool(self.session.evicted)

    def wake(self, hosted: HostedPartition) -> None:
        self.mark(hosted)
        if self.event is not None:
            self.event.set()

    def mark(self, hosted: HostedPartition) -> None:
        """Read the partition in the session's next round, without ending its long poll."""
        self.session.mark_dirty((hosted.topic, hosted.partition))


@dataclasses.dataclass
class HostedPartition:
    topic: str
    partition: int
    log: UnifiedLog
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    is_leader: bool
    state: PartitionState
    high_watermark_changed: trio.Event = dataclasses.field(default_factory=trio.Event)
    # Long-polling fetches waiting on this partition among others: one waiter per fetch,
    # however many partitions it names (no task per partition).
    fetch_waiters: set[FetchWaiter] = dataclasses.field(default_factory=set)
    # Fetch sessions reading this partition (standing; closed ones are dropped when signalled).
    session_watchers: set[SessionWatcher] = dataclasses.field(default_factory=set)

    def signal_high_watermark(self) -> None:
        """Anything may have changed: every wait re-checks."""
        self._wake_high_watermark_waiters()
        if self.fetch_waiters:
            for waiter in self.fetch_waiters:
                waiter.wake(self)
            self.fetch_waiters.clear()
        self._signal_sessions(wake=True)

    def signal_appended(self) -> None:
        """Records were appended, the high watermark and last stable offset did not move: only
        replica fetches can read more."""
        if self.fetch_waiters:
            woken = [waiter for waiter in self.fetch_waiters if waiter.for_data]
            for waiter in woken:
                waiter.wake(self)
                self.fetch_waiters.discard(waiter)
        self._signal_sessions(wake=True)

    def signal_high_watermark_moved(self) -> None:
        """The high watermark moved (no records appended, the log start offset unmoved)."""
        self._wake_high_watermark_waiters()
        if self.fetch_waiters:
            woken = [waiter for waiter in self.fetch_waiters if not waiter.for_data]
            for waiter in woken:
                waiter.wake(self)
                self.fetch_waiters.discard(waiter)
        self._signal_sessions(wake=False)

    def _wake_high_watermark_waiters(self) -> None:
        self.high_watermark_changed.set()
        self.high_watermark_changed = trio.Event()

    def _signal_sessions(self, *, wake: bool) -> None:
        if self.session_watchers:
            closed = [w for w in self.session_watchers if w.closed]
            for watcher in closed:
                self.session_watchers.discard(watcher)
            for watcher in self.session_watchers:
                if wake:
                    watcher.wake(self)
                else:
                    watcher.mark(self)
