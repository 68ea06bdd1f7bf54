"""The clean-shutdown marker: `.kafka_cleanshutdown` in a log directory.

LogManager writes the marker after every log in the directory was flushed and closed, and
deletes it once the directory is loaded again. Its presence at startup means every segment is
whole, so recovery (re-scanning segments after the recovery point) can be skipped; its absence
means the previous process died and logs must be recovered from their recovery points.

The marker holds the broker epoch the process had when it stopped (`{"version":0,
"broker_epoch":N}`, as Kafka's does since KIP-966): the next process registers with it as its
previous broker epoch, which tells the controller that registration ended cleanly. An empty or
unreadable marker (older versions wrote it empty) still means a clean shutdown, epoch unknown.

A directory where a write or an fsync failed this process (`note_io_error`: an append cut off
after ENOSPC or EIO, a failed fsync) is never marked clean: whatever that failure left is then
re-read and checked by the next start's recovery instead of being trusted.
"""

from __future__ import annotations

import json
from pathlib import Path

from log.common.errors import KafkaStorageError
from log.common.files import fsync_directory
from log.storage.checkpoint_file import atomic_write_bytes

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
UNKNOWN_BROKER_EPOCH = -1
MAX_MARKER_BYTES = 4096


_IO_ERRORS: dict[str, str] = {}  # log directory (resolved) -> the first I/O error seen there


def note_io_error(partition_dir: str | Path, error: BaseException) -> None:
    """A write or fsync under this partition directory failed (any thread)."""
    log_dir = str(Path(partition_dir).resolve().parent)
    _IO_ERRORS.setdefault(log_dir, f"{type(error).__name__}: {error}")


def io_error_in(log_dir: Path) -> str | None:
    """The first I/O error noted under `log_dir` by this process, if any."""
    return _IO_ERRORS.get(str(Path(log_dir).resolve()))


def forget_io_errors(log_dir: Path) -> None:
    """The directory was just loaded (and recovered where needed): start afresh."""
    _IO_ERRORS.pop(str(Path(log_dir).resolve()), None)


def write_clean_shutdown_marker(log_dir: Path, broker_epoch: int = UNKNOWN_BROKER_EPOCH) -> None:
    content = json.dumps({"version": 0, "broker_epoch": broker_epoch}).encode()
    atomic_write_bytes(Path(log_dir) / CLEAN_SHUTDOWN_FILE, content)


def read_clean_shutdown_broker_epoch(log_dir: Path) -> int:
    """The broker epoch in the marker; UNKNOWN_BROKER_EPOCH when absent, empty or unreadable."""
    try:
        with open(Path(log_dir) / CLEAN_SHUTDOWN_FILE, "rb") as marker:
            value = json.loads(marker.read(MAX_MARKER_BYTES) or b"{}").get("broker_epoch")
    except (OSError, ValueError, AttributeError):
        return UNKNOWN_BROKER_EPOCH
    return value if isinstance(value, int) and value >= 0 else UNKNOWN_BROKER_EPOCH


def has_clean_shutdown_marker(log_dir: Path) -> bool:
    return (Path(log_dir) / CLEAN_SHUTDOWN_FILE).is_file()


def remove_clean_shutdown_marker(log_dir: Path) -> None:
    """Delete the marker (durably); a missing marker is fine."""
    try:
        (Path(log_dir) / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
    except OSError as exc:
        raise KafkaStorageError(f"cannot remove clean-shutdown marker in {log_dir}: {exc}") from exc
    fsync_directory(Path(log_dir))
