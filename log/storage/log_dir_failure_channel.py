"""LogDirFailureChannel: a log directory whose disk failed goes offline (Kafka's
LogDirFailureChannel).

Kafka's rule, kept: an I/O error on a log directory (EIO, ENOSPC, EROFS, EDQUOT, a vanished
file...) takes the whole directory offline, not only the write that saw it, and nothing there
is ever retried into apparent success. Its partitions stop being served (KAFKA_STORAGE_ERROR),
nothing there is flushed, checkpointed or marked clean again, and the broker stops once no log
directory is online (Kafka halts the process; a quorumlog node has one log directory, so a
failed directory stops the node). Its leaderships then move to the other replicas as for any
broker that stops: the controller fences it as soon as its connections reset, and a restart
recovers the directory from its recovery points.

Not a directory failure: running out of descriptors or memory (EMFILE, ENFILE, ENOMEM, EAGAIN)
is the process's trouble, not the disk's. That operation fails and is tried again later.

Thread-safe: the cleaner and recovery threads report here too. `on_offline` (set by the
broker's driver) is called in the reporting thread, once per directory.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable
from pathlib import Path

from log.common.errors import KafkaStorageError

# Errors of the process, not of the disk: retried, never a directory failure.
TRANSIENT_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN})


def cause_errno(exc: BaseException) -> int | None:
    """The errno of `exc` or of the OSError it wraps (its __cause__ chain)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno is not None:
            return cause.errno
        cause = cause.__cause__
    return None


def is_log_dir_failure(exc: BaseException) -> bool:
    """Whether `exc` (an OSError, or a KafkaStorageError raised from one) means the disk
    failed: any OSError but the process's own limits."""
    code = cause_errno(exc)
    return code is not None and code not in TRANSIENT_ERRNOS


class LogDirFailedError(KafkaStorageError):
    """No log directory of this broker is online: it stops (Kafka halts)."""


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: dict[str, str] = {}  # log directory (resolved) -> why it went offline
        self.on_offline: Callable[[str, str], None] = lambda log_dir, reason: None

    def maybe_add_offline_log_dir(self, log_dir: str | Path, reason: str) -> bool:
        """Take `log_dir` offline for `reason`; True the first time (then `on_offline` ran)."""
        key = str(Path(log_dir).resolve())
        with self._lock:
            if key in self._offline:
                return False
            self._offline[key] = reason
        self.on_offline(key, reason)
        return True

    def report(self, log_dir: str | Path, exc: BaseException) -> bool:
        """An operation under `log_dir` raised `exc`: take the directory offline when that is a
        directory failure (`is_log_dir_failure`). True when the directory is offline."""
        if self.is_offline(log_dir):
            return True
        if not is_log_dir_failure(exc):
            return False
        self.maybe_add_offline_log_dir(log_dir, f"{type(exc).__name__}: {exc}")
        return True

    def is_offline(self, log_dir: str | Path) -> bool:
        if not self._offline:  # the common case, on hot paths: no lock, no path resolution
            return False
        with self._lock:
            return str(Path(log_dir).resolve()) in self._offline

    def offline_reason(self, log_dir: str | Path) -> str | None:
        with self._lock:
            return self._offline.get(str(Path(log_dir).resolve()))
