"""DirectoryLock: one process per data directory (Kafka's `.lock` file)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from log.storage.dir_lock import LOCK_FILE, DirectoryLock, DirectoryLockedError


def test_a_second_holder_is_refused_until_the_first_releases(tmp_path):
    first = DirectoryLock(tmp_path / "logs").acquire()
    assert (tmp_path / "logs" / LOCK_FILE).exists()
    with pytest.raises(DirectoryLockedError, match="in use by another process"):
        DirectoryLock(tmp_path / "logs").acquire()
    first.release()
    with DirectoryLock(tmp_path / "logs"):
        pass


def test_the_lock_ends_with_its_process_however_it_ends(tmp_path):
    """The lock is the kernel's (flock on an open descriptor): a process killed while holding
    it leaves a .lock file that locks nothing."""
    code = (
        "import os, sys; from log.storage.dir_lock import DirectoryLock; "
        f"DirectoryLock({str(tmp_path)!r}).acquire(); os.kill(os.getpid(), 9)"
    )
    repo = Path(__file__).resolve().parents[2]
    assert subprocess.run([sys.executable, "-c", code], cwd=repo).returncode == -9
    with DirectoryLock(tmp_path):
        pass
