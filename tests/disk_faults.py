"""Real disk faults for tests (root only): a size-limited tmpfs, and filling it up (the same
code as the nemesis's disk-full fault, tools/nemesis/disk.py)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.nemesis.disk import fill_up, mount_tmpfs, unmount

__all__ = ["fill_up", "small_tmpfs"]


@contextlib.contextmanager
def small_tmpfs(mount: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (mount's -o size=...) at `mount` for the block; skips the test where
    that cannot be done (not root, no mount)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root")
    try:
        mount_tmpfs(mount, size)
    except OSError as exc:
        pytest.skip(str(exc))
    try:
        yield mount
    finally:
        unmount(mount)
