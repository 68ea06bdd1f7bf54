"""The clean-shutdown marker: `.kafka_cleanshutdown` in a log directory.

LogManager writes the marker after every log in the directory was flushed and closed, and
deletes it once the directory is loaded again. Its presence at startup means every segment is
whole, so recovery (re-scanning segments after the recovery point) can be skipped; its absence
means the previous process died and logs must be recovered from their recovery points.
"""

from __future__ import annotations

from pathlib import Path

from log.protocol.errors import KafkaStorageError
from log.storage.checkpoint_file import atomic_write_bytes, fsync_directory

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


def write_clean_shutdown_marker(log_dir: Path) -> None:
    atomic_write_bytes(Path(log_dir) / CLEAN_SHUTDOWN_FILE, b"")


def has_clean_shutdown_marker(log_dir: Path) -> bool:
    return (Path(log_dir) / CLEAN_SHUTDOWN_FILE).is_file()


def remove_clean_shutdown_marker(log_dir: Path) -> None:
    """Delete the marker (durably); a missing marker is fine."""
    try:
        (Path(log_dir) / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
    except OSError as exc:
        raise KafkaStorageError(f"cannot remove clean-shutdown marker in {log_dir}: {exc}") from exc
    fsync_directory(Path(log_dir))
