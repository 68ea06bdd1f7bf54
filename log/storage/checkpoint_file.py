"""Kafka's text checkpoint files, written atomically.

Kafka keeps small per-log-directory and per-partition state in text files that are rewritten
whole, never edited in place::

    line 1   version        always 0
    line 2   entry count    N
    line 3.. N entries      fields separated by one space

    recovery-point-offset-checkpoint   `topic partition offset`   (LogManager: recovery points)
    replication-offset-checkpoint      `topic partition offset`   (ReplicaManager: high watermarks)
    log-start-offset-checkpoint        `topic partition offset`   (LogManager: log start offsets)
    leader-epoch-checkpoint            `leader_epoch start_offset` (per partition directory)

A rewrite goes to `<name>.tmp`, is flushed and fsynced, renamed over `<name>` with `os.replace`
(atomic on POSIX), and then the directory is fsynced so the rename itself is durable. A crash
therefore leaves either the old or the new file, never a torn one; a stale `.tmp` is harmless
and overwritten by the next write.

Writing can be split in two: `prepare(entries)` formats the content now (where the entries
are, on the broker's trio thread) and returns the write, which may then run in a worker thread
so the fsyncs never stall the event loop (Kafka writes its checkpoints from scheduler threads).
Writes of one path are serialized in the process (whichever CheckpointFile object writes it: an
in-process restart may write the file while the previous instance's last write is still
running), and a prepared write never replaces content its object prepared after it: one that
comes too late is skipped.

A write may also leave durability for later (`durable=False`): the file is replaced atomically
(a crash of the process leaves the old or the new content) but not fsynced until `sync()`.
The leader-epoch checkpoint uses that (leader_epoch_cache.py says why it is safe).

Reading is strict: a wrong version, a count that disagrees with the lines present, or a line
that does not parse raises `KafkaStorageError` naming the file and the line, because silently
dropping recovery points or high watermarks would lose data on the next restart.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Generic, TypeVar

from log.common.errors import KafkaStorageError
from log.common.files import fsync_directory

CHECKPOINT_VERSION = 0
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
# A broker has at most a few hundred thousand partitions per directory; a checkpoint larger
# than this is not one of ours and is refused rather than read into memory.
MAX_CHECKPOINT_BYTES = 256 * 1024 * 1024
MAX_CHECKPOINT_ENTRIES = 10_000_000

T = TypeVar("T")


class _PathLock:
    """The lock of one checkpoint path, shared by every CheckpointFile of that path."""

    def __init__(self) -> None:
        self.lock = threading.Lock()


_path_locks: weakref.WeakValueDictionary[str, _PathLock] = weakref.WeakValueDictionary()
_path_locks_guard = threading.Lock()


def _lock_of(path: Path) -> _PathLock:
    with _path_locks_guard:
        key = os.path.abspath(path)
        found = _path_locks.get(key)
        if found is None:
            found = _path_locks[key] = _PathLock()
        return found


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace `path` with `data` so that a crash leaves the old or the new content, never both.

    Writes `<path>.tmp`, flushes and fsyncs it, renames it over `path`, then fsyncs the directory
    (without the two fsyncs when not `durable`: see `sync_file`). Raises KafkaStorageError if the
    disk refuses.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
        if durable:
            fsync_directory(path.parent)
    except OSError as exc:
        raise KafkaStorageError(f"cannot write {path}: {exc}") from exc


def sync_file(path: Path) -> None:
    """fsync `path` and its directory: what a write without `durable` left out."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_directory(path.parent)
    except OSError as exc:
        raise KafkaStorageError(f"cannot sync {path}: {exc}") from exc


