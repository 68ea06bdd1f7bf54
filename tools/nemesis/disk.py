"""Disks that fill up, on one machine: a size-limited tmpfs under a directory (root only).

    reason = available(probe_dir)        # None, or why not (one line)
    mount_tmpfs(path, "256m")            # `path` is now a tmpfs of that size
    filler = fill_up(path)               # writes until ENOSPC: the disk is full
    filler.unlink()                      # room again
    unmount_keeping(path)                # its files copied onto the directory beneath

A tmpfs takes memory only for what is written to it, so a filled one costs its size until the
filler goes. `unmount_keeping` keeps what was there (a run's data is kept for inspection).
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

FILL_CHUNK_BYTES = 1 << 20


def mount_tmpfs(path: Path, size: str) -> None:
    """Mount a tmpfs of `size` (mount's size=, e.g. "256m") at `path`; OSError if refused."""
    path.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                            capture_output=True, text=True)  # fmt: skip
    if result.returncode != 0:
        raise OSError(f"cannot mount a tmpfs at {path}: {result.stderr.strip()[:200]}")


def unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def unmount_keeping(path: Path) -> None:
    """Unmount the tmpfs at `path`, its files copied onto the directory beneath first."""
    with tempfile.TemporaryDirectory(dir=path.parent) as keep:
        kept = Path(keep) / "kept"
        shutil.copytree(path, kept, symlinks=True)
        unmount(path)
        for entry in kept.iterdir():
            shutil.move(str(entry), path / entry.name)


def available(probe_dir: Path) -> str | None:
    """None when a tmpfs can be mounted under `probe_dir`; else why not (one line)."""
    if os.geteuid() != 0:
        return "a disk that fills up needs root (mount -t tmpfs)"
    if shutil.which("mount") is None:
        return "a disk that fills up needs mount(8)"
    probe_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=probe_dir) as probe:
        try:
            mount_tmpfs(Path(probe), "1m")
        except OSError as exc:
            return str(exc)
        unmount(Path(probe))
    return None


def fill_up(directory: Path) -> Path:
    """Write a filler file in `directory` until its file system is full (ENOSPC), down to its
    last free block; the filler's path."""
    path = directory / "filler"
    chunk = b"\0" * FILL_CHUNK_BYTES
    with open(path, "wb", buffering=0) as f:
        for size in (FILL_CHUNK_BYTES, 65536, 4096, 512, 1):
            try:
                while True:
                    f.write(chunk[:size])
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
    return path
