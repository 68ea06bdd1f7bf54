"""TransactionIndex: a segment's `.txnindex`, the aborted transactions whose marker it holds.

Kafka's TransactionIndex. When an ABORT marker lands in a segment and completes a transaction
that held data, the log appends an entry to that segment's index; read_committed fetches then
collect the entries overlapping the fetched range (`collect_aborted_txns`) and send them as the
response's `aborted_transactions`, so consumers drop those producers' records. The file holds
fixed-size big-endian entries, Kafka's layout::

    offset  size  field
         0     2  version              int16, 0
         2     8  producer_id          int64
        10     8  first_offset         int64  the transaction's first offset
        18     8  last_offset          int64  the ABORT marker's offset
        26     8  last_stable_offset   int64  the partition's LSO when the marker was appended

Entries are in marker order, so `last_offset` strictly increases. The file is created with the
first entry (most segments have none). The entries are kept in memory too (a few per segment):
reads do no I/O. A partial entry at the end (a torn append) is ignored on open and overwritten
by the next append; an entry of an unknown version, or one whose last offset is below the
segment's base offset, makes `sanity_check` raise CorruptIndexError (the segment is recovered
and the index rebuilt by replaying its markers). Nothing is fsynced unless `flush` is called.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

import construct

from log.common.errors import KafkaStorageError
from log.storage.abstract_index import CorruptIndexError
from log.storage.clean_shutdown import note_io_error

TXN_INDEX_FILE_SUFFIX = ".txnindex"
ABORTED_TXN_VERSION = 0
# A segment holds at most 2**31 offsets; an index far beyond what its markers could fill is
# not ours.
MAX_TXN_INDEX_BYTES = 64 * 1024 * 1024

AbortedTxnStruct = construct.Struct(
    "version" / construct.Int16sb,
    "producer_id" / construct.Int64sb,
    "first_offset" / construct.Int64sb,
    "last_offset" / construct.Int64sb,
    "last_stable_offset" / construct.Int64sb,
)
ENTRY_BYTES = AbortedTxnStruct.sizeof()
_ENTRY = struct.Struct(">hqqqq")  # AbortedTxnStruct, compiled (tests check they agree)
assert ENTRY_BYTES == _ENTRY.size == 34


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = ABORTED_TXN_VERSION

    def encode(self) -> bytes:
        return _ENTRY.pack(
            self.version,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """Every whole entry of `data` (a partial last one is ignored)."""
    whole = len(data) - len(data) % ENTRY_BYTES
    return [
        AbortedTxn(producer_id, first, last, lso, version)
        for version, producer_id, first, last, lso in _ENTRY.iter_unpack(data[:whole])
    ]


class TransactionIndex:
    def __init__(self, path: str, start_offset: int) -> None:
        self.path = path
        self.start_offset = start_offset
        self._entries: list[AbortedTxn] = []
        try:
            size_bytes = os.path.getsize(path)
            if size_bytes > MAX_TXN_INDEX_BYTES:
                raise CorruptIndexError(f"{path}: {size_bytes} bytes is not a transaction index")
            with open(path, "rb") as f:
                self._entries = decode_entries(f.read())
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise KafkaStorageError(f"cannot read {path}: {exc}") from exc
        self._fd: int | None = None

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    @property
    def last_offset(self) -> int | None:
        return self._entries[-1].last_offset if self._entries else None

    def sanity_check(self) -> None:
        for entry in self._entries:
            if entry.version != ABORTED_TXN_VERSION:
                raise CorruptIndexError(f"{self.path}: entry version {entry.version}")
            if entry.last_offset < self.start_offset or entry.first_offset > entry.last_offset:
                raise CorruptIndexError(f"{self.path}: entry {entry} outside the segment")

    def append(self, entry: AbortedTxn) -> None:
        """Add an entry; its last offset must be above every entry's (markers in log order)."""
        last = self.last_offset
        if last is not None and entry.last_offset <= last:
            raise ValueError(
                f"{self.path}: aborted transaction ending at {entry.last_offset} is not after "
                f"the last one ({last})"
            )
        position = len(self._entries) * ENTRY_BYTES
        try:
            fd = self._open()
            os.pwrite(fd, entry.encode(), position)
            if os.fstat(fd).st_size > position + ENTRY_BYTES:  # a torn tail was overwritten
                os.ftruncate(fd, position + ENTRY_BYTES)
        except OSError as exc:
            note_io_error(os.path.dirname(self.path), exc)
            raise KafkaStorageError(f"cannot append to {self.path}: {exc}") from exc
        self._entries.append(entry)

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound_offset), and whether the search is
        complete: an entry whose LSO reaches the upper bound means no later segment can hold
        a transaction that started below it (Kafka's collectAbortedTxns)."""
        found = []
        for entry in self._entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset`."""
        keep = len(self._entries)
        while keep and self._entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep != len(self._entries) or self._file_bytes() > keep * ENTRY_BYTES:
            self._truncate_file(keep)

    def reset(self) -> None:
        """Forget every entry (the segment is being recovered: replay adds them back)."""
        self._truncate_file(0)

    def _file_bytes(self) -> int:
        try:
            return os.path.getsize(self.path)
        except FileNotFoundError:
            return 0

    def _truncate_file(self, count: int) -> None:
        del self._entries[count:]
        if not os.path.exists(self.path):
            return
        try:
            os.truncate(self.path, count * ENTRY_BYTES)
        except OSError as exc:
            note_io_error(os.path.dirname(self.path), exc)
            raise KafkaStorageError(f"cannot truncate {self.path}: {exc}") from exc

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self.close()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass
