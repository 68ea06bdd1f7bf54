"""ProducerBatch: records for one partition collected before a send, and their result handles.

Records are encoded (uncompressed, Kafka's v2 record layout, see log/records/builder.py) straight
into the batch's buffer from the BufferPool as they are appended; `build()` wraps them in a
RecordBatch v2 header, compressing as configured, with the producer id/epoch/base sequence
assigned when the batch was drained.

Size rule: a record is accepted only if the *worst-case* built size still fits the buffer::

    HEADER_BYTES + compressed_upper_bound(records_bytes + record_bytes) <= len(buffer)

where `compressed_upper_bound` is the codec's expansion bound on incompressible input (identity
for none). So a built batch never exceeds `batch.size` unless its buffer was sized for a single
bigger record. (Kafka estimates with an observed compression ratio instead; being exact here
costs compressed batches some fill but never breaks `max.request.size`.)

Each appended record gets a `RecordHandle`; `done()` completes every handle exactly once with
(partition, offset = base_offset + index, timestamp) or with an error.

Final states: None (open / in flight) -> SUCCEEDED | FAILED | ABORTED | SPLIT. A late `done`
on a batch that already FAILED/ABORTED (expired while in flight) returns False and changes
nothing; a second transition out of SUCCEEDED cannot happen (asserted).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from log.records.batch_header import HEADER_BYTES, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
from log.records.builder import BatchParts, Header, assemble_batch, encode_record
from log.records.compression import CompressionType
from log.records.varint import varint_size
from producer.cluster_view import TopicPartition

NO_TIMESTAMP = -1
# Worst-case varint sizes of a record's deltas: an int32 offset delta, an int64 timestamp delta.
_MAX_OFFSET_DELTA_BYTES = 5
_MAX_TIMESTAMP_DELTA_BYTES = 10


def compressed_upper_bound(compression_type: int, size_bytes: int) -> int:
    """Largest payload `size_bytes` of records can become after compression."""
    if compression_type == CompressionType.NONE:
        return size_bytes
    if compression_type == CompressionType.SNAPPY:  # xerial framing of 32 KiB snappy blocks
        return size_bytes + size_bytes // 6 + 16 + 40 * (size_bytes // 32768 + 1)
    return size_bytes + size_bytes // 64 + 64  # gzip / lz4 frame / zstd stored-block overhead


def encoded_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header],
) -> bytearray:
    out = bytearray()
    encode_record(out, offset_delta, timestamp_delta, key, value, headers)
    return out


def record_size_upper_bound(
    key: bytes | None, value: bytes | None, headers: Sequence[Header]
) -> int:
    """Encoded size of a record at any offset/timestamp delta, computed without encoding it."""
    body = 1 + _MAX_TIMESTAMP_DELTA_BYTES + _MAX_OFFSET_DELTA_BYTES
    body += _bytes_size(key) + _bytes_size(value) + varint_size(len(headers))
    for header in headers:
        body += _bytes_size(header.key.encode()) + _bytes_size(header.value)
    return varint_size(body) + body


def _bytes_size(data: bytes | None) -> int:
    return 1 if data is None else varint_size(len(data)) + len(data)


def estimate_batch_size_upper_bound(
    compression_type: int, key: bytes | None, value: bytes | None, headers: Sequence[Header]
) -> int:
    """Bytes a batch holding only this record can take when built (for sizing its buffer)."""
    record_bytes = record_size_upper_bound(key, value, headers)
    return HEADER_BYTES + compressed_upper_bound(compression_type, record_bytes)


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int  # -1 when the broker could not tell (DUPLICATE_SEQUENCE_NUMBER)
    timestamp_ms: int
    serialized_key_size: int
    serialized_value_size: int


class RecordHandle:
    """The future of one record's delivery; sans-IO: drivers hook `add_callback`."""

    __slots__ = (
        "topic_partition",
        "timestamp_ms",
        "_key_size",
        "_value_size",
        "_offset",
        "_log_timestamp_ms",
        "_error",
        "_callbacks",
        "_done",
    )

    def __init__(
        self,
        topic_partition: TopicPartition,
        timestamp_ms: int,
        key_size: int,
        value_size: int,
    ) -> None:
        self.topic_partition = topic_partition
        self.timestamp_ms = timestamp_ms
        self._key_size = key_size
        self._value_size = value_size
        self._offset = -1
        self._log_timestamp_ms = -1
        self._error: BaseException | None = None
        # None until the first callback: most handles never get one, or get exactly one
        self._callbacks: list[Callable[[RecordHandle], None]] | None = None
        self._done = False

    @property
    def done(self) -> bool:
        return self._done

    @property
    def error(self) -> BaseException | None:
        return self._error

    def result(self) -> RecordMetadata:
        """The metadata of a delivered record; raises its error if delivery failed.

        Built on demand: completing a batch only stores each record's offset and timestamp.
        """
        assert self._done, "result() on an incomplete record"
        if self._error is not None:
            raise self._error
        tp = self.topic_partition
        return RecordMetadata(
            tp.topic, tp.partition, self._offset, self._log_timestamp_ms, self._key_size,
            self._value_size,
        )  # fmt: skip

    def add_callback(self, callback: Callable[[RecordHandle], None]) -> None:
        """Call `callback(handle)` on completion (at once if already complete)."""
        if self._done:
            callback(self)
        elif self._callbacks is None:
            self._callbacks = [callback]
        else:
            self._callbacks.append(callback)

    def _complete(self, offset: int, timestamp_ms: int, error: BaseException | None) -> None:
        assert not self._done, f"record of {self.topic_partition} completed twice"
        self._done = True
        if error is not None:
            self._error = error
        else:
            self._offset = offset
            self._log_timestamp_ms = timestamp_ms
        callbacks = self._callbacks
        if callbacks is not None:
            self._callbacks = None
            for callback in callbacks:
                callback(self)


