"""Delayed operations and their purgatory (Kafka's DelayedOperationPurgatory), sans-IO.

A request that cannot be answered yet (acks=all produce waiting for the high watermark; a fetch
waiting for `min_bytes`) becomes a `DelayedOperation` watched under its topic-partition keys:

- `try_complete_else_watch(op)`: complete now if possible, else watch it (bounded: beyond
  `max_operations` pending, a new one is refused with a retriable `PurgatoryFullError`).
- `check_and_complete(key)`: the driver calls this when something about `key` changed (the high
  watermark moved, data was appended, leadership changed); returns the operations completed.
- `expire(now_ms)`: completes the operations past their deadline (`on_expiration` sets their
  timeout result); `next_deadline_ms()` says when the driver should call it next.

Each operation completes exactly once (`completed` is set by the purgatory); the driver then
sends its response. Operation outcome per kind:

- DelayedProduce, per partition still waiting (Kafka's tryComplete):
  A. no such partition here any more -> NOT_LEADER_OR_FOLLOWER;
  B. no longer leader -> NOT_LEADER_OR_FOLLOWER (from `check_enough_replicas_reach_offset`);
  C. leader, HW >= required offset -> done, NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR fell below
     min.insync.replicas else NONE; otherwise keep waiting. At the deadline: REQUEST_TIMED_OUT.
- DelayedFetch completes when the readable bytes past each fetch offset add up to `min_bytes`,
  or a partition lost leadership / changed leader epoch / was truncated below the fetch offset,
  or at the deadline (`max_wait_ms`). The driver then reads the logs; the operation only decides
  *when*.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from log.common.errors import ErrorCode, KafkaError
from log.replication.partition_state import PartitionState
from log.replication.replica_log import UNDEFINED_EPOCH

# Default bound on operations waiting in one purgatory.
DEFAULT_MAX_OPERATIONS = 100_000


class PurgatoryFullError(KafkaError):
    """Too many operations waiting; the client sees a timeout now instead of later and retries."""

    error_code = ErrorCode.REQUEST_TIMED_OUT


class DelayedOperation:
    """Something waiting on topic-partition `keys` until `try_complete()` is true or `deadline_ms`."""

    def __init__(self, deadline_ms: int, keys: tuple[Hashable, ...]) -> None:
        assert keys, "an operation must watch at least one key"
        self.deadline_ms = deadline_ms
        self.keys = keys
        self.completed = False
        self.expired = False

    def try_complete(self) -> bool:
        """Whether the operation can complete now (set its result if so). Override."""
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Set the result for a deadline passed without completion. Override if needed."""


Op = TypeVar("Op", bound=DelayedOperation)


class DelayedOperationPurgatory(Generic[Op]):
    """Pending operations of one kind, watched by key, expired by deadline."""

    def __init__(self, name: str, max_operations: int = DEFAULT_MAX_OPERATIONS) -> None:
        assert max_operations > 0
        self.name = name
        self.max_operations = max_operations
        self._watchers: dict[Hashable, dict[int, Op]] = {}
        self._deadlines: list[tuple[int, int, Op]] = []  # (deadline_ms, sequence, op)
        self._pending: dict[int, Op] = {}
        self._sequence = itertools.count()

    def __len__(self) -> int:
        return len(self._pending)

    def try_complete_else_watch(self, op: Op) -> bool:
        """Complete `op` now (True) or watch it until it can complete or expires (False)."""
        assert not op.completed
        if op.try_complete():
            op.completed = True
            return True
        if len(self._pending) >= self.max_operations:
            raise PurgatoryFullError(
                f"{self.name}: {len(self._pending)} operations already waiting"
            )
        op_id = id(op)
        self._pending[op_id] = op
        for key in op.keys:
            self._watchers.setdefault(key, {})[op_id] = op
        heapq.heappush(self._deadlines, (op.deadline_ms, next(self._sequence), op))
        return False

    def check_and_complete(self, key: Hashable) -> list[Op]:
        """Try every operation watching `key`; return those that completed."""
        watching = self._watchers.get(key)
        if not watching:
            return []
        completed = [op for op in list(watching.values()) if op.try_complete()]
        for op in completed:
            self._finish(op)
        return completed

    def expire(self, now_ms: int) -> list[Op]:
        """Complete (as expired) every pending operation whose deadline is <= now_ms."""
        expired = []
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            _, _, op = heapq.heappop(self._deadlines)
            if op.completed:
                continue
            op.expired = True
            op.on_expiration()
            self._finish(op)
            expired.append(op)
        return expired

    def next_deadline_ms(self) -> int | None:
        """The earliest deadline of a pending operation (None: nothing waits)."""
        while self._deadlines and self._deadlines[0][2].completed:
            heapq.heappop(self._deadlines)
        return self._deadlines[0][0] if self._deadlines else None

    def _finish(self, op: Op) -> None:
        op.completed = True
        op_id = id(op)
        del self._pending[op_id]
        for key in op.keys:
            watching = self._watchers.get(key)
            if watching is not None:
                watching.pop(op_id, None)
                if not watching:
                    del self._watchers[key]
        # Completed operations linger in the deadline heap; compact when they dominate it.
        if len(self._deadlines) > 2 * len(self._pending) + 64:
            self._deadlines = [entry for entry in self._deadlines if not entry[2].completed]
            heapq.heapify(self._deadlines)


