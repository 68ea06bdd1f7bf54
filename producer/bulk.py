"""The bulk path: many records appended as whole batches, with little per-record Python work.

`send_many(topic, values, keys=None, partition=None)` does not append record by record. It
cuts the columns into runs that fit `batch.size` (one pass computing each record's encoded
size), and each run becomes a `ColumnarBatch`: a ProducerBatch whose records stay as the
caller's column slices until the sender drains it, when `build()` encodes them in one call to
`log.records.builder.build_batch_from_columns`. No per-record handle exists; one
`BulkDelivery` per call completes when every batch of the call is complete, and maps each
record to its offset on demand.

ColumnarBatch keeps every ProducerBatch contract the accumulator and sender rely on: closed
for appends (`is_full`), `record_count` and a worst-case `estimated_size_bytes` for
max.request.size, producer state and sequences (assigned at drain), retries, `split` after
MESSAGE_TOO_LARGE (columns halved, sequences continuing), and completion exactly once. Its
memory comes from the BufferPool like any batch (a pooled `batch.size` buffer, or an exact
one for a single larger record), so back-pressure (max.block.ms) holds for bulk sends too.
Batches enter the partition's queue behind any open batch, so order with `send` is kept.
`BulkRecordAccumulator` is the accumulator with that one extra entry point.

Placement: an explicit partition; else by key (murmur2, the same as `send`); else each batch
goes to the topic's sticky partition, which then moves on (one batch per sticky period).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import trio

from log.records.batch_header import HEADER_BYTES
from log.records.builder import build_batch_from_columns
from log.records.varint import varint_size
from producer.accumulator import RecordAccumulator
from producer.cluster_view import TopicPartition
from producer.errors import ProducerClosedError
from producer.producer_batch import (
    FinalState,
    ProducerBatch,
    RecordMetadata,
    compressed_upper_bound,
)

# Encoded record overhead beyond key and value bytes, when the deltas are small: attributes,
# timestamp delta (0: one timestamp per call), header count; the varints are added exactly.
_FIXED_RECORD_OVERHEAD = 3


def record_sizes(keys: Sequence[bytes | None] | None, values: Sequence[bytes | None]) -> list[int]:
    """Exact encoded size of each record at offset delta = its index in a batch (< 2**13)."""
    sizes = []
    append = sizes.append
    for index, value in enumerate(values):
        key = None if keys is None else keys[index]
        body = _FIXED_RECORD_OVERHEAD + varint_size(index)
        body += 1 if key is None else varint_size(len(key)) + len(key)
        body += 1 if value is None else varint_size(len(value)) + len(value)
        append(varint_size(body) + body)
    return sizes


class BulkDelivery:
    """The delivery of one `send_many` call: complete when all of its batches are."""

    __slots__ = ("topic", "record_count", "_pending", "_parts", "_error", "_callbacks", "_done")

    def __init__(self, topic: str, record_count: int) -> None:
        self.topic = topic
        self.record_count = record_count
        self._pending = record_count  # records not yet completed
        self._parts: list[tuple[Sequence[int], int, int, int]] = []  # (indices, p, off, ts)
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[BulkDelivery], None]] = []
        self._done = record_count == 0

    @property
    def done(self) -> bool:
        return self._done

    @property
    def error(self) -> BaseException | None:
        return self._error

    def add_callback(self, callback: Callable[[BulkDelivery], None]) -> None:
        if self._done:
            callback(self)
        else:
            self._callbacks.append(callback)

    def _part_done(
        self,
        indices: Sequence[int],
        partition: int,
        base_offset: int,
        timestamp_ms: int,
        error: BaseException | None,
    ) -> None:
        assert not self._done and len(indices) <= self._pending
        if error is not None and self._error is None:
            self._error = error
        self._parts.append((indices, partition, base_offset, timestamp_ms))
        self._pending -= len(indices)
        if self._pending == 0:
            self._done = True
            callbacks, self._callbacks = self._callbacks, []
            for callback in callbacks:
                callback(self)

    async def wait_quietly(self) -> None:
        """Wait until every batch of the call is complete (success or not)."""
        if not self._done:
            event = trio.Event()
            self.add_callback(lambda _delivery: event.set())
            await event.wait()

    async def wait(self) -> list[RecordMetadata]:
        """[RecordMetadata] in call order once delivered; raises the first batch error."""
        await self.wait_quietly()
        return self.results()

    def check(self) -> None:
        """Raise the first failed batch's error, if any."""
        assert self._done, "check() on an incomplete delivery"
        if self._error is not None:
            raise self._error

    def results(self) -> list[RecordMetadata]:
        """RecordMetadata per record, in call order (built on demand)."""
        self.check()
        out: list[RecordMetadata | None] = [None] * self.record_count
        for indices, partition, base_offset, timestamp_ms in self._parts:
            for i, index in enumerate(indices):
                offset = base_offset + i if base_offset >= 0 else -1
                out[index] = RecordMetadata(self.topic, partition, offset, timestamp_ms, -1, -1)
        return out  # type: ignore[return-value]

    def offsets(self) -> list[int]:
        """The offset of each record, in call order (-1 where the broker did not say)."""
        return [r.offset for r in self.results()]


class ColumnarBatch(ProducerBatch):
    """A closed batch of column slices, encoded only when built; see the module docstring."""

    def __init__(
        self,
        topic_partition: TopicPartition,
        buffer: bytearray,
        created_ms: int,
        compression_type: int,
        *,
        keys: Sequence[bytes | None] | None,
        values: Sequence[bytes | None],
        records_bytes: int,
        timestamp_ms: int,
        delivery: BulkDelivery,
        indices: Sequence[int],
        is_split_batch: bool = False,
    ) -> None:
        super().__init__(
            topic_partition, buffer, created_ms, compression_type, is_split_batch=is_split_batch
        )
        assert values, "a batch holds at least one record"
        self.keys = keys
        self.values = values
        self.columnar_records_bytes = records_bytes
        self.timestamp_ms = timestamp_ms
        self.delivery = delivery
        self.indices = indices  # positions of these records in the send_many call
        assert len(indices) == len(values)
        self.close()

    @property
    def record_count(self) -> int:
        return len(self.values)

    @property
    def estimated_size_bytes(self) -> int:
        return HEADER_BYTES + compressed_upper_bound(
            self.compression_type, self.columnar_records_bytes
        )

    @property
    def is_full(self) -> bool:
        return True

    def try_append(self, *args: object, **kwargs: object) -> None:
        return None  # closed: later records open a new batch behind this one

    def build(self) -> bytes:
        return build_batch_from_columns(
            self.keys,
            self.values,
            timestamp_ms=self.timestamp_ms,
            compression_type=self.compression_type,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence,
            is_transactional=self.is_transactional,
        )

    def handles(self) -> list:
        return []

    def split(self, split_batch_size_bytes: int, now_ms: int) -> list[ProducerBatch]:
        assert self.final_state is None and self.record_count > 1
        parts: list[ProducerBatch] = []
        sizes = record_sizes(self.keys, self.values)
        start = 0
        while start < len(self.values):
            end, size = start, 0
            while end < len(self.values) and (
                end == start
                or HEADER_BYTES + compressed_upper_bound(self.compression_type, size + sizes[end])
                <= split_batch_size_bytes
            ):
                size += sizes[end]
                end += 1
            keys = None if self.keys is None else self.keys[start:end]
            part = ColumnarBatch(
                self.topic_partition,
                bytearray(HEADER_BYTES + 1),
                self.created_ms,
                self.compression_type,
                keys=keys,
                values=self.values[start:end],
                records_bytes=size,
                timestamp_ms=self.timestamp_ms,
                delivery=self.delivery,
                indices=self.indices[start:end],
                is_split_batch=True,
            )
            if self.has_sequence:
                part.set_producer_state(
                    self.producer_id,
                    self.producer_epoch,
                    (self.base_sequence + start) % 2**31,
                    self.is_transactional,
                )
            parts.append(part)
            start = end
        self.final_state = FinalState.SPLIT
        self.in_flight_request = False
        return parts

    def _finish(
        self,
        new_state: FinalState,
        base_offset: int,
        log_append_time_ms: int,
        error: BaseException | None,
    ) -> bool:
        self.in_flight_request = False
        if self.final_state is not None:
            assert self.final_state in (FinalState.FAILED, FinalState.ABORTED), self.final_state
            return False
        self.final_state = new_state
        timestamp_ms = log_append_time_ms if log_append_time_ms != -1 else self.timestamp_ms
        self.delivery._part_done(
            self.indices,
            self.topic_partition.partition,
            base_offset if error is None else -1,
            timestamp_ms,
            error,
        )
        return True


class BulkRecordAccumulator(RecordAccumulator):
    """RecordAccumulator plus `append_batch` for ready-made (columnar) batches."""

    def append_batch(self, batch: ProducerBatch) -> None:
        """Queue a closed batch at its partition's tail (behind any open batch)."""
        if self.is_closed:
            raise ProducerClosedError("producer closed while send in progress")
        assert batch.is_closed
        self._queue(batch.topic_partition).append(batch)
        self._incomplete[id(batch)] = batch


def plan_runs(
    sizes: Sequence[int], compression_type: int, batch_size_bytes: int
) -> list[tuple[int, int, int]]:
    """Cut records into consecutive runs (start, end, records_bytes) that fit batch.size.

    A record too big for batch.size on its own gets a run (and a buffer) of its own.
    """
    runs = []
    start, size = 0, 0
    for index, record_size in enumerate(sizes):
        if index > start and (
            HEADER_BYTES + compressed_upper_bound(compression_type, size + record_size)
            > batch_size_bytes
        ):
            runs.append((start, index, size))
            start, size = index, 0
        size += record_size
    if start < len(sizes):
        runs.append((start, len(sizes), size))
    return runs