class FinalState(enum.Enum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ABORTED = "aborted"
    SPLIT = "split"


@dataclass(frozen=True, slots=True)
class _PendingRecord:
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    handle: RecordHandle


class ProducerBatch:
    # MESSAGE_TOO_LARGE splits a batch of several records (Kafka's rule); a batch that cannot
    # rebuild its records in smaller parts (bulk.ColumnarBatch with caller-encoded headers or
    # timestamps) says False, and then fails with that error instead.
    splittable = True

    def __init__(
        self,
        topic_partition: TopicPartition,
        buffer: bytearray,
        created_ms: int,
        compression_type: int = CompressionType.NONE,
        *,
        is_split_batch: bool = False,
    ) -> None:
        assert len(buffer) > HEADER_BYTES, len(buffer)
        self.topic_partition = topic_partition
        self.buffer = buffer
        self.buffer_size_bytes = len(buffer)
        self.compression_type = CompressionType(compression_type)
        self.is_split_batch = is_split_batch  # buffer not from the pool: never deallocated
        self.created_ms = created_ms
        self.last_attempt_ms = created_ms
        self.last_append_ms = created_ms
        self.drained_ms: int | None = None
        self.in_flight_request = False  # drained and no response handled yet
        self.attempts = 0
        self.retry_backoff_ms = 0  # chosen at reenqueue; ready/drain wait this long
        self.sent_to_node: int | None = None  # the leader of the last attempt
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.base_sequence = NO_SEQUENCE
        self.is_transactional = False
        self.sequence_has_been_reset = False
        self.final_state: FinalState | None = None
        self._records: list[_PendingRecord] = []
        self._records_bytes = 0
        self._base_timestamp_ms = NO_TIMESTAMP
        self._max_timestamp_ms = NO_TIMESTAMP
        self._closed = False
        self._built: tuple[tuple[int, int, int], bytes] | None = None

    # -- appending ------------------------------------------------------------------------------

    @property
    def record_count(self) -> int:
        return len(self._records)

    @property
    def estimated_size_bytes(self) -> int:
        """Worst-case built size of the records appended so far."""
        return HEADER_BYTES + compressed_upper_bound(self.compression_type, self._records_bytes)

    @property
    def is_full(self) -> bool:
        """Closed for appends, or at its size limit (Kafka's isFull)."""
        return self._closed or (
            bool(self._records) and self.estimated_size_bytes >= self.buffer_size_bytes
        )

    @property
    def is_closed(self) -> bool:
        return self._closed

    def try_append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        now_ms: int,
    ) -> RecordHandle | None:
        """Append one record; None when it does not fit (or the batch is closed)."""
        if self._closed:
            return None
        if not self._records:
            self._base_timestamp_ms = timestamp_ms
        record = encoded_record(
            len(self._records), timestamp_ms - self._base_timestamp_ms, key, value, headers
        )
        new_size = HEADER_BYTES + compressed_upper_bound(
            self.compression_type, self._records_bytes + len(record)
        )
        if new_size > self.buffer_size_bytes:
            assert self._records, "a fresh batch's buffer must fit its first record"
            return None
        self.buffer[self._records_bytes : self._records_bytes + len(record)] = record
        assert len(self.buffer) == self.buffer_size_bytes
        self._records_bytes += len(record)
        self._max_timestamp_ms = max(self._max_timestamp_ms, timestamp_ms)
        handle = RecordHandle(
            self.topic_partition,
            timestamp_ms,
            -1 if key is None else len(key),
            -1 if value is None else len(value),
        )
        self._records.append(_PendingRecord(timestamp_ms, key, value, tuple(headers), handle))
        self.last_append_ms = now_ms
        return handle

    def close(self) -> None:
        """No more appends (Kafka's closeForRecordAppends); called when drained or aborted."""
        self._closed = True

    # -- producer state (idempotence) -----------------------------------------------------------

    @property
    def has_sequence(self) -> bool:
        return self.base_sequence != NO_SEQUENCE

    @property
    def last_sequence(self) -> int:
        assert self.has_sequence
        return (self.base_sequence + self.record_count - 1) % 2**31

    def set_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int, is_transactional: bool
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional

    def reset_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int
    ) -> None:
        """Re-sequence an in-flight batch after an epoch bump (Kafka's resetProducerState)."""
        self.sequence_has_been_reset = True
        self.set_producer_state(producer_id, producer_epoch, base_sequence, self.is_transactional)

    # -- timing ---------------------------------------------------------------------------------

    @property
    def in_retry(self) -> bool:
        return self.attempts > 0

    def waited_time_ms(self, now_ms: int) -> int:
        return max(0, now_ms - self.last_attempt_ms)

    def has_reached_delivery_timeout(self, delivery_timeout_ms: int, now_ms: int) -> bool:
        return now_ms - self.created_ms >= delivery_timeout_ms

    def drained(self, now_ms: int, node_id: int | None = None) -> None:
        self.drained_ms = now_ms if self.drained_ms is None else max(self.drained_ms, now_ms)
        self.in_flight_request = True
        self.sent_to_node = node_id

    def is_backing_off(self, now_ms: int, leader: int | None) -> bool:
        """In retry and within its backoff -- unless the partition has a new leader since the
        last attempt (KIP-951: a retry that goes to another broker need not wait)."""
        if not self.in_retry or self.waited_time_ms(now_ms) >= self.retry_backoff_ms:
            return False
        return leader is None or leader == self.sent_to_node

    def reenqueued(self, now_ms: int, retry_backoff_ms: int) -> None:
        self.attempts += 1
        self.in_flight_request = False
        self.last_attempt_ms = now_ms
        self.last_append_ms = now_ms
        self.retry_backoff_ms = retry_backoff_ms

    # -- building -------------------------------------------------------------------------------

    def request_records(self) -> bytes | BatchParts:
        """The batch for a Produce request's records field: `build()`, or its pieces where
        a subclass has them without a joining copy (BatchParts)."""
        return self.build()

    def build(self) -> bytes:
        """The RecordBatch v2 bytes to send (base offset 0; the broker assigns offsets)."""
        assert self._records, "an empty batch is never sent"
        key = (self.producer_id, self.producer_epoch, self.base_sequence)
        if self._built is not None and self._built[0] == key and self._closed:
            return self._built[1]
        built = assemble_batch(
            bytes(self.buffer[: self._records_bytes]),
            record_count=len(self._records),
            base_offset=0,
            base_timestamp_ms=self._base_timestamp_ms,
            max_timestamp_ms=self._max_timestamp_ms,
            compression_type=self.compression_type,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence,
            is_transactional=self.is_transactional,
        )
        assert len(built) <= self.estimated_size_bytes, (len(built), self.estimated_size_bytes)
        self._built = (key, built)
        return built

    def split(self, split_batch_size_bytes: int, now_ms: int) -> list[ProducerBatch]:
        """Re-pack the records, in order, into batches of at most `split_batch_size_bytes`.

        Used after MESSAGE_TOO_LARGE. The new batches own fresh (non-pool) buffers and take over
        the records' handles; this batch becomes SPLIT. Producer state is copied, sequences
        continuing from this batch's base sequence.
        """
        assert self.final_state is None and len(self._records) > 1
        batches: list[ProducerBatch] = []
        for record in self._records:
            current = batches[-1] if batches else None
            if current is None or not current._append_existing(record, now_ms):
                size = max(
                    split_batch_size_bytes,
                    estimate_batch_size_upper_bound(
                        self.compression_type, record.key, record.value, record.headers
                    ),
                )
                current = ProducerBatch(
                    self.topic_partition,
                    bytearray(size),
                    self.created_ms,
                    self.compression_type,
                    is_split_batch=True,
                )
                appended = current._append_existing(record, now_ms)
                assert appended
                batches.append(current)
        sequence = self.base_sequence
        for batch in batches:
            batch.close()
            if self.has_sequence:
                batch.set_producer_state(
                    self.producer_id, self.producer_epoch, sequence, self.is_transactional
                )
                sequence = (sequence + batch.record_count) % 2**31
        self.final_state = FinalState.SPLIT
        self.in_flight_request = False
        self._records = []
        return batches

    def _append_existing(self, record: _PendingRecord, now_ms: int) -> bool:
        handle = self.try_append(
            record.timestamp_ms, record.key, record.value, record.headers, now_ms
        )
        if handle is None:
            return False
        self._records[-1] = _PendingRecord(
            record.timestamp_ms, record.key, record.value, record.headers, record.handle
        )
        return True

    # -- completion -----------------------------------------------------------------------------

    @property
    def is_done(self) -> bool:
        return self.final_state is not None

    def done(self, base_offset: int, log_append_time_ms: int, error: BaseException | None) -> bool:
        """Complete every record's handle; False (no change) if the batch already failed."""
        new_state = FinalState.SUCCEEDED if error is None else FinalState.FAILED
        return self._finish(new_state, base_offset, log_append_time_ms, error)

    def abort(self, error: BaseException) -> bool:
        """Fail every record without sending (producer closing, fatal error)."""
        self.close()
        return self._finish(FinalState.ABORTED, -1, NO_TIMESTAMP, error)

    def _finish(
        self,
        new_state: FinalState,
        base_offset: int,
        log_append_time_ms: int,
        error: BaseException | None,
    ) -> bool:
        self.in_flight_request = False
        if self.final_state is not None:
            assert self.final_state in (FinalState.FAILED, FinalState.ABORTED), (
                f"batch of {self.topic_partition} in state {self.final_state} "
                f"cannot become {new_state}"
            )
            return False
        self.final_state = new_state
        self._complete_records(base_offset, log_append_time_ms, error)
        return True

    def _complete_records(
        self, base_offset: int, log_append_time_ms: int, error: BaseException | None
    ) -> None:
        """Report the outcome to every record's handle (once, from _finish)."""
        for index, record in enumerate(self._records):
            if error is not None:
                record.handle._complete(-1, NO_TIMESTAMP, error)
            else:
                offset = base_offset + index if base_offset >= 0 else -1
                timestamp_ms = (
                    log_append_time_ms
                    if log_append_time_ms != NO_TIMESTAMP
                    else record.timestamp_ms
                )
                record.handle._complete(offset, timestamp_ms, None)

    def handles(self) -> list[RecordHandle]:
        return [record.handle for record in self._records]

    def __repr__(self) -> str:
        return (
            f"ProducerBatch({self.topic_partition}, records={self.record_count}, "
            f"base_sequence={self.base_sequence}, attempts={self.attempts}, "
            f"state={self.final_state})"
        )