class CheckpointFile(Generic[T]):
    """A versioned, counted list of entries; `format_entry`/`parse_entry` give the line shape.

    `parse_entry` receives the line split on whitespace and raises ValueError when malformed.
    """

    def __init__(
        self,
        path: Path,
        format_entry: Callable[[T], str],
        parse_entry: Callable[[list[str]], T],
    ) -> None:
        self.path = Path(path)
        self._format_entry = format_entry
        self._parse_entry = parse_entry
        self._path_lock = _lock_of(self.path)  # one write of the path at a time
        self._prepared = 0  # writes prepared so far: each write's sequence number
        self._written = 0  # the sequence number of the content on disk
        self._synced = 0  # the sequence number of the content last made durable

    def write_entries(self, entries: Iterable[T], *, durable: bool = True) -> None:
        self.prepare_entries(entries, durable=durable)()

    def prepare_entries(self, entries: Iterable[T], *, durable: bool = True) -> Callable[[], None]:
        """Format `entries` now; the returned call writes them (in any thread), unless content
        prepared later was written first. Not `durable`: fsynced only by a later `sync()`."""
        lines = [self._format_entry(entry) for entry in entries]
        data = (
            f"{CHECKPOINT_VERSION}\n{len(lines)}\n" + "".join(f"{line}\n" for line in lines)
        ).encode()
        self._prepared += 1
        sequence = self._prepared

        def write() -> None:
            with self._path_lock.lock:
                if sequence > self._written:
                    atomic_write_bytes(self.path, data, durable=durable)
                    self._written = sequence
                    if durable:
                        self._synced = sequence

        return write

    def sync(self) -> None:
        """Make the content written without `durable` durable (nothing to do if it is)."""
        with self._path_lock.lock:
            if self._written > self._synced:
                sync_file(self.path)
                self._synced = self._written

    def read_entries(self) -> list[T]:
        """All entries in file order; a missing file reads as no entries."""
        try:
            size_bytes = self.path.stat().st_size
            if size_bytes > MAX_CHECKPOINT_BYTES:
                raise self._error(0, f"file is {size_bytes} bytes, limit {MAX_CHECKPOINT_BYTES}")
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise KafkaStorageError(f"cannot read checkpoint file {self.path}: {exc}") from exc
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self._error(0, f"not UTF-8 text ({exc})") from None
        lines = text.splitlines()
        version = self._parse_int(lines, 1, "version")
        if version != CHECKPOINT_VERSION:
            raise self._error(1, f"unrecognised version {version}, expected {CHECKPOINT_VERSION}")
        expected_count = self._parse_int(lines, 2, "entry count")
        if not 0 <= expected_count <= MAX_CHECKPOINT_ENTRIES:
            raise self._error(2, f"entry count {expected_count} out of range")
        body = lines[2:]
        if len(body) != expected_count:
            raise self._error(
                2, f"expected {expected_count} entries but found {len(body)} entry lines"
            )
        entries = []
        for line_number, line in enumerate(body, start=3):
            try:
                entries.append(self._parse_entry(line.split()))
            except ValueError as exc:
                raise self._error(line_number, f"malformed entry {line!r}: {exc}") from None
        return entries

    def _parse_int(self, lines: list[str], line_number: int, what: str) -> int:
        if len(lines) < line_number:
            raise self._error(line_number, f"missing {what}")
        try:
            return int(lines[line_number - 1].strip())
        except ValueError:
            raise self._error(
                line_number, f"{what} {lines[line_number - 1]!r} is not an integer"
            ) from None

    def _error(self, line_number: int, message: str) -> KafkaStorageError:
        where = f"{self.path}:{line_number}" if line_number else str(self.path)
        return KafkaStorageError(f"malformed checkpoint file {where}: {message}")


def _format_offset_entry(entry: tuple[tuple[str, int], int]) -> str:
    (topic, partition), offset = entry
    assert topic and not any(c.isspace() for c in topic), f"bad topic name {topic!r}"
    return f"{topic} {partition} {offset}"


def _parse_offset_entry(fields: list[str]) -> tuple[tuple[str, int], int]:
    if len(fields) != 3:
        raise ValueError(f"expected 3 fields (topic partition offset), got {len(fields)}")
    topic, partition, offset = fields[0], int(fields[1]), int(fields[2])
    if partition < 0:
        raise ValueError(f"negative partition {partition}")
    return (topic, partition), offset


class OffsetCheckpointFile:
    """`topic partition offset` checkpoints: recovery points, high watermarks, log start offsets."""

    def __init__(self, path: Path) -> None:
        self._file: CheckpointFile[tuple[tuple[str, int], int]] = CheckpointFile(
            path, _format_offset_entry, _parse_offset_entry
        )

    @property
    def path(self) -> Path:
        return self._file.path

    def write(self, entries: Mapping[tuple[str, int], int]) -> None:
        self._file.write_entries(sorted(entries.items()))

    def prepare(self, entries: Mapping[tuple[str, int], int]) -> Callable[[], None]:
        """`entries` formatted now; the returned call writes them (`prepare_entries`)."""
        return self._file.prepare_entries(sorted(entries.items()))

    def read(self) -> dict[tuple[str, int], int]:
        result: dict[tuple[str, int], int] = {}
        for topic_partition, offset in self._file.read_entries():
            if topic_partition in result:
                raise KafkaStorageError(
                    f"malformed checkpoint file {self.path}: duplicate entry for "
                    f"{topic_partition[0]}-{topic_partition[1]}"
                )
            result[topic_partition] = offset
        return result
