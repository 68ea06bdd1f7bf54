"""DirectoryLock: one process per data directory, as Kafka's `.lock` file in each log dir.

Two nodes started on the same directory would both append to the same segments and both
rewrite the same checkpoints: silent corruption. So before a node touches anything in its log
or metadata directory it takes an exclusive `flock` on `DIR/.lock` (created if missing, never
deleted: the lock is the kernel's, held by the open descriptor, so it ends with the process
however the process ends, and a stale file from a crashed node locks nothing). A second
process gets DirectoryLockedError at once instead of waiting.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE = ".lock"


class DirectoryLockedError(Exception):
    """Another process holds the directory's lock."""


class DirectoryLock:
    """`with DirectoryLock(path):` or `lock = DirectoryLock(path); lock.acquire()`; the
    lock lasts until `release()` or the process ends."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._fd: int | None = None

    def acquire(self) -> DirectoryLock:
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DirectoryLockedError(
                f"{self.directory} is in use by another process (its {LOCK_FILE} is locked): "
                "is a node already running on it?"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def __enter__(self) -> DirectoryLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
