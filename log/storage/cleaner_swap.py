"""Crash-safe replacement of segments by a cleaned one (Kafka's `.cleaned` / `.swap` files).

The log cleaner replaces a group of consecutive segments `[A, B, C)` by one cleaned segment
named after the first, `A`. The steps and what a crash after each leaves::

    1. write <A>.log.cleaned, fsync          crash: .cleaned is discarded at load, old kept
    2. rename .cleaned -> <A>.log.swap,      COMMIT POINT. crash: load finishes the swap
       fsync the directory
    3. delete A, B, C (.log -> .deleted,     crash: load deletes every segment whose base offset
       then the files)                         lies in [A, the swap's next offset), then step 4
    4. rename <A>.log.swap -> <A>.log,       done; its indexes are rebuilt (load) or built
       fsync the directory                     from the cleaned batch spans (live log)

A crash therefore leaves either the old segments or the cleaned one, never neither and never
both for an offset: the swap's offsets are a subset of the replaced segments' offsets. Only
segments in `[A, swap next offset)` are deleted at load: a replaced segment past the swap's
last batch that survived a crash between 2 and 3 keeps its (uncleaned, still correct) records.
"""

from __future__ import annotations

import os
from pathlib import Path

from log.common.errors import CorruptRecordError
from log.common.files import fsync_directory
from log.records.batch_header import read_header

CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
_LOG = ".log"
_SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")  # rebuilt: recovery, replay
_HEADER_READ_BYTES = 61


def segment_file_name(base_offset: int, suffix: str = _LOG) -> str:
    return f"{base_offset:020d}{suffix}"


def write_cleaned_file(dir_path: str, base_offset: int, data: bytes) -> str:
    """Step 1: `<base>.log.cleaned` holding `data`, fsynced. Returns its path."""
    path = os.path.join(dir_path, segment_file_name(base_offset) + CLEANED_FILE_SUFFIX)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return path


def commit_cleaned_file(cleaned_path: str, *, fsync: bool = True) -> str:
    """Step 2, the commit point: rename `.cleaned` to `.swap`. Returns the swap path.
    `fsync=False` leaves the directory fsync to the caller (one for several renames)."""
    assert cleaned_path.endswith(_LOG + CLEANED_FILE_SUFFIX)
    swap_path = cleaned_path[: -len(CLEANED_FILE_SUFFIX)] + SWAP_FILE_SUFFIX
    os.replace(cleaned_path, swap_path)
    if fsync:
        fsync_directory(Path(swap_path).parent)
    return swap_path


def finish_swap(swap_path: str, *, fsync: bool = True) -> str:
    """Step 4: rename `<base>.log.swap` to `<base>.log` (the old segments are gone). Without
    the directory fsync a crash may undo the rename: load then redoes steps 3-4."""
    assert swap_path.endswith(_LOG + SWAP_FILE_SUFFIX)
    log_path = swap_path[: -len(SWAP_FILE_SUFFIX)]
    os.replace(swap_path, log_path)
    if fsync:
        fsync_directory(Path(log_path).parent)
    return log_path


def discard_cleaned_file(cleaned_path: str) -> None:
    """An aborted clean: its `.cleaned` file goes (before the commit point only)."""
    try:
        os.remove(cleaned_path)
    except FileNotFoundError:
        pass


def _next_offset(path: str) -> int | None:
    """The offset after the last whole batch of the file at `path` (None when it has none).
    Only headers are read; a swap file was fsynced whole before its rename."""
    next_offset = None
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        position = 0
        while position + _HEADER_READ_BYTES <= size:
            try:
                header = read_header(os.pread(f.fileno(), _HEADER_READ_BYTES, position))
            except CorruptRecordError:
                break
            if position + header.size_bytes > size:
                break
            next_offset = header.next_offset
            position += header.size_bytes
    return next_offset


def recover_swap_files(dir_path: str) -> None:
    """At load, before segments are opened: drop `.cleaned` files, finish committed swaps."""
    names = sorted(os.listdir(dir_path))
    for name in names:
        if name.endswith(CLEANED_FILE_SUFFIX):
            os.remove(os.path.join(dir_path, name))
    for name in names:
        if not name.endswith(SWAP_FILE_SUFFIX):
            continue
        swap_path = os.path.join(dir_path, name)
        stem = name[: -len(_LOG + SWAP_FILE_SUFFIX)]
        if not name.endswith(_LOG + SWAP_FILE_SUFFIX) or not (len(stem) == 20 and stem.isdigit()):
            os.remove(swap_path)  # an index swap or a stray: indexes are rebuilt from the log
            continue
        base_offset = int(stem)
        next_offset = _next_offset(swap_path)
        if next_offset is None:  # we never commit an empty swap: a stray, keep the originals
            os.remove(swap_path)
            continue
        for other in os.listdir(dir_path):
            other_stem, dot, suffix = other.partition(".")
            if dot and "." + suffix in _SEGMENT_SUFFIXES and other_stem.isdigit():
                if base_offset <= int(other_stem) < next_offset:
                    os.remove(os.path.join(dir_path, other))
        finish_swap(swap_path)
