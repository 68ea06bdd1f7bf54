"""The bulk path: many records appended as whole batches, with little per-record Python work.

`send_many(topic, values, keys=None, partition=None)` does not append record by record. It
cuts the columns into runs that fit `batch.size` (one pass computing each record's encoded
size), and each run becomes a `ColumnarBatch`: a ProducerBatch whose records stay as the
caller's column slices until the sender drains it, when `build()` encodes them in one call to
`log.records.builder.build_batch_from_columns`. No per-record handle exists; one
`BulkDelivery` per call completes when every batch of the call is complete, and maps each
record to its offset on demand (`parts`, `results()`, `offsets()`).

`send` uses the same class for records without headers: an *open* ColumnarBatch at the tail of
the partition's queue collects the records' columns (keys, values, timestamps) and hands out a
`ColumnarRecordHandle` per record, which is only (batch, index): completion sets the batch's
base offset, log append time or error once, and a handle computes its RecordMetadata from
them when asked. The batch refers to a handle only while it has callbacks to call (in record
order, on completion); after a split a handle follows `split_parts` to the part holding it.
An open batch closes itself when an append fills it or when it refuses a record (Kafka's
closeForRecordAppends) and then calls `on_full`, the sender's wake-up.

ColumnarBatch keeps every ProducerBatch contract the accumulator and sender rely on: closed
for appends (`is_full`), `record_count` and a worst-case `estimated_size_bytes` for
max.request.size, producer state and sequences (assigned at drain), retries, `split` after
MESSAGE_TOO_LARGE (columns halved, sequences continuing), and completion exactly once. Its
memory comes from the BufferPool like any batch (a pooled `batch.size` buffer, or an exact
one for a single larger record), so back-pressure (max.block.ms) holds for bulk sends too.
Batches enter the partition's queue behind any open batch, so order with `send` is kept.
`BulkRecordAccumulator` is the accumulator with the entry points for such batches (through
the public RecordAccumulator.enqueue_batch).

Placement: an explicit partition; else by key (murmur2, the same as `send`); else each batch
goes to the topic's sticky partition, which then moves on (one batch per sticky period).
"""

from __future__ import annotations

import bisect
import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import trio

from log.records.batch_header import HEADER_BYTES
from log.records.builder import (
    BatchParts,
    assemble_batch_parts,
    build_batch_from_columns,
)
from log.records.varint import varint_size
from producer.accumulator import RecordAccumulator
from producer.cluster_view import TopicPartition
from producer.delivery_handle import DeliveryHandle
from producer.producer_batch import (
    FinalState,
    ProducerBatch,
    RecordMetadata,
    compressed_upper_bound,
)

# Encoded record overhead beyond key and value bytes, when the deltas are small: attributes,
# timestamp delta (0: one timestamp per call), header count; the varints are added exactly.
_FIXED_RECORD_OVERHEAD = 3


_VARINT_TABLE = 1 << 14
_VARINT_SIZES = tuple(varint_size(n) for n in range(_VARINT_TABLE))


@functools.lru_cache(maxsize=64)  # a few (codec, buffer size) pairs: batch.size and big records
def records_limit_bytes(compression_type: int, buffer_size_bytes: int) -> int:
    """The most records bytes whose worst-case built batch fits `buffer_size_bytes`."""
    low, high = 0, buffer_size_bytes
    while low < high:  # compressed_upper_bound is monotonic
        middle = (low + high + 1) // 2
        if HEADER_BYTES + compressed_upper_bound(compression_type, middle) <= buffer_size_bytes:
            low = middle
        else:
            high = middle - 1
    return low


def record_sizes(
    keys: Sequence[bytes | None] | None,
    values: Sequence[bytes | None],
    timestamps_ms: Sequence[int] | None = None,
) -> list[int]:
    """Encoded size of each record at offset delta = its index (exact for one timestamp or
    timestamps not below the first; an upper bound for later offset deltas)."""
    if timestamps_ms is None:
        try:
            return _record_sizes_from_table(keys, values)
        except IndexError:  # a large record or more offsets than the table: compute them
            pass
    sizes: list[int] = []
    append = sizes.append
    base_timestamp_ms = min(timestamps_ms) if timestamps_ms else 0
    for index, value in enumerate(values):
        key = None if keys is None else keys[index]
        body = _FIXED_RECORD_OVERHEAD + varint_size(index)
        if timestamps_ms is not None:
            body += varint_size(timestamps_ms[index] - base_timestamp_ms) - 1
        body += 1 if key is None else varint_size(len(key)) + len(key)
        body += 1 if value is None else varint_size(len(value)) + len(value)
        append(varint_size(body) + body)
    return sizes


def _record_sizes_from_table(
    keys: Sequence[bytes | None] | None, values: Sequence[bytes | None]
) -> list[int]:
    """record_sizes for one timestamp (delta 0), with every varint size from the table."""
    table = _VARINT_SIZES
    sizes: list[int] = []
    append = sizes.append
    if keys is None:  # null key: one byte
        for index, value in enumerate(values):
            body = _FIXED_RECORD_OVERHEAD + 1 + table[index]
            body += 1 if value is None else table[len(value)] + len(value)
            append(table[body] + body)
        return sizes
    for index, value in enumerate(values):
        key = keys[index]
        body = _FIXED_RECORD_OVERHEAD + table[index]
        body += 1 if key is None else table[len(key)] + len(key)
        body += 1 if value is None else table[len(value)] + len(value)
        append(table[body] + body)
    return sizes


def _record_size(
    timestamp_delta: int, offset_delta: int, key_length: int, value_length: int
) -> int:
    """Encoded size of one record (lengths -1 for null), without the varint table."""
    body = 2 + varint_size(timestamp_delta) + varint_size(offset_delta)
    body += 1 if key_length < 0 else key_length + varint_size(key_length)
    body += 1 if value_length < 0 else value_length + varint_size(value_length)
    return body + varint_size(body)


class LazyColumn(Sequence):
    """A column that is only read as Python objects if it must be (the encoded path: a
    ColumnarBatch whose records the caller already encoded keeps its keys and values as
    given, an Arrow array for instance; they become a list, through `to_pylist()`, only
    when the batch is split or a record's metadata is asked for)."""

    __slots__ = ("_source", "_list")

    def __init__(self, source: Any) -> None:
        self._source = source  # anything with __len__ and to_pylist()
        self._list: list | None = None

    def __len__(self) -> int:
        return len(self._source)

    def __getitem__(self, index: Any) -> Any:
        if self._list is None:
            self._list = self._source.to_pylist()
        return self._list[index]


class DeliveredPart(NamedTuple):
    """One completed batch of a send_many call: which records, where, and how it ended."""

    indices: Sequence[int]  # positions of the batch's records in the call, in offset order
    partition: int
    base_offset: int  # offset of indices[0]; -1 if the batch failed or the broker did not say
    timestamp_ms: int  # the records' timestamp, or the log append time


class BulkDelivery:
    """The delivery of one `send_many` call: complete when all of its batches are."""

    __slots__ = ("topic", "record_count", "_pending", "_parts", "_error", "_callbacks", "_done")

    def __init__(self, topic: str, record_count: int) -> None:
        self.topic = topic
        self.record_count = record_count
        self._pending = record_count  # records not yet completed
        self._parts: list[DeliveredPart] = []
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[BulkDelivery], None]] = []
        self._done = record_count == 0

    @property
    def done(self) -> bool:
        return self._done

    @property
    def error(self) -> BaseException | None:
        return self._error

    @property
    def parts(self) -> tuple[DeliveredPart, ...]:
        """The completed batches so far, in completion order (all of them once `done`):
        per-batch results without building a RecordMetadata per record."""
        return tuple(self._parts)

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
        self._parts.append(DeliveredPart(indices, partition, base_offset, timestamp_ms))
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
        return out  # type: ignore[return-value]  # every index is filled: each record is in one part

    def offsets(self) -> list[int]:
        """The offset of each record, in call order (-1 where the broker did not say)."""
        return [r.offset for r in self.results()]


class ColumnarRecordHandle(DeliveryHandle):
    """One record `send` appended to an open ColumnarBatch: (batch, index), read lazily."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: ColumnarBatch, index: int) -> None:
        self._batch = batch
        self._index = index

    def _locate(self) -> tuple[ColumnarBatch, int]:
        """The batch holding the record now (a split moves it into a part) and its index."""
        batch = self._batch
        if batch.split_parts is None:
            return batch, self._index
        index = self._index
        while batch.split_parts is not None:
            batch, index = batch.part_of(index)
        self._batch, self._index = batch, index
        return batch, index

    @property
    def topic_partition(self) -> TopicPartition:
        return self._batch.topic_partition

    @property
    def timestamp_ms(self) -> int:
        """The record's own (create) timestamp."""
        batch, index = self._locate()
        return batch.record_timestamp_ms(index)

    @property
    def done(self) -> bool:
        return self._locate()[0].final_state is not None

    @property
    def error(self) -> BaseException | None:
        return self._locate()[0].error

    def result(self) -> RecordMetadata:
        batch, index = self._locate()
        return batch.record_metadata(index)

    def add_callback(self, callback: Callable[[ColumnarRecordHandle], None]) -> None:
        batch = self._batch
        callbacks = batch._record_callbacks
        if callbacks is not None:  # pending, not split (both set it to None): the common case
            callbacks.append((self._index, self, callback))
            return
        batch, index = self._locate()
        batch.add_record_callback(index, self, callback)


_RecordCallback = tuple[int, ColumnarRecordHandle, Callable[[ColumnarRecordHandle], None]]


_callback_index = operator.itemgetter(0)  # sort key of a _RecordCallback: its record index


class ColumnarBatch(ProducerBatch):
    """A batch of column slices, encoded only when built; see the module docstring.

    Two uses: a closed batch of a send_many call (`delivery` set, `indices` its records'
    positions in the call), or `per_record`: an open batch `send` appends to, whose records
    are reported through ColumnarRecordHandles.
    """

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
        delivery: BulkDelivery | None,
        indices: Sequence[int],
        is_split_batch: bool = False,
        timestamps_ms: list[int] | None = None,
        open_for_appends: bool = False,
        on_full: Callable[[], None] | None = None,
        encoded_records: bytes | memoryview | None = None,
        encoded_max_timestamp_ms: int | None = None,
        splittable: bool = True,
    ) -> None:
        super().__init__(
            topic_partition, buffer, created_ms, compression_type, is_split_batch=is_split_batch
        )
        # the records section as the caller encoded it (offset deltas 0.., timestampDelta 0,
        # no headers; see Producer.send_encoded), or None: built from the columns
        self.encoded_records = encoded_records
        self.encoded_max_timestamp_ms = encoded_max_timestamp_ms  # None: timestamp_ms
        self.splittable = splittable
        assert values or open_for_appends, "a batch holds at least one record"
        self.keys = keys
        self.values = values
        self.columnar_records_bytes = records_bytes
        self.timestamp_ms = timestamp_ms
        self.delivery = delivery  # a send_many call's, or None: per-record handles
        self.indices = indices  # positions of these records in the send_many call
        self.timestamps_ms = timestamps_ms  # per record (send), or None: all timestamp_ms
        self.per_record = delivery is None
        assert not self.per_record or timestamps_ms is not None
        assert self.per_record or len(indices) == len(values)
        # Filled in once on completion; handles read them (base offset + index).
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.error: BaseException | None = None
        self.split_parts: list[tuple[int, ColumnarBatch]] | None = None  # (first index, part)
        # callbacks to run on completion; a list from the start for per-record batches, so
        # the handle's add_callback appends without a check (None once run)
        self._record_callbacks: list[_RecordCallback] | None = [] if self.per_record else None
        self._first_timestamp_ms = timestamps_ms[0] if timestamps_ms else timestamp_ms
        self._records_limit_bytes = records_limit_bytes(compression_type, self.buffer_size_bytes)
        # called when try_append_record closes the batch (full or refusing): sendable now
        self.on_full = on_full
        if not open_for_appends:
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
        return self._closed or (
            bool(self.values) and self.columnar_records_bytes >= self._records_limit_bytes
        )

    def try_append(self, *args: object, **kwargs: object) -> None:
        return None  # the accumulator's records open a new batch behind this one

    def try_append_record(
        self, timestamp_ms: int, key: bytes | None, value: bytes | None
    ) -> ColumnarRecordHandle | None:
        """Append one record to an open batch (the `send` fast path); None if it does not fit
        (the batch is then closed: full).

        Timestamps must not go below the batch's first (its base timestamp), so the size
        counted here is exact; an earlier timestamp opens a new batch instead.
        """
        if self._closed:
            return None
        values = self.values
        count = len(values)
        timestamp_delta = timestamp_ms - self._first_timestamp_ms if count else 0
        if timestamp_delta < 0:
            return None
        try:  # zigzag varint sizes of small non-negative values come from a table
            sizes = _VARINT_SIZES
            body = sizes[timestamp_delta] + sizes[count]
            body += 3 if key is None else len(key) + sizes[len(key)] + 2
            body += 1 if value is None else len(value) + sizes[len(value)]
            records_bytes = self.columnar_records_bytes + body + sizes[body]
        except IndexError:  # a large value or delta: compute the varints
            records_bytes = self.columnar_records_bytes + _record_size(
                timestamp_delta,
                count,
                -1 if key is None else len(key),
                -1 if value is None else len(value),
            )
        limit_bytes = self._records_limit_bytes
        if records_bytes > limit_bytes and count:
            # Kafka closes a batch that refused a record (closeForRecordAppends): it is full,
            # sendable at once, and the sticky partitioner may switch at this boundary. (Not
            # for a record no batch.size batch could take: that is no sign of fullness.)
            if records_bytes - self.columnar_records_bytes <= limit_bytes:
                self._close_full()
            return None
        if not count:
            self._first_timestamp_ms = timestamp_ms
        self.columnar_records_bytes = records_bytes
        if records_bytes >= limit_bytes:
            self._close_full()
        if key is not None or self.keys is not None:
            self._append_key(key, count)
        values.append(value)  # type: ignore[attr-defined]  # an open batch's values are its own list
        self.timestamps_ms.append(timestamp_ms)  # type: ignore[union-attr]  # open batches are per record: a list
        return ColumnarRecordHandle(self, count)

    def _close_full(self) -> None:
        self.close()
        if self.on_full is not None:
            self.on_full()

    def _append_key(self, key: bytes | None, count: int) -> None:
        if self.keys is None:
            self.keys = [None] * count
        self.keys.append(key)  # type: ignore[attr-defined]  # an open batch's keys are its own list

    # -- per-record results (read by ColumnarRecordHandle) ----------------------------------

    def record_timestamp_ms(self, index: int) -> int:
        timestamps = self.timestamps_ms
        return self.timestamp_ms if timestamps is None else timestamps[index]

    def record_metadata(self, index: int) -> RecordMetadata:
        """RecordMetadata of record `index` of a completed batch; raises the batch's error."""
        assert self.final_state is not None, "result() on an incomplete record"
        assert self.split_parts is None, "a split batch's records are in its parts"
        if self.error is not None:
            raise self.error
        key = None if self.keys is None else self.keys[index]
        value = self.values[index]
        timestamp_ms = self.log_append_time_ms
        if timestamp_ms == -1:
            timestamp_ms = self.record_timestamp_ms(index)
        tp = self.topic_partition
        return RecordMetadata(
            tp.topic,
            tp.partition,
            self.base_offset + index if self.base_offset >= 0 else -1,
            timestamp_ms,
            -1 if key is None else len(key),
            -1 if value is None else len(value),
        )

    def add_record_callback(
        self,
        index: int,
        handle: ColumnarRecordHandle,
        callback: Callable[[ColumnarRecordHandle], None],
    ) -> None:
        """Call `callback(handle)` when record `index` completes (at once if it has)."""
        if self.final_state is not None:
            callback(handle)
        elif self._record_callbacks is None:
            self._record_callbacks = [(index, handle, callback)]
        else:
            self._record_callbacks.append((index, handle, callback))

    def part_of(self, index: int) -> tuple[ColumnarBatch, int]:
        """The split part holding record `index`, and its index there."""
        parts = self.split_parts
        assert parts is not None
        position = bisect.bisect_right(parts, index, key=_part_start) - 1
        start, part = parts[position]
        return part, index - start

    def add_done_callback(self, callback: Callable[[ColumnarBatch], None]) -> None:
        """Call `callback(batch)` when the batch is complete or split (at once if it is)."""
        if self.final_state is not None:
            callback(self)
        else:
            self._record_callbacks = self._record_callbacks or []
            # index -1 marks a done callback, which takes the batch, not a record handle
            self._record_callbacks.append((-1, self, callback))  # type: ignore[arg-type]

    def request_records(self) -> bytes | BatchParts:
        """An encoded batch as (header, the caller's records buffer): sent without a copy."""
        if self.encoded_records is not None:
            return self._assembled()
        return self.build()

    def build(self) -> bytes:
        if self.encoded_records is not None:
            return bytes(self._assembled())
        timestamps_ms = self.timestamps_ms
        timestamp_ms = self.timestamp_ms
        if timestamps_ms and timestamps_ms.count(timestamps_ms[0]) == len(timestamps_ms):
            # one timestamp for every record (sends within a millisecond): the builder's
            # constant-timestamp form gives the same bytes without a per-record delta
            first_timestamp_ms = timestamps_ms[0]
            timestamps_ms, timestamp_ms = None, first_timestamp_ms
        return build_batch_from_columns(
            self.keys,
            self.values,
            timestamps_ms=timestamps_ms,
            timestamp_ms=timestamp_ms,
            compression_type=self.compression_type,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence,
            is_transactional=self.is_transactional,
        )

    def _assembled(self) -> BatchParts:
        assert self.encoded_records is not None
        return assemble_batch_parts(
            self.encoded_records,
            record_count=self.record_count,
            base_offset=0,
            base_timestamp_ms=self.timestamp_ms,
            max_timestamp_ms=(
                self.timestamp_ms
                if self.encoded_max_timestamp_ms is None
                else self.encoded_max_timestamp_ms
            ),
            compression_type=self.compression_type,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence,
            is_transactional=self.is_transactional,
        )

    def handles(self) -> list:
        """A handle per record (made now) for a per-record batch; none for a bulk one."""
        if not self.per_record:
            return []
        return [ColumnarRecordHandle(self, index) for index in range(len(self.values))]

    def split(self, split_batch_size_bytes: int, now_ms: int) -> list[ProducerBatch]:
        assert self.final_state is None and self.record_count > 1
        parts: list[ColumnarBatch] = []
        starts: list[int] = []
        sizes = record_sizes(self.keys, self.values, self.timestamps_ms)
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
            timestamps = None if self.timestamps_ms is None else self.timestamps_ms[start:end]
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
                indices=self.indices[start:end] if not self.per_record else (),
                is_split_batch=True,
                timestamps_ms=timestamps,
            )
            if self.has_sequence:
                part.set_producer_state(
                    self.producer_id,
                    self.producer_epoch,
                    (self.base_sequence + start) % 2**31,
                    self.is_transactional,
                )
            parts.append(part)
            starts.append(start)
            start = end
        self.split_parts = list(zip(starts, parts, strict=True))
        for index, handle, callback in self._record_callbacks or ():
            if index < 0:  # a done callback: the batch is settled by being split
                continue
            part, part_index = self.part_of(index)
            part.add_record_callback(part_index, handle, callback)
        self.final_state = FinalState.SPLIT
        self.in_flight_request = False
        self._run_done_callbacks()
        return parts  # type: ignore[return-value]  # ColumnarBatch parts of a ColumnarBatch

    def _run_done_callbacks(self) -> None:
        callbacks = self._record_callbacks
        self._record_callbacks = None
        for index, handle, callback in callbacks or ():
            if index < 0:
                callback(handle)

    def _complete_records(
        self, base_offset: int, log_append_time_ms: int, error: BaseException | None
    ) -> None:
        if self.per_record:
            self.base_offset = base_offset if error is None else -1
            self.log_append_time_ms = log_append_time_ms if error is None else -1
            self.error = error
            callbacks = self._record_callbacks
            if callbacks is not None:
                self._record_callbacks = None
                callbacks.sort(key=_callback_index)  # record order; stable within a record
                for _index, handle, callback in callbacks:
                    callback(handle)
            return
        timestamp_ms = log_append_time_ms if log_append_time_ms != -1 else self.timestamp_ms
        assert self.delivery is not None
        self.delivery._part_done(
            self.indices,
            self.topic_partition.partition,
            base_offset if error is None else -1,
            timestamp_ms,
            error,
        )
        self._run_done_callbacks()


_part_start = operator.itemgetter(0)  # bisect key of a split part: its first index


class BulkRecordAccumulator(RecordAccumulator):
    """RecordAccumulator plus the entry points for ready-made (columnar) batches."""

    def append_batch(self, batch: ProducerBatch) -> None:
        """Queue a closed batch at its partition's tail (behind any open batch)."""
        assert batch.is_closed
        self.enqueue_batch(batch)

    def open_batch(self, batch: ColumnarBatch) -> None:
        """Queue an open ColumnarBatch that `send` appends to while it is the tail."""
        assert not batch.is_closed
        self.enqueue_batch(batch)


def plan_runs(
    sizes: Sequence[int], compression_type: int, batch_size_bytes: int
) -> list[tuple[int, int, int]]:
    """Cut records into consecutive runs (start, end, records_bytes) that fit batch.size.

    A record too big for batch.size on its own gets a run (and a buffer) of its own.
    """
    # HEADER_BYTES + compressed_upper_bound(records bytes) <= batch.size exactly when the
    # records bytes are at most this (the bound is monotonic): one search, not one per record
    limit_bytes = records_limit_bytes(compression_type, batch_size_bytes)
    runs = []
    start, size = 0, 0
    for index, record_size in enumerate(sizes):
        if index > start and size + record_size > limit_bytes:
            runs.append((start, index, size))
            start, size = index, 0
        size += record_size
    if start < len(sizes):
        runs.append((start, len(sizes), size))
    return runs
