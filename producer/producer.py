"""Producer: the public trio producer API over the accumulator, the sender and metadata.

    async with Producer(bootstrap_servers="127.0.0.1:9092", linger_ms=5) as producer:
        handle = await producer.send("events", b"value", key=b"k")
        metadata = await handle.wait()        # RecordMetadata(topic, partition, offset, ...)
        delivery = await producer.send_many("events", values, keys=keys)   # the bulk path
        results = await delivery.wait()       # [RecordMetadata] in call order
        await producer.flush()

Configuration comes as Python names (`linger_ms=5`), Kafka names in a dict
(`Producer(config={"linger.ms": "5"})`), or both; it is validated once by ProducerConfig.

`send` returns as soon as the record is in its partition's batch: it blocks only for metadata
of a new topic and for buffer memory, together at most max.block.ms (then
MetadataTimeoutError / BufferExhaustedError). Delivery is reported by the handle: every
handle completes exactly once, with RecordMetadata or with the batch's error (its retries
exhausted, DeliveryTimeoutError after delivery.timeout.ms, ProducerClosedError on a forced
close). Leaving the `async with` normally flushes and delivers everything; leaving it with
an exception, or one of the producer's own tasks failing, stops the tasks and then fails
what is still incomplete with ProducerClosedError whose __cause__ is that error.

Records without headers take a fast path: they go into an open ColumnarBatch at the tail of
their partition's queue (producer/bulk.py), encoded once when the sender drains it, and get a
ColumnarRecordHandle (the batch and the record's index: no per-record work on completion
unless the caller added a callback). The common case of that path (known topic, open tail
with room, no sticky switch) runs inline in `send` without suspending. Records with headers
go through RecordAccumulator.try_append and get a RecordDeliveryHandle. Either way a batch
only ever joins a queue at its tail, so send order is kept per partition. The sender runs at
least once per new batch (a shielded checkpoint), even when the caller never blocks; for the
columnar path, just before the new batch opens, so it takes the batch that just filled up
alone. A batch that refuses a record is closed (full), and the sticky partitioner moves on at
that boundary (BuiltInPartitioner.switch_before_new_batch): per-record sends make whole
batches.

The nursery owned by the producer runs the sender, the metadata updater and one reader task
per broker connection. While it is open, CPython's collector is tuned for the in-flight
backlog (producer/gc_tuning.py; `gc_tuning=False` opts out).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

import trio

from log.common.errors import (
    ErrorCode,
    MessageTooLargeError,
    UnknownTopicOrPartitionError,
    error_for,
)
from log.records.batch_header import HEADER_BYTES
from log.records.builder import Header
from producer.accumulator import AppendStatus
from producer.buffer_pool import BufferPool
from producer.bulk import (
    BulkDelivery,
    BulkRecordAccumulator,
    ColumnarBatch,
    ColumnarRecordHandle,
    LazyColumn,
    plan_runs,
    record_sizes,
)
from producer.cluster_view import TopicPartition
from producer.config import ProducerConfig
from producer.connection import (
    BrokerConnections,
    Connector,
    now_ms,
    open_plaintext,
    parse_bootstrap_servers,
)
from producer.delivery_handle import DeliveryHandle, RecordDeliveryHandle, wait_completed
from producer.errors import ProducerClosedError, root_error
from producer.gc_tuning import GC_TUNING
from producer.idempotence import IdempotenceManager
from producer.metadata import MetadataUpdater, ProducerMetadata
from producer.partitioner import BuiltInPartitioner, StickyPartitionInfo, partition_for_key
from producer.producer_batch import (
    RecordHandle,
    RecordMetadata,
    compressed_upper_bound,
    estimate_batch_size_upper_bound,
)
from producer.sender import Sender
from producer.transaction_client import InitResult, TransactionClient
from producer.transaction_session import TransactionSession

__all__ = ["DeliveryHandle", "Producer", "RecordMetadata", "build_config", "wait_all"]


def build_config(
    bootstrap_servers: str | Sequence[str] | None,
    config: Mapping[str, object] | None,
    overrides: Mapping[str, object],
) -> ProducerConfig:
    """Merge a Kafka-style dict and Python keyword names into one validated ProducerConfig."""
    properties: dict[str, object] = dict(config or {})
    properties.update(overrides)
    if bootstrap_servers is not None:
        properties["bootstrap.servers"] = (
            bootstrap_servers if isinstance(bootstrap_servers, str) else ",".join(bootstrap_servers)
        )
    return ProducerConfig.from_kafka_properties(properties)


class Producer:
    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        config: Mapping[str, object] | None = None,
        *,
        seed: int | None = None,
        gc_tuning: bool = True,
        connector: Connector = open_plaintext,
        **overrides: object,
    ) -> None:
        self.config = build_config(bootstrap_servers, config, overrides)
        self._connector = connector  # how connections open (TLS/SASL: producer/connection.py)
        self._gc_tuning = gc_tuning  # see producer/gc_tuning.py
        self._gc_tuned = False
        if not self.config.bootstrap_servers:
            raise ValueError("bootstrap_servers is required")
        self._bootstrap = parse_bootstrap_servers(self.config.bootstrap_servers)
        self._rng = random.Random(seed)
        # The open ColumnarBatch at the tail of each partition's queue that `send` appends to;
        # dropped whenever another path queues a batch behind it (it is closed when drained).
        self._open_tails: dict[str, dict[int, ColumnarBatch]] = {}  # topic -> partition ->
        self._max_record_bytes = min(self.config.max_request_size, self.config.buffer_memory)
        self._nursery: trio.Nursery | None = None
        self._closed = False
        self._accepting = False  # inside `async with` and not closing: send may go inline
        self.sender: Sender | None = None
        self.transaction: TransactionSession | None = None

    # -- lifetime -------------------------------------------------------------------------------

    async def __aenter__(self) -> Producer:
        config = self.config
        self._nursery_manager = trio.open_nursery()
        nursery = await self._nursery_manager.__aenter__()
        self._nursery = nursery
        self.pool = BufferPool(config.buffer_memory, config.batch_size)
        self.idempotence = IdempotenceManager() if config.enable_idempotence else None
        self.accumulator = BulkRecordAccumulator(config, self.pool, self._rng, self.idempotence)
        self._compression = config.compression  # parsed once, not per send
        self._partitioners: dict[str, BuiltInPartitioner] = {}
        self._ignore_keys = config.partitioner_ignore_keys
        self._sticky_batch_size_bytes = config.batch_size  # the partitioner's switch point
        self.metadata = ProducerMetadata(
            self._bootstrap,
            metadata_max_age_ms=config.metadata_max_age_ms,
            retry_backoff_ms=config.retry_backoff_ms,
        )
        self.connections = BrokerConnections(
            nursery,
            client_id=config.client_id or "quorumlog-producer",
            max_in_flight=config.max_in_flight_requests_per_connection,
            request_timeout_ms=config.request_timeout_ms,
            on_change=self._on_connection_change,
            on_disconnect=lambda _node_id: self.updater.request_update(),
            connector=self._connector,
        )
        self.updater = MetadataUpdater(
            self.metadata, self.connections, request_timeout_ms=config.request_timeout_ms
        )
        if config.transactional_id:
            assert self.idempotence is not None  # ProducerConfig checks it
            client = TransactionClient(
                self.metadata, self.connections, request_timeout_ms=config.request_timeout_ms,
                retry_backoff_ms=config.retry_backoff_ms,
            )  # fmt: skip
            self.transaction = TransactionSession(
                config.transactional_id, config.transaction_timeout_ms,
                config.transaction_two_phase_commit_enable, client, self.idempotence,
            )  # fmt: skip
        self.sender = Sender(
            config, self.accumulator, self.metadata, self.updater, self.connections,
            self.idempotence, self.transaction,
        )  # fmt: skip
        self._partition_counts = self.metadata.partition_counts
        self._sender_done = trio.Event()
        self._accepting = True
        nursery.start_soon(self.updater.run)
        nursery.start_soon(self._run_sender)
        if self._gc_tuning:
            GC_TUNING.enter()
            self._gc_tuned = True
        return self

    async def _run_sender(self) -> None:
        assert self.sender is not None
        try:
            await self.sender.run()
        finally:
            self._sender_done.set()

    def _on_connection_change(self) -> None:
        if self.sender is not None:
            self.sender.wakeup()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool | None:
        try:
            if exc_type is None:
                try:
                    await self.close()
                except BaseException as error:  # Cancelled: one of our tasks failed meanwhile
                    exc_type, exc, tb = type(error), error, error.__traceback__
            if exc_type is None:
                return await self._nursery_manager.__aexit__(None, None, None)
            # Stop our tasks first, then fail what is left with the error `async with` raises:
            # when one of our tasks failed, the body only saw Cancelled; the handles (and a
            # SyncProducer's futures) get the task's error as their __cause__.
            self._accepting = False
            assert self._nursery is not None
            self._nursery.cancel_scope.cancel()
            raised: BaseException = exc
            try:
                return await self._nursery_manager.__aexit__(exc_type, exc, tb)
            except BaseException as error:
                raised = error
                raise
            finally:
                cause = root_error(raised)
                closed = ProducerClosedError(f"producer closed after an error: {cause!r}")
                closed.__cause__ = cause
                self._abort(closed)
        finally:
            if self._gc_tuned:
                self._gc_tuned = False
                GC_TUNING.exit()

    async def close(self, timeout_ms: int | None = None) -> None:
        """Deliver (or fail) everything sent, then stop; after `timeout_ms`, abort the rest."""
        if self._nursery is None or self._closed:
            return
        self._closed = True
        self._accepting = False
        assert self.sender is not None
        self.accumulator.close()
        self.sender.initiate_close()
        with trio.move_on_after(math.inf if timeout_ms is None else timeout_ms / 1000):
            await self._sender_done.wait()
        if not self._sender_done.is_set():
            self._abort(ProducerClosedError("producer closed before delivery completed"))
            await self._sender_done.wait()
        self.updater.close()
        self.connections.close()
        self.pool.close()
        self._nursery.cancel_scope.cancel()

    def _abort(self, error: BaseException) -> None:
        self._closed = True
        self._accepting = False
        if self.sender is not None:
            self.accumulator.close()
            self.sender.force_close(error)
            self.accumulator.abort_incomplete_batches(error)
            self.updater.close()
            self.pool.close()

    # -- sending --------------------------------------------------------------------------------

    async def _partition_count(self, topic: str, partition: int | None) -> int:
        """The topic's partition count (waiting up to max.block.ms for its metadata), after
        checking that an explicit `partition` is one of them."""
        count = self.metadata.partition_count(topic)
        if count is None:
            count = await self.updater.wait_for_topic(topic, self.config.max_block_ms)
        if partition is not None:
            _check_partition(topic, partition, count)
        return count

    def _check_open(self, sending: bool = False) -> None:
        if self._nursery is None:
            raise ProducerClosedError("use the producer inside `async with`")
        if self._closed:
            raise ProducerClosedError("producer is closed")
        if self.idempotence is not None and self.idempotence.fatal_error is not None:
            raise self.idempotence.fatal_error
        if sending and self.transaction is not None and not self.transaction.can_send:
            raise error_for(
                ErrorCode.INVALID_TXN_STATE,
                "a transactional producer sends between begin_transaction and its end",
            )

    # -- transactions (transactional.id set) ----------------------------------------------------

    def _session(self) -> TransactionSession:
        self._check_open()
        if self.transaction is None:
            raise error_for(ErrorCode.INVALID_TXN_STATE, "transactional.id is not set")
        return self.transaction

    async def init_transactions(self, keep_prepared_txn: bool = False) -> InitResult:
        """InitProducerId for transactional.id: fences earlier producers with that id and
        aborts their open transaction, unless `keep_prepared_txn` (KIP-939, needs
        transaction.two.phase.commit.enable): then an open transaction is kept, and this
        producer may only commit or abort it (`ongoing` in the result names it)."""
        return await self._session().init(keep_prepared_txn)

    def begin_transaction(self) -> None:
        self._session().begin()

    async def prepare_transaction(self) -> tuple[int, int]:
        """KIP-939's first phase: flush, and leave the transaction open. Returns the producer
        id and epoch with which any process can end it (TransactionClient.end_txn)."""
        session = self._session()
        await self.flush()
        self._check_open()
        return session.prepared()

    async def commit_transaction(self) -> None:
        """Flush, then EndTxn(commit). Callers check their deliveries: a record that failed
        is not in the transaction (Kafka refuses the commit; abort instead)."""
        session = self._session()
        await self.flush()
        await session.end(commit=True)

    async def abort_transaction(self) -> None:
        session = self._session()
        await self.flush()
        await session.end(commit=False)

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Sequence[Header] | Sequence[tuple[str, bytes | None]] | None = None,
        timestamp_ms: int | None = None,
    ) -> DeliveryHandle:
        """Append one record; returns its DeliveryHandle (see the module docstring).

        The common case runs inline and synchronously: a record without headers, for a known
        topic, that fits its partition's open ColumnarBatch and needs no sticky switch.
        Anything else (having changed nothing but closing a tail that refused the record)
        goes down the full path, `_append`, which checks everything again; so the inline part
        only skips work whose outcome is known: no metadata wait, no size error (a record
        the open batch takes is below max.request.size and buffer.memory), no new batch, no
        checkpoint (none is owed: the sender already ran once for this batch). `_accepting`
        is False before `async with` and from close()/_abort() on, which also close the
        accumulator.
        """
        if headers:
            return RecordDeliveryHandle(
                await self._append(topic, value, key, partition, headers, timestamp_ms)
            )
        count = self._partition_counts.get(topic)
        idempotence = self.idempotence
        if (
            count is None
            or not self._accepting
            or (idempotence is not None and idempotence.fatal_error is not None)
        ):
            return await self._append(topic, value, key, partition, None, timestamp_ms)
        sticky = None
        if partition is not None:
            if not 0 <= partition < count:
                return await self._append(topic, value, key, partition, None, timestamp_ms)
            target = partition
        elif key is not None and not self._ignore_keys:
            target = partition_for_key(key, count)
        else:
            partitioner = self._partitioners.get(topic)
            sticky = None if partitioner is None else partitioner.sticky
            if sticky is None or sticky.partition >= count:
                return await self._append(topic, value, key, partition, None, timestamp_ms)
            target = sticky.partition
        tails = self._open_tails.get(topic)
        tail = None if tails is None else tails.get(target)
        if tail is None:
            return await self._append(topic, value, key, partition, None, timestamp_ms)
        before = tail.columnar_records_bytes
        handle = tail.try_append_record(
            time.time_ns() // 1_000_000 if timestamp_ms is None else timestamp_ms, key, value
        )
        if handle is None:
            return await self._append(topic, value, key, partition, None, timestamp_ms)
        if sticky is not None:
            appended_bytes = tail.columnar_records_bytes - before
            produced_bytes = sticky.produced_bytes + appended_bytes
            if produced_bytes < self._sticky_batch_size_bytes or (
                produced_bytes < 2 * self._sticky_batch_size_bytes and not tail.is_full
            ):
                sticky.produced_bytes = produced_bytes  # no switch possible yet: just count
            else:
                self._update_sticky(tail.topic_partition, sticky, appended_bytes, count, tail)
        return handle  # a tail this record filled woke the sender (ColumnarBatch.on_full)

    async def _append(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int | None,
        headers: Any,
        timestamp_ms: int | None,
    ) -> Any:  # ColumnarRecordHandle without headers, RecordHandle with them
        self._check_open(sending=True)
        sender = self.sender
        assert sender is not None  # made in __aenter__, which _check_open checked
        start_ms = now_ms()
        max_block_ms = self.config.max_block_ms
        if self.metadata.partition_count(topic) is None:
            await self.updater.wait_for_topic(topic, max_block_ms)
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000
        if not headers:
            return await self._append_columnar(topic, value, key, partition, timestamp_ms, start_ms)
        record_headers = _headers(headers)
        accumulator = self.accumulator
        self._open_tails.clear()  # the accumulator may queue a batch behind an open tail
        result = accumulator.try_append(
            topic, partition, timestamp_ms, key, value, record_headers, start_ms, self.metadata
        )
        while result.status is AppendStatus.NEEDS_BUFFER:
            size = result.buffer_size_bytes
            buffer = self.pool.try_allocate_nowait(size)
            if buffer is None:
                remaining_ms = max(0, max_block_ms - (now_ms() - start_ms))
                sender.wakeup()  # exhausted: send now
                buffer = await self.pool.allocate(size, remaining_ms)
            result = accumulator.try_append(
                topic, partition, timestamp_ms, key, value, record_headers, now_ms(),
                self.metadata, buffer=buffer,
            )  # fmt: skip
        assert result.handle is not None
        if result.batch_is_full or result.new_batch_created:
            sender.wakeup()
            # Let the sender run once per batch even if the caller never blocks; shielded, so
            # the appended record's handle always reaches the caller.
            await trio.lowlevel.cancel_shielded_checkpoint()
        return result.handle

    async def _append_columnar(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int | None,
        timestamp_ms: int,
        start_ms: int,
    ) -> ColumnarRecordHandle:
        """The `send` path for records without headers: append to the partition's open
        ColumnarBatch (encoded once, when drained). Same rules as RecordAccumulator.try_append:
        murmur2 for keys, the sticky partitioner otherwise, memory from the pool (waiting up
        to max.block.ms), a new batch only behind the queue's tail.

        Before a new batch opens, the sender runs once (a shielded checkpoint), even if the
        caller never blocks: so it runs once per batch, and it takes the batch that was just
        closed while that is the node's sendable one, not after the new batch opened (draining
        a node takes every partition's head, and would send the new batch with one record).
        Other tasks ran meanwhile, so the placement is then made again.
        """
        config = self.config
        sender = self.sender
        assert sender is not None  # made in __aenter__, which _append checked
        compression = self._compression
        raw_bytes = (0 if key is None else len(key)) + (0 if value is None else len(value))
        bound = HEADER_BYTES + compressed_upper_bound(compression, raw_bytes + 32)
        if bound > self._max_record_bytes:
            bound = estimate_batch_size_upper_bound(compression, key, value, ())
        if bound > config.max_request_size or bound > config.buffer_memory:
            raise MessageTooLargeError(
                f"the message is {bound} bytes when serialized which is larger than "
                f"max.request.size ({config.max_request_size}) or buffer.memory "
                f"({config.buffer_memory})"
            )
        placed = self._place_columnar(topic, value, key, partition, timestamp_ms, raw_bytes)
        if isinstance(placed, ColumnarRecordHandle):
            return placed
        sender.wakeup()
        await trio.lowlevel.cancel_shielded_checkpoint()
        placed = self._place_columnar(topic, value, key, partition, timestamp_ms, raw_bytes)
        if isinstance(placed, ColumnarRecordHandle):
            return placed
        target, sticky = placed
        tails = self._open_tails.setdefault(topic, {})
        size_bytes = max(config.batch_size, bound)
        buffer = self.pool.try_allocate_nowait(size_bytes)
        if buffer is None:
            sender.wakeup()  # exhausted: send now
            remaining_ms = max(0, config.max_block_ms - (now_ms() - start_ms))
            buffer = await self.pool.allocate(size_bytes, remaining_ms)
            # another task may have opened a batch meanwhile
            tail = tails.get(target)
            handle = None if tail is None else tail.try_append_record(timestamp_ms, key, value)
            if handle is not None:
                self.pool.deallocate(buffer)
                return handle
        tp = TopicPartition(topic, target)
        batch = ColumnarBatch(
            tp, buffer, now_ms(), compression, keys=None, values=[], records_bytes=0,
            timestamp_ms=timestamp_ms, delivery=None, indices=(), timestamps_ms=[],
            open_for_appends=True, on_full=sender.wakeup,
        )  # fmt: skip
        handle = batch.try_append_record(timestamp_ms, key, value)
        assert handle is not None, "a fresh batch holds its first record"
        try:
            self.accumulator.open_batch(batch)
        except BaseException:
            self.pool.deallocate(buffer)
            raise
        tails[target] = batch
        if sticky is not None:
            count = self.metadata.partition_count(topic)
            assert count is not None
            self._update_sticky(tp, sticky, batch.columnar_records_bytes, count, batch)
        sender.wakeup()  # its linger timer starts
        return handle

    def _place_columnar(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int | None,
        timestamp_ms: int,
        raw_bytes: int,
    ) -> ColumnarRecordHandle | tuple[int, StickyPartitionInfo | None]:
        """Append to the chosen partition's open tail if it takes the record; else the
        partition a new batch must open on (and its sticky info, for unkeyed records)."""
        if self.accumulator.is_closed:
            raise ProducerClosedError("producer closed while send in progress")
        metadata = self.metadata
        count = metadata.partition_count(topic)
        if count is None:  # dropped from the metadata while this send waited
            raise UnknownTopicOrPartitionError(f"topic {topic!r} is not in the metadata")
        sticky = None
        partitioner: BuiltInPartitioner | None = None
        if partition is not None:
            _check_partition(topic, partition, count)
            target = partition
        elif key is not None and not self._ignore_keys:
            target = partition_for_key(key, count)
        else:
            partitioner = self._partitioners.get(topic)
            if partitioner is None:
                partitioner = self._partitioners[topic] = self.accumulator.partitioner(topic)
            sticky = partitioner.peek_current_partition_info(
                count, metadata.available_partitions(topic)
            )
            target = sticky.partition
        tails = self._open_tails.setdefault(topic, {})
        tail = tails.get(target)
        if tail is None:
            return target, sticky
        handle = self._try_append_to_tail(tail, timestamp_ms, key, value, sticky, count)
        if handle is not None:
            return handle
        if (
            partitioner is not None
            and sticky is not None  # always, with a partitioner (peeked together above)
            and partitioner.switch_before_new_batch(
                sticky, raw_bytes, count, metadata.available_partitions(topic)
            )
        ):
            sticky = partitioner.peek_current_partition_info(
                count, metadata.available_partitions(topic)
            )
            target = sticky.partition
            tail = tails.get(target)
            if tail is not None:
                handle = self._try_append_to_tail(tail, timestamp_ms, key, value, sticky, count)
                if handle is not None:
                    return handle
        return target, sticky

    def _try_append_to_tail(
        self,
        tail: ColumnarBatch,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        sticky: StickyPartitionInfo | None,
        count: int,
    ) -> ColumnarRecordHandle | None:
        before = tail.columnar_records_bytes
        handle = tail.try_append_record(timestamp_ms, key, value)
        if handle is not None:
            if sticky is not None:
                self._update_sticky(
                    tail.topic_partition, sticky, tail.columnar_records_bytes - before, count, tail
                )
        return handle

    def _update_sticky(
        self,
        tp: TopicPartition,
        sticky: StickyPartitionInfo,
        appended_bytes: int,
        count: int,
        tail: ColumnarBatch,
    ) -> None:
        partitioner = self.accumulator.partitioner(tp.topic)
        if sticky.produced_bytes + appended_bytes < partitioner.sticky_batch_size_bytes:
            sticky.produced_bytes += appended_bytes  # no switch possible yet: just count
            return
        # Switch only at a batch boundary (Kafka: the partition's last batch is full); the
        # other boundary, a new batch, is _append_columnar's switch_before_new_batch.
        enable_switch = tail.is_full
        partitioner.update_partition_info(
            sticky, appended_bytes, count, self.metadata.available_partitions(tp.topic),
            enable_switch,
        )  # fmt: skip

    async def send_many(
        self,
        topic: str,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> BulkDelivery:
        """Append many records as whole batches (the bulk path, see producer/bulk.py).

        Same partitioning, ordering, retries and idempotence as `send`; all records share one
        timestamp (now by default). Returns a BulkDelivery: `await delivery.wait()` gives
        [RecordMetadata] in call order (or raises the first failed batch's error).
        """
        self._check_open(sending=True)
        if keys is not None and len(keys) != len(values):
            raise ValueError("keys and values must have the same length")
        delivery = BulkDelivery(topic, len(values))
        if not values:
            return delivery
        start_ms = now_ms()
        config = self.config
        partition_count = await self._partition_count(topic, partition)
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000
        sizes = record_sizes(keys, values)
        largest = HEADER_BYTES + compressed_upper_bound(config.compression, max(sizes))
        if largest > config.max_request_size or largest > config.buffer_memory:
            raise MessageTooLargeError(
                f"a record of {largest} bytes when serialized exceeds max.request.size "
                f"({config.max_request_size}) or buffer.memory ({config.buffer_memory})"
            )
        if partition is None and keys is not None and not config.partitioner_ignore_keys:
            groups: dict[int, list[int]] = {}
            for index, key in enumerate(keys):
                p = partition_for_key(key, partition_count) if key is not None else -1
                groups.setdefault(p, []).append(index)
            for p, indices in groups.items():
                group_keys = [keys[i] for i in indices]
                group_values = [values[i] for i in indices]
                await self._append_columns(
                    topic, None if p < 0 else p, group_keys, group_values, indices,
                    [sizes[i] for i in indices], timestamp_ms, delivery, start_ms,
                    partition_count,
                )  # fmt: skip
        else:
            await self._append_columns(
                topic, partition, keys, values, range(len(values)), sizes, timestamp_ms,
                delivery, start_ms, partition_count,
            )  # fmt: skip
        return delivery

    async def _append_columns(
        self,
        topic: str,
        partition: int | None,
        keys: Sequence[bytes | None] | None,
        values: Sequence[bytes | None],
        indices: Sequence[int],
        sizes: Sequence[int],
        timestamp_ms: int,
        delivery: BulkDelivery,
        start_ms: int,
        partition_count: int,
    ) -> None:
        config = self.config
        accumulator = self.accumulator
        sender = self.sender
        assert sender is not None
        partitioner = accumulator.partitioner(topic) if partition is None else None
        for start, end, records_bytes in plan_runs(sizes, config.compression, config.batch_size):
            size_bytes = max(config.batch_size, HEADER_BYTES + records_bytes + 1)
            buffer = self.pool.try_allocate_nowait(size_bytes)
            if buffer is None:
                sender.wakeup()
                remaining_ms = max(0, config.max_block_ms - (now_ms() - start_ms))
                buffer = await self.pool.allocate(size_bytes, remaining_ms)
            target = partition
            if partitioner is not None:
                available = self.metadata.available_partitions(topic)
                sticky = partitioner.peek_current_partition_info(partition_count, available)
                target = sticky.partition
                partitioner.update_partition_info(
                    sticky, records_bytes, partition_count, available, True
                )
            assert target is not None
            batch = ColumnarBatch(
                TopicPartition(topic, target),
                buffer,
                now_ms(),
                config.compression,
                keys=None if keys is None else keys[start:end],
                values=values[start:end],
                records_bytes=records_bytes,
                timestamp_ms=timestamp_ms,
                delivery=delivery,
                indices=indices[start:end],
            )
            self._open_tails.get(topic, {}).pop(target, None)  # queued behind it: closed to us
            try:
                accumulator.append_batch(batch)
            except BaseException:
                self.pool.deallocate(buffer)
                raise
            sender.wakeup()
            await trio.lowlevel.cancel_shielded_checkpoint()  # let the sender take it

    send_batch = send_many

    async def send_encoded(
        self,
        topic: str,
        partition: int | None,
        keys: Sequence[bytes | None] | Any | None,
        values: Sequence[bytes | None] | Any,
        records: bytes | memoryview,
        timestamp_range: tuple[int, int] | None = None,
        has_headers: bool = False,
    ) -> BulkDelivery:
        """Append one batch whose records section the caller already encoded (the Spark
        writer's Arrow path, spark/record_encoding.py): offsetDelta 0..n-1, attributes 0.
        Without `timestamp_range` every timestampDelta is 0 and the batch gets the time now;
        with it, (base, max): the deltas are from base. Producer id, epoch and sequence are
        set at drain, like a send_many batch; `partition` None: the sticky partition.
        `keys`/`values` are the same records as columns (len() and to_pylist(), e.g. Arrow
        arrays), read only if the broker answers MESSAGE_TOO_LARGE and the batch is split;
        a batch with headers or its own timestamps cannot be rebuilt from them and fails
        with MESSAGE_TOO_LARGE instead. The caller sizes the batch (at most batch.size)."""
        self._check_open(sending=True)
        count = len(values)
        delivery = BulkDelivery(topic, count)
        if not count:
            return delivery
        start_ms = now_ms()
        config = self.config
        partition_count = await self._partition_count(topic, partition)
        largest = HEADER_BYTES + compressed_upper_bound(config.compression, len(records))
        if largest > config.max_request_size or largest > config.buffer_memory:
            raise MessageTooLargeError(
                f"an encoded batch of {largest} bytes exceeds max.request.size "
                f"({config.max_request_size}) or buffer.memory ({config.buffer_memory})"
            )
        assert self.sender is not None
        size_bytes = max(config.batch_size, HEADER_BYTES + len(records) + 1)
        buffer = self.pool.try_allocate_nowait(size_bytes)
        if buffer is None:
            self.sender.wakeup()
            remaining_ms = max(0, config.max_block_ms - (now_ms() - start_ms))
            buffer = await self.pool.allocate(size_bytes, remaining_ms)
        target = partition
        if target is None:
            partitioner = self.accumulator.partitioner(topic)
            available = self.metadata.available_partitions(topic)
            sticky = partitioner.peek_current_partition_info(partition_count, available)
            target = sticky.partition
            partitioner.update_partition_info(
                sticky, len(records), partition_count, available, True
            )
        batch = ColumnarBatch(
            TopicPartition(topic, target),
            buffer,
            now_ms(),
            config.compression,
            keys=None if keys is None else LazyColumn(keys),
            values=LazyColumn(values),
            records_bytes=len(records),
            timestamp_ms=(
                time.time_ns() // 1_000_000 if timestamp_range is None else timestamp_range[0]
            ),
            delivery=delivery,
            indices=range(count),
            encoded_records=records,
            encoded_max_timestamp_ms=None if timestamp_range is None else timestamp_range[1],
            splittable=timestamp_range is None and not has_headers,
        )
        self._open_tails.get(topic, {}).pop(target, None)  # queued behind it: closed to us
        try:
            self.accumulator.append_batch(batch)
        except BaseException:
            self.pool.deallocate(buffer)
            raise
        self.sender.wakeup()
        await trio.lowlevel.cancel_shielded_checkpoint()  # let the sender take it
        return delivery

    async def flush(self) -> None:
        """Make every queued batch sendable now and wait until all sent so far complete."""
        self._check_open()
        assert self.sender is not None
        self.accumulator.begin_flush()
        try:
            self.sender.wakeup()
            for batch in self.accumulator.incomplete_batches():
                if isinstance(batch, ColumnarBatch):
                    await _batch_completed(batch)
                else:
                    for handle in batch.handles():
                        await wait_completed(handle)
        finally:
            self.accumulator.end_flush()

    def partitions_for(self, topic: str) -> int | None:
        return self.metadata.partition_count(topic)

    async def partition_count(self, topic: str) -> int:
        """The topic's partition count, waiting up to max.block.ms for its metadata (asked
        for now if the producer has none yet)."""
        self._check_open()
        return await self._partition_count(topic, None)


async def _batch_completed(batch: ColumnarBatch) -> None:
    """Wait until a columnar batch completes or fails (through its parts, if split)."""
    if batch.final_state is None:
        event = trio.Event()
        batch.add_done_callback(lambda _batch: event.set())
        await event.wait()
    for _start, part in batch.split_parts or ():
        await _batch_completed(part)


async def wait_all(handles: Sequence[DeliveryHandle | RecordHandle]) -> list[RecordMetadata]:
    """RecordMetadata for each handle (raises the first failed record's error)."""
    for handle in handles:
        await wait_completed(handle)
    return [handle.result() for handle in handles]


def _headers(headers: Any) -> tuple[Header, ...]:
    if not headers:
        return ()
    return tuple(h if isinstance(h, Header) else Header(h[0], h[1]) for h in headers)


def _check_partition(topic: str, partition: int, count: int) -> None:
    if not 0 <= partition < count:
        raise UnknownTopicOrPartitionError(
            f"invalid partition {partition} for topic {topic!r}: not in the range [0...{count - 1}]"
        )
