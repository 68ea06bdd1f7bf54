"""`quorumlog demo` end to end as `make demo` runs it (its own 3-node cluster)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cluster_harness import REPO

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_demo_runs_end_to_end():
    process = subprocess.run(
        [sys.executable, "-m", "tools", "demo", "--rows", "5000"],
        cwd=REPO, capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert process.returncode == 0, process.stdout + process.stderr
    assert "demo passed" in process.stdout
    assert "Traceback" not in process.stdout + process.stderr
    assert "high watermark" in process.stdout
