"""UnifiedLog: one partition's log -- segments, offsets, high watermark, epochs, producer state.

Theory of operation (Kafka's `UnifiedLog` + `LocalLog`, minus tiered storage):

* Segments are kept sorted by base offset; the last one is *active* and takes appends. Offsets
  live in `[log_start_offset, log_end_offset)`; `high_watermark` (what consumers may read) and
  `recovery_point` (everything below it is fsynced) lie in that range.
* `append_as_leader` validates the batch header and CRC-32C (never decoding records), checks the
  producer state for duplicates / sequence gaps / fenced producer epochs, assigns the offset and
  the leader epoch by patching baseOffset and partitionLeaderEpoch (outside the CRC: a patched
  17-byte prefix is written with the untouched rest in one `pwritev`; LogAppendTime rewrites
  maxTimestamp and the CRC on a copy), rolls the segment when a roll rule fires (retention.py)
  and writes the received bytes. A duplicate batch is not written; the append answers with the
  original offsets.
* `append_as_follower` keeps the leader's offsets (they must not go below the log end offset) and
  takes leader epochs from the batches.
* Transactions: the leader's appends come from clients (Produce) or from coordinators
  (`AppendOrigin.COORDINATOR`: transaction markers, transactional offset commits; no sequence
  checks). Every path -- leader, follower, recovery replay -- feeds the producer state, which
  tracks open transactions; a marker that ends an aborted one adds an entry to its segment's
  `.txnindex`. `last_stable_offset` bounds read_committed reads; aborted transactions of a
  fetched range come from `collect_aborted_transactions`.
* Retention deletes whole segments below the high watermark (retention.py) and advances
  `log_start_offset`; truncation (follower divergence) cuts at batch boundaries and truncates the
  leader-epoch cache and producer state with it.
* `log_loader.load_log` opens a directory and recovers it (Kafka's `LogLoader`).
* Compaction (log_cleaner.py) rewrites inactive segments elsewhere and swaps them in with
  `replace_segments`: offsets never change, gaps appear; a truncation is remembered in
  `truncated_to_offset` so the cleaner rewinds its checkpoint.
* Not thread-safe: one caller at a time per partition (Kafka holds the log lock for appends,
  truncation and roll). Reads only `pread`, so a driver may run them in a worker thread while
  no mutation is in progress.

All methods are synchronous and take `now_ms`; the only I/O is through `LogSegment` and the state
files owned by the leader-epoch cache and producer-state manager.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from log.common.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    KafkaError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from log.records.batch_header import (
    CONTROL_FLAG,
    CRC_OFFSET,
    HEADER_BYTES,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    BatchHeader,
    pack_prefix,
    read_header,
    set_base_offset,
    set_max_timestamp_log_append,
    set_partition_leader_epoch,
    validate_batch,
    validate_batch_fields,
)
from log.records.compression import decompress
from log.records.control import EndTransactionMarker, read_end_txn_marker
from log.records.reader import iter_records
from log.records.varint import decode_varint
from log.storage.append_origin import AppendOrigin
from log.storage.cleaner_swap import finish_swap
from log.storage.config import LogConfig
from log.storage.leader_epoch_cache import LeaderEpochFileCache
from log.storage.producer_state import BatchMetadata, CompletedTxn, ProducerStateManager
from log.storage.retention import SegmentSummary, deletable_segment_count, roll_reason
from log.storage.segment import (
    BatchSpan,
    Buffer,
    LogSegment,
    batch_span,
)
from log.storage.transaction_index import AbortedTxn

# Kafka's ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
NO_TIMESTAMP = -1
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class UnexpectedAppendOffsetError(KafkaError):
    """A follower append whose first offset is below the log end offset (Kafka's
    UnexpectedAppendOffsetException): the fetcher must truncate or refetch."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1


@dataclass(slots=True)  # not frozen: built on every append, frozen init costs ~2x
class LogAppendInfo:
    first_offset: int  # -1 when nothing was appended (empty input)
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    shallow_count: int  # batches
    valid_bytes: int
    last_leader_epoch: int = NO_PARTITION_LEADER_EPOCH
    duplicate: bool = False  # True: an idempotent retry, answered with the original offsets


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    fetch_offset_metadata: LogOffsetMetadata
    records: bytes
    # Where a sequential reader continues: after the last returned batch (the fetch offset
    # itself when nothing was returned). Saves callers a walk over the returned headers.
    next_fetch_offset: int = -1


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    timestamp_ms: int
    offset: int
    leader_epoch: int | None


def _scan_records(records: bytes | bytearray | memoryview) -> list[tuple[int, BatchHeader]]:
    """Validate every batch of a request; CorruptRecordError on trailing or broken bytes."""
    batches: list[tuple[int, BatchHeader]] = []
    position = 0
    end = len(records)
    while position < end:
        header = validate_batch(records, position)
        batches.append((position, header))
        position += header.size_bytes
    return batches


class UnifiedLog:
    """One partition's log in `dir_path` (`<topic>-<partition>`)."""

    def __init__(
        self,
        dir_path: str,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        log_start_offset: int,
        recovery_point: int,
        high_watermark: int,
        leader_epoch_cache: LeaderEpochFileCache,
        producer_state_manager: ProducerStateManager,
    ) -> None:
        assert segments, "a log always has an active segment"
        self.dir_path = dir_path
        self.config = config
        self._segments = segments
        self._base_offsets = [s.base_offset for s in segments]
        assert self._base_offsets == sorted(self._base_offsets)
        self.leader_epoch_cache = leader_epoch_cache
        self.producer_state_manager = producer_state_manager
        self._log_start_offset = max(log_start_offset, segments[0].base_offset)
        self._recovery_point = min(max(recovery_point, self._log_start_offset), self.log_end_offset)
        self._high_watermark = min(max(high_watermark, self._log_start_offset), self.log_end_offset)
        self.last_flush_ms = 0
        self.is_closed = False
        # The lowest offset truncated to since the log cleaner last looked (it rewinds its
        # cleaner-offset-checkpoint there, Kafka's maybeTruncateCheckpoint); None: no truncation.
        self.truncated_to_offset: int | None = None

    def update_config(self, config: LogConfig) -> None:
        """Take a new topic config; existing index files keep their sizes until they roll."""
        self.config = config
        for segment in self._segments:
            segment.config = config

    # -- offsets ------------------------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers may read (Kafka's lastStableOffset): the first offset
        of the oldest transaction that is open or whose marker is not yet below the high
        watermark (never below the log start offset), if that is below the high watermark;
        else the high watermark."""
        first_unstable = self.producer_state_manager.first_unstable_offset()
        if first_unstable is not None and first_unstable < self._high_watermark:
            return max(first_unstable, self._log_start_offset)
        return self._high_watermark

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self._segments)

    @property
    def latest_epoch(self) -> int | None:
        epoch = self.leader_epoch_cache.latest_epoch
        return None if epoch is None or epoch < 0 else epoch

    def update_high_watermark(self, offset: int) -> int:
        """Raise the high watermark to `offset` clamped to [log_start_offset, log_end_offset];
        it never moves back here (only truncation lowers it). Returns the high watermark."""
        self.maybe_increment_high_watermark(offset)
        return self._high_watermark

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        """As `update_high_watermark`; True when it moved (the leader then completes delayed
        produce/fetch requests)."""
        new = min(max(offset, self._log_start_offset), self.log_end_offset)
        if new > self._high_watermark:
            self._set_high_watermark(new)
            return True
        return False

    def _set_high_watermark(self, offset: int) -> None:
        self._high_watermark = offset
        self.producer_state_manager.on_high_watermark_updated(offset)

    # -- appends ------------------------------------------------------------------------------

    def _check_sizes(self, largest_batch_bytes: int, total_bytes: int) -> None:
        if largest_batch_bytes > self.config.max_message_bytes:
            raise MessageTooLargeError(
                f"batch of {largest_batch_bytes} bytes exceeds max.message.bytes "
                f"{self.config.max_message_bytes}"
            )
        if total_bytes > self.config.segment_bytes:
            raise RecordListTooLargeError(
                f"{total_bytes} bytes exceed segment.bytes {self.config.segment_bytes}"
            )

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        now_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> LogAppendInfo:
        """Validate, deduplicate, assign offsets and `leader_epoch`, and append `records`.

        A v2 produce request carries exactly one batch per partition (Kafka's LogValidator).
        The header is one struct unpack into a tuple; a BatchHeader is built only for batches
        with a producer id (the producer state needs one) and on the LogAppendTime path.
        Control batches (transaction markers) come only from the COORDINATOR origin, which
        skips the sequence checks (its data batches, a transactional offset commit, may carry
        no sequence) but not the producer and coordinator epoch checks.
        """
        assert not self.is_closed
        if not records:
            return self._empty_append_info()
        fields = validate_batch_fields(records)  # bounds, magic, CRC-32C
        (
            _,
            batch_length,
            _,
            _,
            _,
            attributes,
            last_offset_delta,
            _,
            max_timestamp,
            producer_id,
            _,
            base_sequence,
            record_count,
        ) = fields
        size_bytes = batch_length + LOG_OVERHEAD
        if size_bytes != len(records):
            _scan_records(records)  # CorruptRecordError for trailing garbage, else:
            raise InvalidRecordError("a produce request carries exactly one batch per partition")
        config = self.config
        if size_bytes > config.max_message_bytes or size_bytes > config.segment_bytes:
            self._check_sizes(size_bytes, size_bytes)  # raises
        if record_count != last_offset_delta + 1:
            raise InvalidRecordError(
                f"record count {record_count} disagrees with last offset delta {last_offset_delta}"
            )
        marker: EndTransactionMarker | None = None
        if attributes & CONTROL_FLAG:
            if origin is AppendOrigin.CLIENT:
                raise InvalidRecordError("Clients are not allowed to write control records")
            marker = read_end_txn_marker(records)
            if marker is None or producer_id < 0:
                raise InvalidRecordError("a control batch must hold a transaction marker")
        elif producer_id >= 0 and base_sequence < 0 and origin is AppendOrigin.CLIENT:
            raise InvalidRecordError("batch with a producer id but no base sequence")
        if config.compact and not attributes & CONTROL_FLAG:
            _check_keys_for_compaction(records)
        segment = self._segments[-1]
        base_offset = segment.next_offset  # the log end offset
        log_append_time_ms = -1
        header: BatchHeader | None = None  # only for a batch with a producer id
        parts: tuple[Buffer, ...]
        if config.is_log_append_time:  # maxTimestamp is under the CRC: copy and re-CRC
            buf = bytearray(records)
            set_base_offset(buf, 0, base_offset)
            set_partition_leader_epoch(buf, 0, leader_epoch)
            set_max_timestamp_log_append(buf, 0, BatchHeader(*fields), now_ms)
            log_append_time_ms = max_timestamp = now_ms  # what the batch now carries
            parts = (buf,)
            if producer_id >= 0:
                header = read_header(buf)
        else:  # only the 17 bytes before the CRC change: write new ones, then the rest as is
            prefix = pack_prefix(base_offset, batch_length, leader_epoch)
            parts = (prefix, memoryview(records)[CRC_OFFSET:])
            if producer_id >= 0:
                header = BatchHeader(base_offset, batch_length, leader_epoch, *fields[3:])
        if marker is not None:
            assert header is not None
            self.producer_state_manager.check_end_txn_marker(header, marker)
        elif header is not None and origin is AppendOrigin.COORDINATOR:
            self.producer_state_manager.check_coordinator_append(header)
        elif header is not None:  # a producer id: duplicate, producer epoch and sequence checks
            duplicate = self.producer_state_manager.check_append(header, now_ms)
            if duplicate is not None:
                return self._duplicate_append_info(duplicate)
        if leader_epoch >= 0 and leader_epoch != self.leader_epoch_cache.latest_epoch:
            self.leader_epoch_cache.assign(leader_epoch, base_offset)
        last_offset = base_offset + last_offset_delta
        if (
            roll_reason(  # _maybe_roll, inlined
                config,
                segment_base_offset=segment.base_offset,
                segment_size_bytes=segment.size_bytes,
                segment_first_batch_timestamp_ms=segment.first_batch_timestamp,
                segment_created_ms=segment.created_ms,
                index_full=segment.is_index_full,
                records_size_bytes=size_bytes,
                records_max_timestamp_ms=max_timestamp,
                records_last_offset=last_offset,
                now_ms=now_ms,
            )
            is not None
        ):
            segment = self.roll(now_ms, expected_next_offset=base_offset)
        segment.append_batch(parts, base_offset, last_offset, max_timestamp, size_bytes)
        if header is not None:
            completed = self.producer_state_manager.on_batch_appended(header, marker)
            if completed is not None:
                self._on_txn_completed(segment, completed)
        else:  # a batch without a producer id only moves the state's map end offset
            self.producer_state_manager.advance_map_end_offset(last_offset + 1)
        if last_offset + 1 - self._recovery_point >= config.flush_messages:
            self.flush(now_ms=now_ms)
        return LogAppendInfo(
            base_offset,
            last_offset,
            max_timestamp,
            last_offset,
            log_append_time_ms,
            self._log_start_offset,
            1,
            size_bytes,
            leader_epoch,
        )

    def _duplicate_append_info(self, duplicate: BatchMetadata) -> LogAppendInfo:
        """An idempotent retry: answer with the original append's offsets."""
        timestamp = duplicate.timestamp_ms
        return LogAppendInfo(
            first_offset=duplicate.first_offset,
            last_offset=duplicate.last_offset,
            max_timestamp=timestamp,
            offset_of_max_timestamp=duplicate.last_offset,
            log_append_time_ms=timestamp if self.config.is_log_append_time else -1,
            log_start_offset=self._log_start_offset,
            shallow_count=0,
            valid_bytes=0,
            duplicate=True,
        )

    def append_as_follower(
        self, records: bytes | bytearray | memoryview, now_ms: int = 0
    ) -> LogAppendInfo:
        """Append the leader's batches as they are: offsets kept, epochs taken from them."""
        assert not self.is_closed
        batches = _scan_records(records)
        if not batches:
            return self._empty_append_info()
        self._check_sizes(max(h.size_bytes for _, h in batches), len(records))
        first = batches[0][1]
        if first.base_offset < self.log_end_offset:
            raise UnexpectedAppendOffsetError(
                f"follower append at {first.base_offset} below log end offset "
                f"{self.log_end_offset}",
                first.base_offset,
                batches[-1][1].last_offset,
            )
        previous_last = first.base_offset - 1
        for _, header in batches:
            if header.base_offset <= previous_last:
                raise CorruptRecordError(
                    f"follower batch offsets not increasing at {header.base_offset}"
                )
            previous_last = header.last_offset
        for _, header in batches:
            if header.partition_leader_epoch >= 0:
                # The cache ignores a repeat of its latest epoch (maybeAssignEpochStartOffset).
                self.leader_epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        spans = [batch_span(position, header) for position, header in batches]
        markers = {
            header.base_offset: read_end_txn_marker(records, position)
            for position, header in batches
            if header.is_control and header.producer_id >= 0
        }
        self._append((records,), spans, [h for _, h in batches], now_ms, markers)
        max_timestamp, offset_of_max_timestamp = NO_TIMESTAMP, first.base_offset
        for _, header in batches:
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max_timestamp = header.max_timestamp, header.last_offset
        last = batches[-1][1]
        return LogAppendInfo(
            first_offset=first.base_offset,
            last_offset=last.last_offset,
            max_timestamp=max_timestamp,
            offset_of_max_timestamp=offset_of_max_timestamp,
            log_append_time_ms=-1,
            log_start_offset=self._log_start_offset,
            shallow_count=len(batches),
            valid_bytes=len(records),
            last_leader_epoch=last.partition_leader_epoch,
        )

    def _append(
        self,
        parts: Sequence[Buffer],
        spans: Sequence[BatchSpan],
        headers: Sequence[BatchHeader],
        now_ms: int,
        markers: dict[int, EndTransactionMarker | None] | None = None,
    ) -> None:
        """Roll if needed, write, and record the batches in the producer state. `headers` need
        only hold the batches with a producer id (final offsets); `markers` maps a control
        batch's base offset to its decoded transaction marker."""
        max_timestamp = max(span[3] for span in spans) if len(spans) > 1 else spans[0][3]
        size_bytes = spans[-1][0] + spans[-1][4]
        segment = self._maybe_roll(size_bytes, max_timestamp, spans[0][1], spans[-1][2], now_ms)
        segment.append(parts, spans)
        producer_state_manager = self.producer_state_manager
        for header in headers:
            if header.producer_id >= 0:
                marker = markers.get(header.base_offset) if markers else None
                completed = producer_state_manager.on_batch_appended(header, marker)
                if completed is not None:
                    self._on_txn_completed(segment, completed)
        # Batches without a producer id only move the state's map end offset.
        if producer_state_manager.map_end_offset < spans[-1][2] + 1:
            producer_state_manager.update_map_end_offset(spans[-1][2] + 1)
        if self.log_end_offset - self._recovery_point >= self.config.flush_messages:
            self.flush(now_ms=now_ms)

    def _on_txn_completed(self, segment: LogSegment, completed: CompletedTxn) -> None:
        """A marker in `segment` completed a transaction that held data: an aborted one goes
        into the segment's transaction index (Kafka's updateTxnIndex)."""
        if completed.is_aborted:
            segment.update_txn_index(
                AbortedTxn(
                    completed.producer_id,
                    completed.first_offset,
                    completed.last_offset,
                    completed.last_stable_offset,
                )
            )

    def collect_aborted_transactions(
        self, start_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, upper_bound_offset), from the
        segment holding start_offset on, until an entry's LSO reaches the upper bound
        (Kafka's collectAbortedTransactions)."""
        found: list[AbortedTxn] = []
        for segment in self._segments[self._segment_index_for(start_offset) :]:
            entries, complete = segment.txn_index.collect_aborted_txns(
                start_offset, upper_bound_offset
            )
            found.extend(entries)
            if complete:
                break
        return found

    def _empty_append_info(self) -> LogAppendInfo:
        return LogAppendInfo(
            first_offset=-1,
            last_offset=-1,
            max_timestamp=NO_TIMESTAMP,
            offset_of_max_timestamp=-1,
            log_append_time_ms=-1,
            log_start_offset=self._log_start_offset,
            shallow_count=0,
            valid_bytes=0,
        )

    # -- roll ---------------------------------------------------------------------------------

    def _maybe_roll(
        self,
        records_size_bytes: int,
        records_max_timestamp_ms: int,
        first_offset: int,
        last_offset: int,
        now_ms: int,
    ) -> LogSegment:
        segment = self.active_segment
        reason = roll_reason(
            self.config,
            segment_base_offset=segment.base_offset,
            segment_size_bytes=segment.size_bytes,
            segment_first_batch_timestamp_ms=segment.first_batch_timestamp,
            segment_created_ms=segment.created_ms,
            index_full=segment.is_index_full,
            records_size_bytes=records_size_bytes,
            records_max_timestamp_ms=records_max_timestamp_ms,
            records_last_offset=last_offset,
            now_ms=now_ms,
        )
        if reason is None:
            return segment
        return self.roll(now_ms, expected_next_offset=first_offset)

    def roll(self, now_ms: int, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, log_end_offset).

        Like Kafka, the segments before it are then flushed and the recovery point moves to
        the new base offset (Kafka schedules that flush right away; we do it inline), so after
        an OS crash only the active segment can have lost data and offsets never gap.
        """
        new_offset = max(expected_next_offset or 0, self.log_end_offset)
        active = self.active_segment
        if active.size_bytes == 0:
            if active.base_offset == new_offset:
                return active
            # An empty active segment is replaced rather than left behind (follower gap).
            active.delete()
            self._segments.pop()
            self._base_offsets.pop()
        else:
            active.on_become_inactive()
        segment = LogSegment.create(self.dir_path, new_offset, self.config, now_ms)
        self._segments.append(segment)
        self._base_offsets.append(new_offset)
        self.flush(up_to_offset=new_offset, now_ms=now_ms)
        # Kafka snapshots producer state at every roll, at the new segment's base offset, so
        # recovery can start from a segment boundary.
        self.producer_state_manager.update_map_end_offset(new_offset)
        self.producer_state_manager.take_snapshot()
        return segment

    # -- reads --------------------------------------------------------------------------------

    def _segment_index_for(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self._base_offsets, offset) - 1)

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        upper_bound_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> FetchDataInfo:
        """File bytes of whole batches from the one holding `start_offset`, below
        `upper_bound_offset` (the high watermark for consumers, None for followers)."""
        log_end_offset = self.log_end_offset
        if start_offset < self._log_start_offset or start_offset > log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} outside [{self._log_start_offset}, {log_end_offset}]"
            )
        bound = log_end_offset if upper_bound_offset is None else upper_bound_offset
        empty = FetchDataInfo(LogOffsetMetadata(start_offset), b"", start_offset)
        if start_offset >= bound or max_bytes < 0:
            return empty
        index = self._segment_index_for(start_offset)
        while index < len(self._segments):
            segment = self._segments[index]
            if segment.base_offset >= bound:
                break
            max_position = None
            if bound < segment.next_offset:
                found = segment.translate_offset(bound)
                max_position = found[0] if found is not None else None
            result = segment.read(start_offset, max_bytes, max_position, min_one_batch)
            if result is not None:
                metadata = LogOffsetMetadata(start_offset, segment.base_offset, result.position)
                return FetchDataInfo(metadata, result.records, result.next_offset)
            index += 1
        return empty

    def iter_batch_headers(
        self, start_offset: int = 0
    ) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
        """(segment, position, header) of every batch whose last offset >= `start_offset`."""
        for segment in self._segments[self._segment_index_for(start_offset) :]:
            for position, header in segment.iter_batch_headers(start_offset):
                yield segment, position, header

    # -- leader epochs and timestamps ---------------------------------------------------------

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetsForLeaderEpoch answers; (-1, -1) when unknown."""
        return self.leader_epoch_cache.end_offset_for(leader_epoch, self.log_end_offset)

    def _epoch_for_offset(self, offset: int) -> int | None:
        return self.leader_epoch_cache.epoch_for_offset(offset)

    def fetch_offset_by_timestamp(self, timestamp_ms: int) -> TimestampAndOffset | None:
        """ListOffsets: earliest (-2), latest (-1), max timestamp (-3), or the first offset whose
        record timestamp >= `timestamp_ms` (None when every record is older)."""
        if timestamp_ms == EARLIEST_TIMESTAMP:
            offset = self._log_start_offset
            return TimestampAndOffset(NO_TIMESTAMP, offset, self._epoch_for_offset(offset))
        if timestamp_ms == LATEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, self.log_end_offset, self.latest_epoch)
        if timestamp_ms == MAX_TIMESTAMP:
            best = None
            for segment in self._segments:
                if segment.size_bytes and (
                    best is None or segment.max_timestamp_so_far > best.max_timestamp_so_far
                ):
                    best = segment
            if best is None or best.max_timestamp_so_far < 0:
                return None
            # The record holding the max timestamp, not its batch's last offset (KAFKA-16310)
            exact = self._first_record_at_or_after(best, best.max_timestamp_so_far)
            if exact is not None:
                return exact
            offset = best.offset_of_max_timestamp_so_far
            return TimestampAndOffset(
                best.max_timestamp_so_far, offset, self._epoch_for_offset(offset)
            )
        if timestamp_ms < 0:
            raise InvalidRecordError(f"invalid ListOffsets timestamp {timestamp_ms}")
        for segment in self._segments:
            if segment.size_bytes == 0 or segment.largest_timestamp < timestamp_ms:
                continue
            found = self._first_record_at_or_after(segment, timestamp_ms)
            if found is not None:
                return found
        return None

    def _first_record_at_or_after(
        self, segment: LogSegment, timestamp_ms: int
    ) -> TimestampAndOffset | None:
        """The first record of `segment` (from the log start on) stamped >= `timestamp_ms`."""
        starting_offset = self._log_start_offset
        while found := segment.find_offset_by_timestamp(timestamp_ms, starting_offset):
            position, header = found
            record = first_record_at_or_after(
                segment.read_batch(position, header), timestamp_ms, self._log_start_offset
            )
            if record is not None:
                offset, record_timestamp = record
                return TimestampAndOffset(record_timestamp, offset, self._epoch_for_offset(offset))
            starting_offset = header.next_offset
        return None

    # -- retention and truncation -------------------------------------------------------------

    def _summaries(self) -> list[SegmentSummary]:
        summaries = []
        for index, segment in enumerate(self._segments):
            is_last = index == len(self._segments) - 1
            upper = self.log_end_offset if is_last else self._segments[index + 1].base_offset
            summaries.append(
                SegmentSummary(
                    segment.base_offset, upper, segment.size_bytes, segment.largest_timestamp
                )
            )
        return summaries

    def delete_old_segments(self, now_ms: int) -> int:
        """Apply retention.ms / retention.bytes / log start offset; return segments deleted."""
        retention_ms = self.config.retention_ms
        retention_bytes = self.config.retention_bytes
        if not self.config.delete:
            retention_ms = retention_bytes = -1  # compacted-only topics keep everything
        count, _ = deletable_segment_count(
            self._summaries(),
            high_watermark=self._high_watermark,
            log_start_offset=self._log_start_offset,
            retention_ms=retention_ms,
            retention_bytes=retention_bytes,
            now_ms=now_ms,
        )
        if count == 0:
            return 0
        if count == len(self._segments):
            self.roll(now_ms)
        self._delete_oldest(count)
        self._maybe_increment_log_start_offset(self._segments[0].base_offset)
        return count

    def replace_segments(
        self,
        old_segments: Sequence[LogSegment],
        swap_path: str | None,
        spans: Sequence[BatchSpan],
    ) -> LogSegment | None:
        """The log cleaner's commit (Kafka's replaceSegments): `old_segments`, consecutive and
        inactive, give way to the committed cleaned file `swap_path` (steps 3-4 of
        cleaner_swap.py), whose indexes are built from `spans`; `swap_path` None: they held
        nothing worth keeping and simply go. Offsets never change, so readers see the same
        batches minus the cleaned records; one holding an offset in a gap gets the next batch.
        """
        assert old_segments and not self.is_closed
        first = next(i for i, s in enumerate(self._segments) if s is old_segments[0])
        end = first + len(old_segments)
        assert end < len(self._segments), "the active segment is never cleaned"
        assert all(a is b for a, b in zip(self._segments[first:end], old_segments, strict=True))
        aborted = [entry for s in old_segments for entry in s.txn_index.entries]
        for segment in old_segments:
            segment.delete()
        replacement: list[LogSegment] = []
        if swap_path is not None:
            finish_swap(swap_path, fsync=False)  # the cleaner fsyncs the directory once
            base = old_segments[0]
            segment = LogSegment(self.dir_path, base.base_offset, self.config, base.created_ms)
            segment.load_from_spans(spans)
            for entry in aborted:  # kept for markers still there; harmless for removed ones
                segment.update_txn_index(entry)
            if aborted:
                segment.txn_index.flush()  # below the recovery point: never rebuilt by replay
            replacement.append(segment)
        self._segments[first:end] = replacement
        self._base_offsets[first:end] = [s.base_offset for s in replacement]
        if first == 0:
            self._maybe_increment_log_start_offset(self._segments[0].base_offset)
        return replacement[0] if replacement else None

    def _maybe_increment_log_start_offset(self, offset: int) -> None:
        if offset <= self._log_start_offset:
            return
        self._log_start_offset = offset
        if offset > self._high_watermark:
            self._set_high_watermark(offset)
        self._recovery_point = max(self._recovery_point, offset)
        self.producer_state_manager.on_log_start_offset_incremented(offset)
        self.leader_epoch_cache.truncate_from_start(offset)
        self.producer_state_manager.delete_snapshots_before(self._segments[0].base_offset)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: raise the log start offset to `offset` (<= high watermark), then drop
        segments wholly below it. Returns the new log start offset."""
        if offset > self._high_watermark or offset < 0:
            raise OffsetOutOfRangeError(
                f"cannot delete before {offset}: high watermark is {self._high_watermark}"
            )
        self._maybe_increment_log_start_offset(offset)
        count = 0
        while (
            count + 1 < len(self._segments)
            and self._segments[count + 1].base_offset <= self._log_start_offset
        ):
            count += 1
        self._delete_oldest(count)
        return self._log_start_offset

    def _delete_oldest(self, count: int) -> None:
        doomed = self._segments[:count]
        del self._segments[:count]
        del self._base_offsets[:count]
        for segment in doomed:
            segment.delete()

    def truncate_to(self, offset: int, now_ms: int = 0) -> bool:
        """Remove everything at or after `offset` (follower divergence); True if anything went."""
        if offset < 0:
            raise OffsetOutOfRangeError(f"cannot truncate to {offset}")
        if offset >= self.log_end_offset:
            # Kafka truncates the epoch cache even then: a leader that assigned a new epoch's
            # start offset but appended nothing before losing leadership holds an entry at the
            # log end offset that conflicts with the new leader's history.
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        if offset < self._segments[0].base_offset:
            self.truncate_fully_and_start_at(offset, now_ms)
            return True
        self._note_truncation(offset)
        keep = self._segment_index_for(offset)
        doomed = self._segments[keep + 1 :]
        del self._segments[keep + 1 :]
        del self._base_offsets[keep + 1 :]
        for segment in doomed:
            segment.delete()
        self.active_segment.truncate_to(offset)
        end = self.log_end_offset
        self._high_watermark = min(self._high_watermark, end)
        self._recovery_point = min(self._recovery_point, end)
        self._log_start_offset = min(self._log_start_offset, end)
        self.leader_epoch_cache.truncate_from_end(end)
        self.producer_state_manager.truncate_and_reload(self._log_start_offset, end, now_ms)
        self._replay_producer_state()
        return True

    def truncate_fully_and_start_at(self, offset: int, now_ms: int = 0) -> None:
        """Drop every segment and restart empty at `offset` (a follower far behind the leader)."""
        assert offset >= 0
        self._note_truncation(offset)
        for segment in self._segments:
            segment.delete()
        self._segments = [LogSegment.create(self.dir_path, offset, self.config, now_ms)]
        self._base_offsets = [offset]
        self._log_start_offset = offset
        self._high_watermark = offset
        self._recovery_point = offset
        self.leader_epoch_cache.clear()
        self.producer_state_manager.truncate_fully_and_start_at(offset)

    def _note_truncation(self, offset: int) -> None:
        if self.truncated_to_offset is None or offset < self.truncated_to_offset:
            self.truncated_to_offset = offset

    def rebuild_producer_state(self, now_ms: int = 0, replay_from: int | None = None) -> None:
        """Load the producer state from its newest snapshot at or below the log end offset (and
        at or below `replay_from`: the loader's first recovered segment) and replay the batches
        after it (Kafka's rebuildProducerState; the loader calls it once the segments are
        recovered). The replay also rebuilds recovered segments' transaction indexes."""
        end = self.log_end_offset if replay_from is None else min(replay_from, self.log_end_offset)
        self.producer_state_manager.load(self._log_start_offset, end, now_ms)
        self._replay_producer_state()

    def _replay_producer_state(self) -> None:
        """Feed batches after the producer state's map end offset back into it."""
        start = self.producer_state_manager.map_end_offset
        if start >= self.log_end_offset:
            return
        for segment, position, header in self.iter_batch_headers(start):
            if header.base_offset >= start:
                marker = None
                if header.is_control and header.producer_id >= 0:
                    marker = _marker_or_none(segment.read_batch(position, header))
                completed = self.producer_state_manager.on_batch_appended(header, marker)
                if completed is not None:
                    self._on_txn_completed(segment, completed)
        self.producer_state_manager.on_high_watermark_updated(self._high_watermark)

    # -- durability and lifecycle -------------------------------------------------------------

    def flush(self, up_to_offset: int | None = None, now_ms: int = 0) -> None:
        """fsync every segment holding offsets in [recovery_point, up_to_offset); advance the
        recovery point."""
        end = (
            self.log_end_offset if up_to_offset is None else min(up_to_offset, self.log_end_offset)
        )
        # Its entries durable before the recovery point moves past them (and at a clean
        # shutdown, which flushes every log before it writes the marker).
        self.leader_epoch_cache.sync()
        if end <= self._recovery_point:
            return
        for segment in self._segments:
            if segment.next_offset > self._recovery_point and segment.base_offset < end:
                segment.flush()
        self._recovery_point = end
        self.last_flush_ms = now_ms

    def close(self) -> None:
        """Snapshot producer state (so a clean restart need not replay) and close the files."""
        if self.is_closed:
            return
        self.producer_state_manager.take_snapshot()
        for segment in self._segments:
            segment.close()
        self.is_closed = True

    def close_handlers(self) -> None:
        """Close the files without writing anything (no producer snapshot, no index entry):
        the log directory failed, and nothing is written there again."""
        for segment in self._segments:
            segment.close_handlers()
        self.is_closed = True

    def delete(self) -> None:
        """Remove every file of this log (the manager removes the directory)."""
        for segment in self._segments:
            segment.delete()
        self._segments = []
        self.is_closed = True

    def __repr__(self) -> str:
        return (
            f"UnifiedLog({self.dir_path!r}, log_start_offset={self._log_start_offset}, "
            f"log_end_offset={self.log_end_offset}, high_watermark={self._high_watermark})"
        )


def _marker_or_none(batch: bytes) -> EndTransactionMarker | None:
    """A control batch's marker when replaying the log; an unparseable one (its CRC passed)
    counts as empty rather than stopping recovery."""
    try:
        return read_end_txn_marker(batch)
    except CorruptRecordError:
        return None


def _check_keys_for_compaction(records: bytes | bytearray | memoryview) -> None:
    """Kafka's LogValidator for a compacted topic: every record needs a key (the cleaner would
    silently drop a keyless one). Decodes the records: compacted topics only."""
    for record in iter_records(records, 0, check_crc=False):
        if record.key is None:
            raise InvalidRecordError("Compacted topic cannot accept message without key")


def first_record_at_or_after(
    batch: bytes, timestamp_ms: int, min_offset: int
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record in `batch` with timestamp >= `timestamp_ms` and
    offset >= `min_offset`. ListOffsets only -- the one place the log decodes records."""
    header = validate_batch(batch)
    if header.timestamp_type == 1:  # LogAppendTime: every record carries maxTimestamp
        if header.max_timestamp < timestamp_ms or header.last_offset < min_offset:
            return None
        return max(header.base_offset, min_offset), header.max_timestamp
    body: bytes | memoryview = memoryview(batch)[HEADER_BYTES:]
    if header.compression_type:
        body = decompress(header.compression_type, body)
    position = 0
    for _ in range(header.record_count):
        length, position = decode_varint(body, position, 5)
        record_end = position + length
        if length < 0 or record_end > len(body):
            raise CorruptRecordError("record runs past the end of its batch")
        timestamp_delta, cursor = decode_varint(body, position + 1)
        offset_delta, _ = decode_varint(body, cursor, 5)
        offset = header.base_offset + offset_delta
        timestamp = header.base_timestamp + timestamp_delta
        if timestamp >= timestamp_ms and offset >= min_offset:
            return offset, timestamp
        position = record_end
    return None
