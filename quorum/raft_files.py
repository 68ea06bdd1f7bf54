"""Durable file primitives for the metadata quorum's Raft storage.

Everything the Raft layer persists goes through the two helpers here, so the ordering rules live
in one place:

* `write_file_durably(path, data)`: write `path.tmp`, fsync it, rename over `path`, fsync the
  directory. A reader sees the old file or the new one, never a mix, and once this returns the new
  one survives power loss.
* `AppendOnlyFile`: an append/truncate file whose writes become durable only at `sync()` (one
  `fdatasync` for everything appended since the last sync: group commit).

Test mode (`QUORUM_RAFT_LOSE_UNSYNCED=1` in the environment): unsynced bytes are kept in process
memory and reach the file only at `sync()` . A
process killed with SIGKILL then loses exactly what a power failure would lose on a real disk, so
crash tests can prove that nothing is acknowledged before it is synced. `QUORUM_RAFT_CRASH_AT=<point>`
makes `crash_point(point)` call `os._exit(CRASH_EXIT_CODE)` there (test-only fault injection).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from log.common.errors import KafkaStorageError
from log.common.files import fsync_directory

LOSE_UNSYNCED_ENV = "QUORUM_RAFT_LOSE_UNSYNCED"
CRASH_AT_ENV = "QUORUM_RAFT_CRASH_AT"
CRASH_DELAY_ENV = "QUORUM_RAFT_CRASH_DELAY_MS"
CRASH_EXIT_CODE = 77  # distinctive, so a test can tell an injected crash from a real failure


class RaftIOError(KafkaStorageError):
    """A Raft file could not be written or synced (ENOSPC, EIO, EROFS...). Fatal for the Raft
    node: it must not vote or lead on state it cannot persist, and an fsync that failed is
    never retried into apparent success (the kernel may have dropped the dirty pages)."""


P = ParamSpec("P")
R = TypeVar("R")


def _io(operation: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(operation)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return operation(*args, **kwargs)
        except OSError as exc:
            raise RaftIOError(f"{operation.__name__}: {exc}") from exc

    return wrapper


def lose_unsynced_writes() -> bool:
    return os.environ.get(LOSE_UNSYNCED_ENV) == "1"


def crash_point(point: str) -> None:
    """Test-only fault injection: die without any cleanup if told to crash at `point`.
    `QUORUM_RAFT_CRASH_DELAY_MS` holds this thread there first, so that other threads can
    deliver the acknowledgements they already have (a real crash window is a tick or more)."""
    if os.environ.get(CRASH_AT_ENV) == point:
        time.sleep(int(os.environ.get(CRASH_DELAY_ENV, "0")) / 1000)
        os._exit(CRASH_EXIT_CODE)


def fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@_io
def write_file_durably(path: str, data: bytes) -> None:
    """Atomically and durably replace `path` with `data` (tmp + fsync + rename + dir fsync)."""
    tmp_path = path + ".tmp"
    write_and_fsync(tmp_path, data)
    os.replace(tmp_path, path)
    fsync_directory(os.path.dirname(os.path.abspath(path)))


def write_and_fsync(path: str, data: bytes) -> None:
    """Write `path` and fsync it (its rename, if any, is the caller's business)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class AppendOnlyFile:
    """A file written only at its end (or cut back); `sync()` makes everything so far durable."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._size_bytes = os.fstat(self._fd).st_size  # logical size, pending bytes included
        self._synced_size_bytes = self._size_bytes
        self._pending: list[bytes] = []  # test mode only: bytes not yet handed to the OS
        self._dirty = False
        self._sync_failed: OSError | None = None
        self._lose_unsynced = lose_unsynced_writes()
        fsync_directory(os.path.dirname(os.path.abspath(path)))  # the file's own creation

    @property
    def size_bytes(self) -> int:
        return self._size_bytes

    @property
    def dirty(self) -> bool:
        return self._dirty

    def read_all(self) -> bytes:
        assert not self._pending
        return os.pread(self._fd, self._size_bytes, 0)

    def read_from(self, position: int) -> bytes:
        """Every byte from `position` to the end (synced: nothing pending)."""
        assert not self._pending and 0 <= position <= self._size_bytes
        return os.pread(self._fd, self._size_bytes - position, position)

    @_io
    def append(self, data: bytes) -> None:
        if self._lose_unsynced:
            self._pending.append(data)
        else:
            os.lseek(self._fd, self._size_bytes, os.SEEK_SET)
            _write_all(self._fd, data)
        self._size_bytes += len(data)
        self._dirty = True

    @_io
    def truncate(self, size_bytes: int) -> None:
        assert 0 <= size_bytes <= self._size_bytes
        if self._lose_unsynced:
            self._flush_pending()
        os.ftruncate(self._fd, size_bytes)
        self._size_bytes = size_bytes
        self._dirty = True

    @_io
    def sync(self) -> None:
        if self._sync_failed is not None:
            raise OSError(f"an earlier fdatasync of {self.path} failed: {self._sync_failed}")
        if not self._dirty:
            return
        if self._lose_unsynced:
            self._flush_pending()
        try:
            os.fdatasync(self._fd)
        except OSError as exc:
            self._sync_failed = exc  # never retried into apparent success
            raise
        self._synced_size_bytes = self._size_bytes
        self._dirty = False

    def _flush_pending(self) -> None:
        if self._pending:
            os.lseek(self._fd, 0, os.SEEK_END)
            _write_all(self._fd, b"".join(self._pending))
            self._pending.clear()

    def close(self) -> None:
        if self._fd >= 0:
            self.sync()
            os.close(self._fd)
            self._fd = -1
