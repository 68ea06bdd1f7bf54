"""RecordAccumulator: per-partition queues of ProducerBatch between `send()` and the sender.

Sans-IO. `try_append` is synchronous; when a new batch is needed and no buffer was passed it
returns NEEDS_BUFFER with the size to allocate, the driver awaits `BufferPool.allocate` (the only
place that blocks, up to max.block.ms) and calls `try_append` again with the buffer::

    result = acc.try_append(topic, None, ts, key, value, headers, now_ms, cluster)
    while result.status is AppendStatus.NEEDS_BUFFER:
        buffer = pool.try_allocate_nowait(result.buffer_size_bytes) or await pool.allocate(
            result.buffer_size_bytes, remaining_max_block_ms)
        result = acc.try_append(topic, None, ts, key, value, headers, now_ms, cluster,
                                buffer=buffer)

(A passed buffer that turns out not to be needed, because another append opened a batch
meanwhile, is returned to the pool by the accumulator.) Unpartitioned records are placed by the
topic's BuiltInPartitioner (sticky / adaptive), keyed ones by murmur2.

The sender loop, each turn, with its clock's `now_ms`:

1. `expired_batches(now_ms)` -> fail them (delivery.timeout.ms) and `deallocate`.
2. `ready(cluster, now_ms)` -> nodes with sendable data; sleep at most
   `next_ready_check_delay_ms` when none. A partition's head batch is sendable when its queue
   holds more than one batch or it is full, linger.ms passed since creation (or retry backoff
   since its last attempt, for a retry), memory is exhausted (someone waits in the pool), a flush
   is in progress, or the accumulator is closing. Retries in backoff are never sendable. This also
   refreshes each topic's adaptive load table from the queue sizes.
3. `drain(cluster, ready_nodes, max_request_size, now_ms)` -> {node_id: [batches]}: at most one
   batch per partition, partitions visited round-robin from where the node's last drain stopped,
   stopping before `max_request_size` would be exceeded (a single oversized first batch still
   goes). Muted partitions (max.in.flight = 1) and, with idempotence, partitions whose order must
   wait (see IdempotenceManager.should_stop_drain) are skipped; sequences are assigned here.
4. Each partition's produce response goes to `handle_partition_response`, which completes the
   batch, re-enqueues it (front of the queue, in sequence order) for a retry, splits it after
   MESSAGE_TOO_LARGE, or fails it, keeping the idempotence bookkeeping (Kafka's
   Sender.completeBatch). Its lower-level steps (`complete`, `can_retry`, `reenqueue`,
   `split_and_reenqueue`) are public too.
"""

from __future__ import annotations

import collections
import enum
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from log.common.errors import (
    ErrorCode,
    KafkaError,
    MessageTooLargeError,
    UnknownTopicOrPartitionError,
    error_for,
)
from log.records.batch_header import HEADER_BYTES
from log.records.builder import Header
from producer.backoff import backoff_ms
from producer.cluster_view import ClusterView, TopicPartition
from producer.config import ProducerConfig
from producer.errors import DeliveryTimeoutError, ProducerClosedError
from producer.idempotence import IdempotenceManager
from producer.partitioner import BuiltInPartitioner, StickyPartitionInfo, partition_for_key
from producer.producer_batch import (
    ProducerBatch,
    RecordHandle,
    estimate_batch_size_upper_bound,
)

if TYPE_CHECKING:  # the pool's waiting is trio; this core only uses its synchronous side
    from producer.buffer_pool import BufferPool

# Kafka's sender sleeps "forever" (Long.MAX_VALUE) when nothing is pending; drivers cap this
# with their own timers (metadata refresh, request timeouts).
NO_READY_CHECK_DELAY_MS = 2**63 - 1
RETRY_BACKOFF_JITTER = 0.2  # Kafka's ExponentialBackoff jitter for retry.backoff.ms


class AppendStatus(enum.Enum):
    APPENDED = "appended"
    NEEDS_BUFFER = "needs_buffer"
    ABORT_FOR_NEW_BATCH = "abort_for_new_batch"


@dataclass(frozen=True, slots=True)
class AppendResult:
    status: AppendStatus
    topic_partition: TopicPartition
    handle: RecordHandle | None = None
    new_batch_created: bool = False
    batch_is_full: bool = False  # wake the sender: a batch is ready regardless of linger
    buffer_size_bytes: int = 0  # with NEEDS_BUFFER: allocate this much


class ResponseAction(enum.Enum):
    COMPLETED = "completed"  # success (or a duplicate the broker already had)
    RETRY = "retry"  # re-enqueued; sendable again after its backoff
    SPLIT = "split"  # MESSAGE_TOO_LARGE: replaced by smaller batches at the queue front
    FAILED = "failed"  # handles failed with the error
    IGNORED = "ignored"  # the batch had already expired or been aborted


@dataclass(frozen=True, slots=True)
class ResponseOutcome:
    action: ResponseAction
    refresh_metadata: bool = False  # the error says our leader information is stale


_METADATA_ERRORS = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.NETWORK_EXCEPTION,
    }
)


def _needs_metadata_refresh(error_code: int) -> bool:
    return error_code in _METADATA_ERRORS


@dataclass(frozen=True, slots=True)
class ReadyCheckResult:
    ready_nodes: frozenset[int]
    next_ready_check_delay_ms: int
    unknown_leader_topics: frozenset[str]


@dataclass(slots=True)
class _NodeLatencyStats:
    ready_time_ms: int
    drain_time_ms: int


class _TopicInfo:
    __slots__ = ("batches", "partitioner")

    def __init__(self, partitioner: BuiltInPartitioner) -> None:
        self.batches: dict[int, collections.deque[ProducerBatch]] = {}
        self.partitioner = partitioner


