"""The file under an index: fixed-size entries, appended, truncated, fsynced on demand.

Kafka preallocates index files to `segment.index.bytes` and mmaps them, trimming them to their
entries on close; a crash leaves zero-filled tails that recovery must tell apart. We keep index
files exactly sized instead (plain buffered appends, `truncate` on truncation), so the file
length always says how many entries were written, and the in-memory arrays are the lookup
structure. A torn last entry (length not a multiple of the entry size), a missing file, or entries
that fail the owner's sanity check make the owning segment rebuild the index from its log.
"""

from __future__ import annotations

import os
from typing import BinaryIO


class IndexFile:
    """An exact-sized file of `entry_bytes` entries (I/O only; the owner keeps the arrays)."""

    def __init__(self, path: str, entry_bytes: int) -> None:
        self.path = path
        self.entry_bytes = entry_bytes
        self._fh: BinaryIO | None = None
        self._dirty = False  # written since the last fsync

    def read_all(self) -> bytes | None:
        """The file's bytes, or None when it does not exist."""
        try:
            with open(self.path, "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def _handle(self) -> BinaryIO:
        if self._fh is None:
            self._fh = open(self.path, "ab")  # noqa: SIM115 - kept open for appends
        return self._fh

    def append(self, entry: bytes) -> None:
        assert len(entry) == self.entry_bytes
        self._handle().write(entry)
        self._dirty = True

    def reset(self, data: bytes = b"") -> None:
        """Replace the whole file (used when the index is rebuilt from the log)."""
        assert len(data) % self.entry_bytes == 0
        self.close()
        with open(self.path, "wb") as fh:
            fh.write(data)
        self._dirty = True

    def truncate_entries(self, entry_count: int) -> None:
        fh = self._handle()
        fh.flush()
        os.truncate(self.path, entry_count * self.entry_bytes)
        self._dirty = True

    def flush(self) -> None:
        """fsync, only if anything changed since the last one."""
        if not self._dirty:
            return
        fh = self._handle()
        fh.flush()
        os.fsync(fh.fileno())
        self._dirty = False

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def rename(self, new_path: str) -> None:
        self.close()
        if os.path.exists(self.path):
            os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self.close()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass
