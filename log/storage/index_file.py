"""The file under an index: fixed-size entries, appended, truncated, fsynced on demand.

Kafka preallocates index files to `segment.index.bytes` and mmaps them, trimming them to their
entries on close; a crash leaves zero-filled tails that recovery must tell apart. We keep index
files exactly sized instead (plain buffered appends, `truncate` on truncation), so the file
length always says how many entries were written, and the in-memory arrays are the lookup
structure. No descriptor stays open: appended entries wait in memory (at most
MAX_PENDING_ENTRIES) and go to the file in one open-append-close, at the latest when the index
is flushed or closed -- so a broker holds one descriptor per segment (its `.log`), as Kafka
does with its mmapped indexes, and 10,000 partitions fit a 20,000-descriptor limit. Entries
still in memory at a crash index data past the recovery point (a flush writes them first),
whose segments recovery rebuilds; an index short of its tail is sparse, never wrong. A torn
last entry (length not a multiple of the entry size), a missing file, or entries that fail the
owner's sanity check make the owning segment rebuild the index from its log.
"""

from __future__ import annotations

import os

# Entries kept in memory before they are written out (a few KB per index at most).
MAX_PENDING_ENTRIES = 256


class IndexFile:
    """An exact-sized file of `entry_bytes` entries (I/O only; the owner keeps the arrays)."""

    def __init__(self, path: str, entry_bytes: int) -> None:
        self.path = path
        self.entry_bytes = entry_bytes
        self._pending: list[bytes] = []  # appended, not yet written to the file
        self._dirty = False  # written since the last fsync

    def read_all(self) -> bytes | None:
        """The file's bytes, or None when it does not exist."""
        try:
            with open(self.path, "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def _write_pending(self) -> None:
        if self._pending:
            with open(self.path, "ab") as fh:
                fh.write(b"".join(self._pending))
            self._pending.clear()

    def append(self, entry: bytes) -> None:
        assert len(entry) == self.entry_bytes
        self._pending.append(entry)
        self._dirty = True
        if len(self._pending) >= MAX_PENDING_ENTRIES:
            self._write_pending()

    def reset(self, data: bytes = b"") -> None:
        """Replace the whole file (used when the index is rebuilt from the log)."""
        assert len(data) % self.entry_bytes == 0
        self._pending.clear()
        with open(self.path, "wb") as fh:
            fh.write(data)
        self._dirty = True

    def truncate_entries(self, entry_count: int) -> None:
        self._write_pending()
        os.truncate(self.path, entry_count * self.entry_bytes)
        self._dirty = True

    def flush(self) -> None:
        """Write what is pending and fsync, only if anything changed since the last one."""
        if not self._dirty:
            return
        self._write_pending()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._dirty = False

    def close(self) -> None:
        self._write_pending()

    def rename(self, new_path: str) -> None:
        self._write_pending()
        if os.path.exists(self.path):
            os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self._pending.clear()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass
