"""LogSegment: one `<base offset>.log` file of record batches plus its two sparse indexes.

Files, named by the segment's base offset as 20 zero-padded digits (Kafka's names)::

    00000000000000000000.log        batches exactly as received (after the leader's patching)
    00000000000000000000.index      OffsetIndex: (relative offset u32, position u32)
    00000000000000000000.timeindex  TimeIndex:   (timestamp i64, relative offset u32)
    00000000000000000000.txnindex   TransactionIndex: the aborted transactions whose ABORT
                                    marker is in this segment (created with its first entry)

Appends write the batch bytes at the end of the `.log` with `os.pwrite`, then, batch by batch
(only headers, never records), add an index entry when more than `index.interval.bytes` were
appended since the previous one: the offset entry maps the batch's last offset to the batch's
position; the time entry records the max timestamp so far when it grew. Reads return file bytes
of whole batches, starting at the first batch whose last offset >= the fetch offset (found by
index lookup then a header scan).

`recover` re-reads every batch (bounds, magic, CRC-32C, offsets increasing and within the
segment's u32 relative range), rebuilds both indexes, and truncates the file at the first batch
that fails: a torn or corrupt tail never survives. `load_lightly` is for clean restarts: it
trusts the indexes after a sanity check and scans only from the last index entry to the end.
Nothing here is fsynced unless `flush` is called (Kafka's default).
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn, Union

from log.common.errors import CorruptRecordError, KafkaStorageError
from log.records.batch_header import (
    HEADER_BYTES,
    BatchHeader,
    read_header,
    validate_batch,
)
from log.storage.abstract_index import U32_MAX, CorruptIndexError
from log.storage.clean_shutdown import note_io_error
from log.storage.config import LogConfig
from log.storage.offset_index import OffsetIndex
from log.storage.time_index import TimeIndex
from log.storage.transaction_index import TXN_INDEX_FILE_SUFFIX, AbortedTxn, TransactionIndex

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
DELETED_FILE_SUFFIX = ".deleted"
NO_TIMESTAMP = -1
# Kafka keeps relative offsets within a signed int; the u32 index field could hold more, but a
# segment never spans more than Int.MaxValue offsets so every relative offset fits either way.
MAX_RELATIVE_OFFSET = (1 << 31) - 1
TAIL_BATCHES = 128  # recent batch starts a segment remembers (translate_offset)
TAIL_HEADERS = 8  # of them, the headers last read (a thousand partitions: 8,000 headers)
assert MAX_RELATIVE_OFFSET <= U32_MAX


def filename_prefix(base_offset: int) -> str:
    return f"{base_offset:020d}"


Buffer = Union[bytes, bytearray, memoryview]  # noqa: UP007 - runtime alias
# (position within the appended bytes, base offset, last offset, max timestamp, size in bytes)
BatchSpan = tuple[int, int, int, int, int]


def batch_span(position: int, header: BatchHeader) -> BatchSpan:
    return (
        position,
        header.base_offset,
        header.last_offset,
        header.max_timestamp,
        header.size_bytes,
    )


@dataclass(frozen=True, slots=True)
class SegmentReadResult:
    position: int  # where the returned bytes start in the .log file
    records: bytes
    next_offset: int  # where the next fetch continues: after the last returned batch


class LogSegment:
    """One segment: its files, its indexes, and the bookkeeping for appends and roll checks."""

    def __init__(self, dir_path: str, base_offset: int, config: LogConfig, created_ms: int):
        assert base_offset >= 0
        self.dir_path = dir_path
        self.base_offset = base_offset
        self.config = config
        self.created_ms = created_ms
        prefix = os.path.join(dir_path, filename_prefix(base_offset))
        self.log_path = prefix + LOG_FILE_SUFFIX
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size_bytes = os.fstat(self._fd).st_size
        self.offset_index = OffsetIndex(
            prefix + INDEX_FILE_SUFFIX, base_offset, config.segment_index_bytes
        )
        self.time_index = TimeIndex(
            prefix + TIME_INDEX_FILE_SUFFIX, base_offset, config.segment_index_bytes
        )
        self.txn_index = TransactionIndex(prefix + TXN_INDEX_FILE_SUFFIX, base_offset)
        self.next_offset = base_offset  # last batch's last offset + 1, or base when empty
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = base_offset
        self.first_batch_timestamp: int | None = None
        self.bytes_since_last_index_entry = 0
        self.is_open = True
        # Where the most recently appended batches start (last offset, position), oldest first,
        # contiguous: a fetch near the log end (every follower's and tailing consumer's) finds
        # its batch here instead of reading every header after the last index entry (up to
        # index.interval.bytes of small batches, one pread each).
        self._tail_last_offsets: list[int] = []
        self._tail_positions: list[int] = []
        # The headers of the last few tail batches read, by position: every follower and
        # tailing consumer reads the newest batch, and only the first of them reads its header
        # from the file. Only truncation and recovery rewrite a position; both forget these.
        self._tail_headers: dict[int, BatchHeader] = {}

    # -- creation and loading -----------------------------------------------------------------

    @classmethod
    def create(cls, dir_path: str, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
        """A new, empty segment (any leftover files at that name are replaced)."""
        for suffix in (
            LOG_FILE_SUFFIX,
            INDEX_FILE_SUFFIX,
            TIME_INDEX_FILE_SUFFIX,
            TXN_INDEX_FILE_SUFFIX,
        ):
            path = os.path.join(dir_path, filename_prefix(base_offset) + suffix)
            if os.path.exists(path):
                os.remove(path)
        segment = cls(dir_path, base_offset, config, now_ms)
        segment.offset_index.reset()
        segment.time_index.reset()
        return segment

    def load_indexes(self) -> bool:
        """Load both indexes; False when either is missing, torn or fails the sanity check."""
        try:
            self.offset_index.load()
            self.time_index.load()
            self.txn_index.sanity_check()
        except CorruptIndexError:
            return False
        return self._sanity_check()

    def _sanity_check(self) -> bool:
        """The last offset entry must point at a batch whose last offset it names (Kafka's
        sanityCheck level: inner entries are trusted; unflushed segments are rebuilt anyway)."""
        if self.offset_index.entry_count:
            offset, position = self.offset_index.last_entry
            header = self._header_at(position)
            if header is None or header.last_offset != offset:
                return False
        return True

    def load_lightly(self) -> bool:
        """Trust the indexes and scan from the last index entry; False if that tail is bad."""
        if not self.load_indexes():
            return False
        _, position = self.offset_index.last_entry
        last_entry = self.time_index.last_entry
        if last_entry is not None:
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = last_entry
        try:
            end = self._scan_headers(position, self._track_tail)
        except CorruptRecordError:
            return False
        if end != self.size_bytes:
            return False
        if last_entry is not None and last_entry[1] >= self.next_offset:
            return False  # the time index names an offset the log does not hold
        last_aborted = self.txn_index.last_offset
        if last_aborted is not None and last_aborted >= self.next_offset:
            return False  # an aborted transaction whose marker the log does not hold
        first = self._header_at(0)
        self.first_batch_timestamp = first.max_timestamp if first is not None else None
        self.bytes_since_last_index_entry = self.size_bytes - position
        return True

    def _track_tail(self, position: int, header: BatchHeader) -> None:
        del position
        self.next_offset = header.next_offset
        if header.max_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = header.max_timestamp
            self.offset_of_max_timestamp_so_far = header.last_offset

    # -- append -------------------------------------------------------------------------------

    def append(self, parts: Sequence[Buffer], batches: Sequence[BatchSpan]) -> None:
        """Write the concatenation of `parts` (validated batches) at the end with one
        `pwritev`; index it batch by batch. Parts let the leader write a patched 17-byte
        header prefix and the caller's untouched remainder without copying the batch.

        `batches` lists a BatchSpan (position within `records`, base offset, last offset, max
        timestamp, size) for every batch, in order -- plain tuples, so no header objects are
        needed for them.
        """
        assert self.is_open
        assert batches and batches[0][1] >= self.next_offset
        assert self.can_hold(batches[-1][2])
        start = self._write(parts, batches[-1][0] + batches[-1][4])  # the last batch ends them
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = batches[0][3]
        for position, _, last_offset, max_timestamp, size_bytes in batches:
            self._index_batch(start + position, last_offset, max_timestamp, size_bytes)
            self._remember_tail(last_offset, start + position)
        self.next_offset = batches[-1][2] + 1

    def append_batch(
        self,
        parts: Sequence[Buffer],
        base_offset: int,
        last_offset: int,
        max_timestamp: int,
        size_bytes: int,
    ) -> None:
        """`append` of exactly one batch of `size_bytes` (the leader's per-append path: no span
        list, and `_write` and `_index_batch` inlined)."""
        assert self.is_open
        assert base_offset >= self.next_offset
        assert 0 <= last_offset - self.base_offset <= MAX_RELATIVE_OFFSET  # can_hold
        position = self.size_bytes
        try:
            written = os.pwritev(self._fd, parts, position)
            if written < size_bytes:
                written = self._finish_short_write(parts, position, written)
        except OSError as exc:
            self._undo_failed_write(position, exc)
        self.size_bytes = position + written
        self._remember_tail(last_offset, position)
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = max_timestamp
            self.offset_of_max_timestamp_so_far = last_offset
        if self.bytes_since_last_index_entry > self.config.index_interval_bytes:
            self._add_index_entries(position, last_offset)
            self.bytes_since_last_index_entry = size_bytes
        else:
            self.bytes_since_last_index_entry += size_bytes
        self.next_offset = last_offset + 1

    def _remember_tail(self, last_offset: int, position: int) -> None:
        last_offsets = self._tail_last_offsets
        last_offsets.append(last_offset)
        self._tail_positions.append(position)
        if len(last_offsets) > 2 * TAIL_BATCHES:
            del last_offsets[:TAIL_BATCHES], self._tail_positions[:TAIL_BATCHES]

    def _forget_tail(self) -> None:
        self._tail_last_offsets.clear()
        self._tail_positions.clear()
        self._tail_headers.clear()

    def _write(self, parts: Sequence[Buffer], size_bytes: int) -> int:
        """Write `parts` (`size_bytes` in all) at the end of the file; return where they start.
        One `pwritev` (so the bytes are in the OS when it returns); a short write is finished
        byte-exactly, a failed one is cut off again and reported as KafkaStorageError."""
        start = self.size_bytes
        try:
            written = os.pwritev(self._fd, parts, start)
            if written < size_bytes:
                written = self._finish_short_write(parts, start, written)
        except OSError as exc:
            self._undo_failed_write(start, exc)
        self.size_bytes = start + written
        return start

    def _finish_short_write(self, parts: Sequence[Buffer], start: int, written: int) -> int:
        """A short write (rare): write the rest byte-exactly; return the total written."""
        rest = memoryview(b"".join(parts))[written:]
        while rest:
            count = os.pwrite(self._fd, rest, start + written)
            written += count
            rest = rest[count:]
        return written

    def _undo_failed_write(self, start: int, exc: OSError) -> NoReturn:
        """ENOSPC, EIO...: drop the partial write, report a typed error."""
        note_io_error(self.dir_path, exc)  # whatever is left, the next start checks it
        try:
            os.ftruncate(self._fd, start)
        except OSError:
            pass  # recovery cuts whatever tail remains
        raise KafkaStorageError(f"append to {self.log_path} failed: {exc}") from exc

    def _index_batch(
        self, position: int, last_offset: int, max_timestamp: int, size_bytes: int
    ) -> None:
        if max_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = max_timestamp
            self.offset_of_max_timestamp_so_far = last_offset
        if self.bytes_since_last_index_entry > self.config.index_interval_bytes:
            self._add_index_entries(position, last_offset)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size_bytes

    def _add_index_entries(self, position: int, last_offset: int) -> None:
        """Index the batch at `position` (more than index.interval.bytes since the last)."""
        if not self.offset_index.is_full:
            self.offset_index.append(last_offset, position)
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)

    @property
    def is_index_full(self) -> bool:
        """Either index is full (a roll rule); lengths read directly, as it runs per append."""
        offset_index = self.offset_index
        time_index = self.time_index
        return (
            len(offset_index.relative_offsets) >= offset_index.max_entries
            or len(time_index.timestamps) >= time_index.max_entries
        )

    def can_hold(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= MAX_RELATIVE_OFFSET

    # -- reads --------------------------------------------------------------------------------

    def _header_at(self, position: int) -> BatchHeader | None:
        if position + HEADER_BYTES > self.size_bytes:
            return None
        data = os.pread(self._fd, HEADER_BYTES, position)
        try:
            return read_header(data)
        except CorruptRecordError:
            return None

    def _scan_headers(
        self,
        position: int,
        visit: Callable[[int, BatchHeader], bool | None],
        end_position: int | None = None,
    ) -> int:
        """Call `visit(position, header)` per batch until it returns True; return the stop
        position (where `visit` said stop, or the end). Raises CorruptRecordError on a bad
        header or a batch running past the end."""
        end = self.size_bytes if end_position is None else end_position
        while position < end:
            header = self._header_at(position)
            if header is None or position + header.size_bytes > self.size_bytes:
                raise CorruptRecordError(f"{self.log_path}: bad batch at position {position}")
            if visit(position, header):
                return position
            position += header.size_bytes
        return position

    def translate_offset(
        self, offset: int, starting_position: int = 0
    ) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset >= `offset`, or None."""
        last_offsets = self._tail_last_offsets
        if last_offsets and offset > last_offsets[0]:
            # The batch before the one we want is remembered, so that one is too (or none is).
            slot = bisect_left(last_offsets, offset)
            if slot == len(last_offsets):
                return None
            position = self._tail_positions[slot]
            if position >= starting_position:
                header = self._tail_headers.get(position)
                if header is None:
                    header = self._header_at(position)
                    if header is not None:
                        if len(self._tail_headers) >= TAIL_HEADERS:
                            del self._tail_headers[next(iter(self._tail_headers))]  # oldest read
                        self._tail_headers[position] = header
                if header is not None:
                    return position, header
        _, position = self.offset_index.lookup(offset)
        position = max(position, starting_position)
        found: list[tuple[int, BatchHeader]] = []

        def visit(batch_position: int, header: BatchHeader) -> bool:
            if header.last_offset >= offset:
                found.append((batch_position, header))
                return True
            return False

        self._scan_headers(position, visit)
        return found[0] if found else None

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_position: int | None = None,
        min_one_batch: bool = True,
    ) -> SegmentReadResult | None:
        """Whole batches from the first one holding `start_offset`, within `max_bytes` and below
        `max_position`; the first batch is returned even when larger than `max_bytes` if
        `min_one_batch` (Kafka's rule, so a consumer always progresses). None when no batch at
        or after `start_offset` lies below `max_position`.

        The end is found without reading the data: the offset index gives the last batch start
        within reach, and only the headers after it are read; then one exact `pread`.
        """
        limit = self.size_bytes if max_position is None else min(max_position, self.size_bytes)
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        position, header = found
        if position + header.size_bytes > limit:
            return None
        end_cap = min(position + max_bytes, limit)
        if position + header.size_bytes > end_cap:
            if not min_one_batch:
                return SegmentReadResult(position, b"", header.base_offset)
            end_cap = position + header.size_bytes
        positions = self.offset_index.positions
        walk = position
        slot = bisect_right(positions, end_cap) - 1
        if slot >= 0 and positions[slot] > position:
            walk = positions[slot]  # a batch start: everything before it fits
        end = walk
        next_offset = header.base_offset if walk == position else None
        while walk < end_cap:
            batch = header if walk == position else self._header_at(walk)
            if batch is None:
                break
            if walk + batch.size_bytes > end_cap:
                next_offset = batch.base_offset
                break
            walk += batch.size_bytes
            end = walk
            next_offset = batch.next_offset
        if next_offset is None:  # the index entry sat exactly at end_cap
            following = self._header_at(end)
            next_offset = following.base_offset if following is not None else self.next_offset
        assert end > position
        return SegmentReadResult(
            position, os.pread(self._fd, end - position, position), next_offset
        )

    def read_all(self, position: int = 0) -> bytes:
        """The file's bytes from `position` (tests and tools; reads whole segments)."""
        return os.pread(self._fd, max(0, self.size_bytes - position), position)

    def iter_batch_headers(self, start_offset: int) -> list[tuple[int, BatchHeader]]:
        """(position, header) of every batch whose last offset >= `start_offset`."""
        found = self.translate_offset(start_offset)
        if found is None:
            return []
        result: list[tuple[int, BatchHeader]] = []

        def visit(position: int, header: BatchHeader) -> None:
            result.append((position, header))

        self._scan_headers(found[0], visit)
        return result

    def read_batch(self, position: int, header: BatchHeader) -> bytes:
        return os.pread(self._fd, header.size_bytes, position)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch at/after `starting_offset` whose max timestamp
        >= `timestamp`, or None. The caller finds the record inside the batch."""
        entry = self.time_index.lookup_before(timestamp)
        from_offset = max(entry[1] if entry is not None else self.base_offset, starting_offset)
        found = self.translate_offset(from_offset)
        if found is None:
            return None
        result: list[tuple[int, BatchHeader]] = []

        def visit(position: int, header: BatchHeader) -> bool:
            if header.max_timestamp >= timestamp and header.last_offset >= starting_offset:
                result.append((position, header))
                return True
            return False

        self._scan_headers(found[0], visit)
        return result[0] if result else None

    @property
    def largest_timestamp(self) -> int:
        """Max batch timestamp in the segment, else the file's mtime (Kafka's rule)."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return int(os.fstat(self._fd).st_mtime * 1000)

    def load_from_spans(self, spans: Sequence[BatchSpan]) -> None:
        """Build both indexes and the bookkeeping for a cleaned segment file from the batch
        spans the cleaner computed while writing it: no read of the file (the log cleaner's
        swap, done on the caller's thread, stays short). The segment is inactive afterwards."""
        self._forget_tail()
        self.offset_index.reset()
        self.time_index.reset()
        self.next_offset = self.base_offset
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = self.base_offset
        self.first_batch_timestamp = None
        self.bytes_since_last_index_entry = 0
        for position, base_offset, last_offset, max_timestamp, size_bytes in spans:
            assert base_offset >= self.next_offset and self.can_hold(last_offset)
            if self.first_batch_timestamp is None:
                self.first_batch_timestamp = max_timestamp
            self._index_batch(position, last_offset, max_timestamp, size_bytes)
            self.next_offset = last_offset + 1
        assert not spans or spans[-1][0] + spans[-1][4] == self.size_bytes
        self.on_become_inactive()

    # -- recovery and truncation --------------------------------------------------------------

    def recover(self, on_batch: Callable[[BatchHeader], None] | None = None) -> int:
        """Re-validate every batch, rebuild both indexes, cut the file at the first bad batch.

        Returns the number of bytes truncated. `on_batch` sees each valid header in order
        (producer state and leader-epoch cache rebuild from it). The transaction index is
        emptied: the log's producer-state replay appends its entries again.
        """
        self._forget_tail()
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self.next_offset = self.base_offset
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = self.base_offset
        self.first_batch_timestamp = None
        self.bytes_since_last_index_entry = 0
        position = 0
        file_size = self.size_bytes
        while position < file_size:
            header = self._header_at(position)
            if header is None or position + header.size_bytes > file_size:
                break
            try:
                validate_batch(self.read_batch(position, header))
            except CorruptRecordError:
                break
            if header.base_offset < self.next_offset or not self.can_hold(header.last_offset):
                break
            if self.first_batch_timestamp is None:
                self.first_batch_timestamp = header.max_timestamp
            self._index_batch(position, header.last_offset, header.max_timestamp, header.size_bytes)
            self.next_offset = header.next_offset
            if on_batch is not None:
                on_batch(header)
            position += header.size_bytes
        truncated = file_size - position
        if truncated:
            os.ftruncate(self._fd, position)
            self.size_bytes = position
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset >= `offset`; return the bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position, _ = found
        removed = self.size_bytes - position
        self._forget_tail()
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        os.ftruncate(self._fd, position)
        self.size_bytes = position
        self.next_offset = self.base_offset
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = self.base_offset
        last_time_entry = self.time_index.last_entry
        if last_time_entry is not None:
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = last_time_entry
        _, index_position = self.offset_index.last_entry
        self._scan_headers(index_position, self._track_tail)
        if position == 0:
            self.first_batch_timestamp = None
        self.bytes_since_last_index_entry = 0
        return removed

    # -- lifecycle ----------------------------------------------------------------------------

    def flush(self) -> None:
        try:
            os.fsync(self._fd)
            self.offset_index.flush()
            self.time_index.flush()
            self.txn_index.flush()
        except OSError as exc:
            note_io_error(self.dir_path, exc)
            raise KafkaStorageError(f"fsync of {self.log_path} failed: {exc}") from exc

    def on_become_inactive(self) -> None:
        """At roll: record the final max timestamp so a restart sees the segment's largest."""
        self.time_index.maybe_append(
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
        )

    def close(self) -> None:
        if not self.is_open:
            return
        self.on_become_inactive()
        self.offset_index.flush()  # cheap when unchanged; keeps the final time entry durable
        self.time_index.flush()
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        os.close(self._fd)
        self.is_open = False

    def close_handlers(self) -> None:
        """Close the file without writing anything: its directory failed (Kafka's
        closeHandlers). Pending index entries are dropped; the next start's recovery
        rebuilds what it needs."""
        if not self.is_open:
            return
        self.txn_index.close()
        os.close(self._fd)
        self.is_open = False

    def delete(self) -> None:
        """Rename the .log to .deleted first (the atomic point), then remove every file."""
        if self.is_open:
            self.offset_index.close()
            self.time_index.close()
            os.close(self._fd)
            self.is_open = False
        deleted_path = self.log_path + DELETED_FILE_SUFFIX
        try:
            os.replace(self.log_path, deleted_path)
        except FileNotFoundError as exc:
            raise KafkaStorageError(f"{self.log_path} vanished") from exc
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        os.remove(deleted_path)

    # -- transactions -------------------------------------------------------------------------

    def update_txn_index(self, entry: AbortedTxn) -> None:
        """Record an aborted transaction whose marker is in this segment, unless the index
        already has it (a producer-state replay over an intact segment)."""
        last = self.txn_index.last_offset
        if last is None or entry.last_offset > last:
            self.txn_index.append(entry)

    def __repr__(self) -> str:
        return (
            f"LogSegment(base_offset={self.base_offset}, size_bytes={self.size_bytes}, "
            f"next_offset={self.next_offset})"
        )