class RecordAccumulator:
    def __init__(
        self,
        config: ProducerConfig,
        buffer_pool: BufferPool,
        rng: random.Random,
        idempotence: IdempotenceManager | None = None,
    ) -> None:
        assert buffer_pool.pooled_size_bytes == config.batch_size
        self.config = config
        self.buffer_pool = buffer_pool
        self.idempotence = idempotence
        self._rng = rng
        self._compression = config.compression
        self._topics: dict[str, _TopicInfo] = {}
        self._incomplete: dict[int, ProducerBatch] = {}  # id(batch) -> batch, insertion order
        self._muted: set[TopicPartition] = set()
        self._drain_index: dict[int, int] = {}
        self._node_stats: dict[int, _NodeLatencyStats] = {}
        self._flushes_in_progress = 0
        self._closed = False
        self.next_batch_expiry_time_ms = NO_READY_CHECK_DELAY_MS

    # -- append -----------------------------------------------------------------------------------

    def try_append(
        self,
        topic: str,
        partition: int | None,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        now_ms: int,
        cluster: ClusterView,
        *,
        buffer: bytearray | None = None,
        abort_on_new_batch: bool = False,
    ) -> AppendResult:
        """Append a record to its partition's last batch, or open a batch in `buffer`.

        `partition` None lets the partitioner choose (murmur2 of the key, else sticky). Raises
        MessageTooLargeError for a record that can never be sent, UnknownTopicOrPartitionError
        for a partition outside the topic, ProducerClosedError after `close()`.
        """
        try:
            return self._try_append(
                topic, partition, timestamp_ms, key, value, headers, now_ms, cluster, buffer,
                abort_on_new_batch,
            )  # fmt: skip
        except BaseException:
            if buffer is not None:
                self.buffer_pool.deallocate(buffer)
            raise

    def _try_append(
        self,
        topic: str,
        partition: int | None,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        now_ms: int,
        cluster: ClusterView,
        buffer: bytearray | None,
        abort_on_new_batch: bool,
    ) -> AppendResult:
        if self._closed:
            raise ProducerClosedError("producer closed while send in progress")
        record_size = estimate_batch_size_upper_bound(self._compression, key, value, headers)
        self._ensure_valid_record_size(record_size)
        partition_count = cluster.partition_count(topic)
        if partition_count is None or partition_count < 1:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} is not in the metadata")
        if partition is not None and not 0 <= partition < partition_count:
            raise UnknownTopicOrPartitionError(
                f"invalid partition {partition} for topic {topic!r}: "
                f"not in the range [0...{partition_count - 1}]"
            )
        topic_info = self._topic_info(topic)
        sticky: StickyPartitionInfo | None = None
        if partition is None and key is not None and not self.config.partitioner_ignore_keys:
            partition = partition_for_key(key, partition_count)
        if partition is None:
            sticky = topic_info.partitioner.peek_current_partition_info(
                partition_count, cluster.available_partitions(topic)
            )
            partition = sticky.partition
        tp = TopicPartition(topic, partition)
        queue = topic_info.batches.setdefault(partition, collections.deque())

        last = queue[-1] if queue else None
        if last is not None:
            size_before = last.estimated_size_bytes
            handle = last.try_append(timestamp_ms, key, value, headers, now_ms)
            if handle is not None:
                if buffer is not None:
                    self.buffer_pool.deallocate(buffer)
                self._update_sticky(topic_info, sticky, last.estimated_size_bytes - size_before,
                                    partition_count, cluster, queue)  # fmt: skip
                return AppendResult(
                    AppendStatus.APPENDED, tp, handle, batch_is_full=len(queue) > 1 or last.is_full
                )
        if abort_on_new_batch:
            if buffer is not None:
                self.buffer_pool.deallocate(buffer)
            return AppendResult(AppendStatus.ABORT_FOR_NEW_BATCH, tp)
        size_bytes = max(self.config.batch_size, record_size)
        if buffer is None or len(buffer) < size_bytes:
            if buffer is not None:
                self.buffer_pool.deallocate(buffer)
            return AppendResult(AppendStatus.NEEDS_BUFFER, tp, buffer_size_bytes=size_bytes)
        batch = ProducerBatch(tp, buffer, now_ms, self._compression)
        handle = batch.try_append(timestamp_ms, key, value, headers, now_ms)
        assert handle is not None, "a fresh batch holds its first record"
        queue.append(batch)
        self._incomplete[id(batch)] = batch
        self._update_sticky(topic_info, sticky, batch.estimated_size_bytes, partition_count,
                            cluster, queue)  # fmt: skip
        return AppendResult(
            AppendStatus.APPENDED,
            tp,
            handle,
            new_batch_created=True,
            batch_is_full=len(queue) > 1 or batch.is_full,
        )

    def enqueue_batch(self, batch: ProducerBatch) -> None:
        """Queue a batch built outside `try_append` (the bulk path's columnar batches) at its
        partition's tail, behind any open batch, and track it until it completes."""
        if self._closed:
            raise ProducerClosedError("producer closed while send in progress")
        self._queue(batch.topic_partition).append(batch)
        self._incomplete[id(batch)] = batch

    def queue_length(self, topic_partition: TopicPartition) -> int:
        """Batches queued for one partition (more than one: all but the last are sendable)."""
        info = self._topics.get(topic_partition.topic)
        queue = None if info is None else info.batches.get(topic_partition.partition)
        return 0 if queue is None else len(queue)

    def _ensure_valid_record_size(self, size_bytes: int) -> None:
        if size_bytes > self.config.max_request_size:
            raise MessageTooLargeError(
                f"the message is {size_bytes} bytes when serialized which is larger than "
                f"{self.config.max_request_size}, the value of max.request.size"
            )
        if size_bytes > self.config.buffer_memory:
            raise MessageTooLargeError(
                f"the message is {size_bytes} bytes when serialized which is larger than the "
                f"total memory buffer {self.config.buffer_memory} (buffer.memory)"
            )

    def _topic_info(self, topic: str) -> _TopicInfo:
        info = self._topics.get(topic)
        if info is None:
            partitioner = BuiltInPartitioner(topic, self.config.batch_size, self._rng)
            info = self._topics[topic] = _TopicInfo(partitioner)
        return info

    def _update_sticky(
        self,
        topic_info: _TopicInfo,
        sticky: StickyPartitionInfo | None,
        appended_bytes: int,
        partition_count: int,
        cluster: ClusterView,
        queue: collections.deque[ProducerBatch],
    ) -> None:
        if sticky is None:
            return
        # Switch only at a batch boundary: once the last batch is full or a new one was started.
        enable_switch = len(queue) > 1 or queue[-1].is_full
        topic_info.partitioner.update_partition_info(
            sticky,
            appended_bytes,
            partition_count,
            cluster.available_partitions(topic_info.partitioner.topic),
            enable_switch,
        )

    # -- ready ------------------------------------------------------------------------------------

    def ready(self, cluster: ClusterView, now_ms: int) -> ReadyCheckResult:
        """Leader nodes with sendable data, when to check again, topics lacking a leader."""
        ready_nodes: set[int] = set()
        unknown_leader_topics: set[str] = set()
        next_delay_ms = NO_READY_CHECK_DELAY_MS
        exhausted = self.buffer_pool.queued_waiter_count > 0
        for topic, info in self._topics.items():
            partition_count = cluster.partition_count(topic) or 0
            adaptive = (
                self.config.partitioner_adaptive_partitioning_enable
                and partition_count > 0
                and len(info.batches) >= partition_count
            )
            queue_sizes: list[int] = []
            partition_ids: list[int] = []
            for partition, queue in info.batches.items():
                tp = TopicPartition(topic, partition)
                leader = cluster.leader_for(tp)
                if leader is not None and adaptive and self._is_available(leader):
                    queue_sizes.append(len(queue))
                    partition_ids.append(partition)
                if not queue:
                    continue
                if leader is None:
                    unknown_leader_topics.add(topic)
                    continue
                if leader in ready_nodes or tp in self._muted:
                    continue
                delay_ms = self._batch_ready_delay_ms(queue, exhausted, now_ms, leader)
                if delay_ms == 0:
                    ready_nodes.add(leader)
                else:
                    next_delay_ms = min(next_delay_ms, delay_ms)
            info.partitioner.update_partition_load_stats(
                queue_sizes if adaptive else None, partition_ids, partition_count
            )
        return ReadyCheckResult(
            frozenset(ready_nodes), next_delay_ms, frozenset(unknown_leader_topics)
        )

    def _batch_ready_delay_ms(
        self,
        queue: collections.deque[ProducerBatch],
        exhausted: bool,
        now_ms: int,
        leader: int | None = None,
    ) -> int:
        """0 when the head batch is sendable now, else how long until it may be."""
        batch = queue[0]
        waited_ms = batch.waited_time_ms(now_ms)
        backing_off = batch.is_backing_off(now_ms, leader)
        time_to_wait_ms = batch.retry_backoff_ms if backing_off else self.config.linger_ms
        full = len(queue) > 1 or batch.is_full
        sendable = (
            full
            or waited_ms >= time_to_wait_ms
            or exhausted
            or self._closed
            or self._flushes_in_progress > 0
        )
        if sendable and not backing_off:
            return 0
        return max(time_to_wait_ms - waited_ms, 0) or 1  # backing off: never report 0

    def update_node_latency_stats(self, node_id: int, now_ms: int, can_drain: bool) -> None:
        """The sender reports each ready node: could it drain to it (connection ready)?"""
        stats = self._node_stats.get(node_id)
        if stats is None:
            stats = self._node_stats[node_id] = _NodeLatencyStats(now_ms, now_ms)
        stats.ready_time_ms = now_ms
        if can_drain:
            stats.drain_time_ms = now_ms

    def _is_available(self, node_id: int) -> bool:
        timeout_ms = self.config.partitioner_availability_timeout_ms
        stats = self._node_stats.get(node_id)
        if timeout_ms <= 0 or stats is None:
            return True
        return stats.ready_time_ms - stats.drain_time_ms <= timeout_ms

    # -- drain ------------------------------------------------------------------------------------

    def drain(
        self,
        cluster: ClusterView,
        ready_nodes: Sequence[int] | frozenset[int],
        max_request_size: int,
        now_ms: int,
    ) -> dict[int, list[ProducerBatch]]:
        """Take up to `max_request_size` bytes of batches for each ready node."""
        drained: dict[int, list[ProducerBatch]] = {}
        for node_id in sorted(ready_nodes):
            drained[node_id] = self._drain_node(cluster, node_id, max_request_size, now_ms)
        return drained

    def _drain_node(
        self, cluster: ClusterView, node_id: int, max_request_size: int, now_ms: int
    ) -> list[ProducerBatch]:
        partitions = cluster.partitions_for_node(node_id)
        if not partitions:
            return []
        ready: list[ProducerBatch] = []
        size_bytes = 0
        start = self._drain_index.get(node_id, 0) % len(partitions)
        index = start
        while True:
            tp = partitions[index]
            # Remember where we are: a partition that does not fit goes first next time.
            self._drain_index[node_id] = index
            index = (index + 1) % len(partitions)
            batch = self._drainable_head(tp, now_ms, node_id)
            if batch is not None:
                if size_bytes + batch.estimated_size_bytes > max_request_size and ready:
                    break
                if self.idempotence is None or not self.idempotence.should_stop_drain(batch):
                    self._take_head(batch)
                    size_bytes += batch.estimated_size_bytes
                    ready.append(batch)
                    batch.drained(now_ms, node_id)
            if index == start:
                break
        return ready

    def _drainable_head(
        self, tp: TopicPartition, now_ms: int, leader: int | None = None
    ) -> ProducerBatch | None:
        if tp in self._muted:
            return None
        info = self._topics.get(tp.topic)
        queue = info.batches.get(tp.partition) if info is not None else None
        if not queue:
            return None
        first = queue[0]
        if first.is_backing_off(now_ms, leader):
            return None
        return first

    def _take_head(self, batch: ProducerBatch) -> None:
        tp = batch.topic_partition
        queue = self._topics[tp.topic].batches[tp.partition]
        assert queue[0] is batch
        queue.popleft()
        if self.idempotence is not None and not batch.has_sequence:
            self.idempotence.assign_sequence(batch)
        batch.close()

    # -- muting (max.in.flight.requests.per.connection = 1) ------------------------------------------

    def mute_partition(self, tp: TopicPartition) -> None:
        self._muted.add(tp)

    def unmute_partition(self, tp: TopicPartition) -> None:
        self._muted.discard(tp)

    def is_muted(self, tp: TopicPartition) -> bool:
        return tp in self._muted

    # -- retries, expiry, completion ---------------------------------------------------------------

    def retry_backoff_ms(self, attempts: int) -> int:
        """Exponential backoff for the n-th retry (n >= 1) with Kafka's 20 % jitter."""
        assert attempts >= 1
        base_ms = self.config.retry_backoff_ms
        max_ms = self.config.retry_backoff_max_ms
        if base_ms == 0:
            return 0
        exponential = backoff_ms(base_ms, attempts, max_ms)
        jitter = self._rng.uniform(1 - RETRY_BACKOFF_JITTER, 1 + RETRY_BACKOFF_JITTER)
        return max(1, min(int(exponential * jitter), max_ms))

    def can_retry(
        self, batch: ProducerBatch, error_code: int, now_ms: int, log_start_offset: int = -1
    ) -> bool:
        """Sender's retry decision: retriable, retries left, delivery timeout not reached."""
        if batch.is_done or batch.attempts >= self.config.retries:
            return False
        if batch.has_reached_delivery_timeout(self.config.delivery_timeout_ms, now_ms):
            return False
        if self.idempotence is not None:
            return self.idempotence.can_retry(batch, error_code, log_start_offset)
        try:
            return KafkaError(error_code=ErrorCode(error_code)).retriable
        except ValueError:
            return False

    def reenqueue(self, batch: ProducerBatch, now_ms: int) -> None:
        """Put a batch to retry back at the front of its queue (in sequence order)."""
        assert not batch.is_done
        batch.reenqueued(now_ms, self.retry_backoff_ms(batch.attempts + 1))
        queue = self._queue(batch.topic_partition)
        if self.idempotence is not None and batch.has_sequence:
            self._insert_in_sequence_order(queue, batch)
        else:
            queue.appendleft(batch)

    @staticmethod
    def _insert_in_sequence_order(
        queue: collections.deque[ProducerBatch], batch: ProducerBatch
    ) -> None:
        index = 0
        while (
            index < len(queue)
            and queue[index].has_sequence
            and queue[index].base_sequence < batch.base_sequence
        ):
            index += 1
        queue.insert(index, batch)

    def split_and_reenqueue(self, batch: ProducerBatch, now_ms: int) -> list[ProducerBatch]:
        """MESSAGE_TOO_LARGE: split into smaller batches, queued first, order preserved.

        Parts are at most batch.size and at most half the failed batch (Kafka splits by
        batch.size only, which cannot make progress when the broker's limit is below it); a
        record that is too large on its own ends alone in a batch and fails next time.
        """
        if self.idempotence is not None:
            self.idempotence.remove_in_flight_batch(batch)
        split_size_bytes = min(
            self.config.batch_size, max(batch.estimated_size_bytes // 2, HEADER_BYTES + 1)
        )
        parts = batch.split(split_size_bytes, now_ms)
        self.deallocate(batch)
        queue = self._queue(batch.topic_partition)
        for part in reversed(parts):
            self._incomplete[id(part)] = part
            if self.idempotence is not None and part.has_sequence:
                self.idempotence.add_in_flight_batch(part)
                self._insert_in_sequence_order(queue, part)
            else:
                queue.appendleft(part)
        return parts

    def handle_partition_response(
        self,
        batch: ProducerBatch,
        error_code: int,
        now_ms: int,
        *,
        base_offset: int = -1,
        log_append_time_ms: int = -1,
        log_start_offset: int = -1,
    ) -> ResponseOutcome:
        """Apply one partition's produce response (or a synthesized network error) to `batch`."""
        idempotence = self.idempotence
        if batch.is_done:  # expired or aborted while in flight: nothing left to decide
            if idempotence is not None:
                idempotence.remove_in_flight_batch(batch)
            self.deallocate(batch)
            return ResponseOutcome(ResponseAction.IGNORED)
        refresh = _needs_metadata_refresh(error_code)
        if (
            error_code == ErrorCode.MESSAGE_TOO_LARGE
            and batch.record_count > 1
            and batch.splittable
        ):
            self.split_and_reenqueue(batch, now_ms)
            return ResponseOutcome(ResponseAction.SPLIT)
        duplicate = error_code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER or (
            error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            and idempotence is not None
            and idempotence.is_already_acked(batch)
        )
        if error_code == ErrorCode.NONE or duplicate:
            if duplicate and error_code != ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                base_offset = -1
            if idempotence is not None:
                idempotence.handle_completed_batch(batch, base_offset)
            self.complete(batch, base_offset, log_append_time_ms)
            return ResponseOutcome(ResponseAction.COMPLETED)
        if self.can_retry(batch, error_code, now_ms, log_start_offset):
            self.reenqueue(batch, now_ms)
            return ResponseOutcome(ResponseAction.RETRY, refresh)
        error = error_for(error_code)
        if idempotence is not None:
            # Reassigning sequences is only safe if the batch did not exhaust its retries: then
            # we know the broker rejected it; otherwise it might have been written.
            idempotence.handle_failed_batch(batch, error, batch.attempts < self.config.retries)
        self.complete(batch, error=error)
        return ResponseOutcome(ResponseAction.FAILED, refresh)

    def fail_expired_batches(
        self, now_ms: int, in_flight: Sequence[ProducerBatch] = ()
    ) -> list[ProducerBatch]:
        """Fail queued batches past delivery.timeout.ms and the given expired in-flight ones.

        For the idempotent producer a batch that was sent before (in retry) leaves its
        partition's sequence unresolved: no new batch is drained there until it is settled.
        """
        expired = self.expired_batches(now_ms) + [
            batch
            for batch in in_flight
            if not batch.is_done
            and batch.has_reached_delivery_timeout(self.config.delivery_timeout_ms, now_ms)
        ]
        for batch in expired:
            error = self.delivery_timeout_error(batch, now_ms)
            if self.idempotence is not None:
                if batch.in_retry or batch.in_flight_request:
                    self.idempotence.mark_sequence_unresolved(batch)
                self.idempotence.handle_failed_batch(batch, error, adjust_sequence_numbers=False)
            self.complete(batch, error=error)
        return expired

    def expired_batches(self, now_ms: int) -> list[ProducerBatch]:
        """Remove and return queued batches older than delivery.timeout.ms (oldest first).

        The caller fails them (`complete(batch, error=DeliveryTimeoutError(...))`) and, for an
        idempotent producer, marks a sent one's sequence unresolved.
        """
        expired: list[ProducerBatch] = []
        timeout_ms = self.config.delivery_timeout_ms
        self.next_batch_expiry_time_ms = NO_READY_CHECK_DELAY_MS
        for info in self._topics.values():
            for queue in info.batches.values():
                while queue and queue[0].has_reached_delivery_timeout(timeout_ms, now_ms):
                    batch = queue.popleft()
                    batch.close()
                    expired.append(batch)
                if queue:
                    self.next_batch_expiry_time_ms = min(
                        self.next_batch_expiry_time_ms, queue[0].created_ms + timeout_ms
                    )
        return expired

    def delivery_timeout_error(self, batch: ProducerBatch, now_ms: int) -> DeliveryTimeoutError:
        return DeliveryTimeoutError(
            f"expiring {batch.record_count} record(s) for {batch.topic_partition}: "
            f"{now_ms - batch.created_ms} ms has passed since batch creation"
        )

    def complete(
        self,
        batch: ProducerBatch,
        base_offset: int = -1,
        log_append_time_ms: int = -1,
        error: BaseException | None = None,
    ) -> bool:
        """Finish a batch (success or failure) and free its memory; False if already done."""
        completed = batch.done(base_offset, log_append_time_ms, error)
        self.deallocate(batch)
        return completed

    def deallocate(self, batch: ProducerBatch) -> None:
        """Forget a finished batch and return its buffer to the pool (once)."""
        if self._incomplete.pop(id(batch), None) is None:
            return
        if not batch.is_split_batch:
            self.buffer_pool.deallocate(batch.buffer, batch.buffer_size_bytes)

    def abort_incomplete_batches(self, error: BaseException) -> int:
        """Fail every batch not yet completed (forced close, fatal error); how many."""
        batches = list(self._incomplete.values())
        for batch in batches:
            queue = self._queue(batch.topic_partition)
            if batch in queue:
                queue.remove(batch)
            if self.idempotence is not None:
                self.idempotence.remove_in_flight_batch(batch)
            batch.abort(error)
            self.deallocate(batch)
        return len(batches)

    def abort_undrained_batches(self, error: BaseException) -> int:
        """Fail only batches still queued (never sent)."""
        count = 0
        for info in self._topics.values():
            for queue in info.batches.values():
                while queue:
                    batch = queue.popleft()
                    batch.abort(error)
                    self.deallocate(batch)
                    count += 1
        return count

    # -- flush, close, observation ----------------------------------------------------------------

    def begin_flush(self) -> None:
        self._flushes_in_progress += 1

    def end_flush(self) -> None:
        assert self._flushes_in_progress > 0
        self._flushes_in_progress -= 1

    @property
    def flush_in_progress(self) -> bool:
        return self._flushes_in_progress > 0

    def incomplete_batches(self) -> list[ProducerBatch]:
        """Snapshot of batches not yet completed: a flush awaits all their handles."""
        return list(self._incomplete.values())

    def incomplete_handles(self) -> list[RecordHandle]:
        return [handle for batch in self._incomplete.values() for handle in batch.handles()]

    def close(self) -> None:
        """No more appends; everything queued becomes sendable at once."""
        self._closed = True

    @property
    def is_closed(self) -> bool:
        return self._closed

    def has_undrained(self) -> bool:
        return any(queue for info in self._topics.values() for queue in info.batches.values())

    def has_incomplete(self) -> bool:
        return bool(self._incomplete)

    def queue_sizes(self, topic: str) -> dict[int, int]:
        """Batches queued per partition of `topic` (what the load table is built from)."""
        info = self._topics.get(topic)
        return {} if info is None else {p: len(q) for p, q in info.batches.items()}

    def partitioner(self, topic: str) -> BuiltInPartitioner:
        return self._topic_info(topic).partitioner

    def _queue(self, tp: TopicPartition) -> collections.deque[ProducerBatch]:
        return self._topic_info(tp.topic).batches.setdefault(tp.partition, collections.deque())