PartitionLookup = Callable[[Hashable], PartitionState | None]


@dataclass
class ProducePartitionStatus:
    """One partition of a waiting acks=all produce: HW must reach `required_offset`."""

    required_offset: int  # last offset of the appended batch + 1
    min_insync_replicas: int
    acks_pending: bool = True
    error: ErrorCode = ErrorCode.NONE


class DelayedProduce(DelayedOperation):
    """An acks=all produce waiting for its partitions' high watermarks (cases A/B/C)."""

    def __init__(
        self,
        deadline_ms: int,
        produce_status: Mapping[Hashable, ProducePartitionStatus],
        partition_for: PartitionLookup,
    ) -> None:
        super().__init__(deadline_ms, tuple(produce_status))
        self.produce_status = dict(produce_status)
        self.partition_for = partition_for

    def try_complete(self) -> bool:
        for topic_partition, status in self.produce_status.items():
            if not status.acks_pending:
                continue
            partition = self.partition_for(topic_partition)
            if partition is None:  # Case A
                done, error = False, ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:  # Case B (not leader) or C (leader: HW reached, with or without min ISR)
                done, error = partition.check_enough_replicas_reach_offset(
                    status.required_offset, status.min_insync_replicas
                )
            if done or error != ErrorCode.NONE:
                status.acks_pending = False
                status.error = error
        return not any(status.acks_pending for status in self.produce_status.values())

    def on_expiration(self) -> None:
        for status in self.produce_status.values():
            if status.acks_pending:
                status.acks_pending = False
                status.error = ErrorCode.REQUEST_TIMED_OUT


@dataclass(frozen=True)
class FetchPartitionStatus:
    fetch_offset: int
    current_leader_epoch: int = UNDEFINED_EPOCH


# (topic_partition, fetch_offset) -> bytes readable past fetch_offset (up to the HW for consumers,
# the log end offset for followers), or None when fetch_offset is no longer readable (truncated).
ReadableBytes = Callable[[Hashable, int], int | None]


class DelayedFetch(DelayedOperation):
    """A fetch waiting for `min_bytes` across its partitions, or for `max_wait_ms`."""

    def __init__(
        self,
        deadline_ms: int,
        fetch_status: Mapping[Hashable, FetchPartitionStatus],
        min_bytes: int,
        partition_for: PartitionLookup,
        readable_bytes: ReadableBytes,
    ) -> None:
        super().__init__(deadline_ms, tuple(fetch_status))
        assert min_bytes >= 0
        self.fetch_status = dict(fetch_status)
        self.min_bytes = min_bytes
        self.partition_for = partition_for
        self.readable_bytes = readable_bytes
        self.accumulated_bytes = 0

    def try_complete(self) -> bool:
        accumulated_bytes = 0
        for topic_partition, status in self.fetch_status.items():
            partition = self.partition_for(topic_partition)
            if partition is None or not partition.is_leader:
                return True  # leadership moved: answer now, the client will find the new leader
            epoch = status.current_leader_epoch
            if epoch != UNDEFINED_EPOCH and epoch != partition.leader_epoch:
                return True  # the fetch's view is stale: answer with the epoch error now
            readable = self.readable_bytes(topic_partition, status.fetch_offset)
            if readable is None:
                return True  # truncated below the fetch offset: answer (OFFSET_OUT_OF_RANGE)
            accumulated_bytes += readable
        self.accumulated_bytes = accumulated_bytes
        return accumulated_bytes >= self.min_bytes
