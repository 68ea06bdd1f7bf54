"""`quorumlog demo` end to end as `make demo` runs it (its own 3-node cluster, replication
factor 3, partition 0's leader killed with SIGKILL and restarted during the write; the Spark
pipeline writes with exactlyOnce and proves it row by row)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cluster_harness import REPO, free_base_port

from tests.spark.spark_harness import jvm_env  # the Spark pipeline's JVM: the tests' options

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_demo_runs_end_to_end():
    process = subprocess.run(
        [sys.executable, "-m", "tools", "demo", "--rows", "5000",
         "--base-port", str(free_base_port(3))],
        cwd=REPO, capture_output=True, text=True, timeout=280, env=jvm_env(),
    )  # fmt: skip
    assert process.returncode == 0, process.stdout + process.stderr
    assert "demo passed" in process.stdout
    assert "Traceback" not in process.stdout + process.stderr
    assert "high watermark" in process.stdout
    # The fail-over drill ran: partition 0's leader was killed and the node restarted.
    words = " ".join(process.stdout.split())  # rich wraps long lines
    assert "fail-over drill: SIGKILL node" in words
    assert "(fail-over time)" in words
    assert "restarted node ready after" in words
    # The Spark pipeline's write was exactly once, counted from the data read back
    # (read_committed). Without pyspark the demo uses our own clients and has no such line.
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return
    assert (
        "delivery: exactly once (exactlyOnce write, read_committed): 5000 rows written, "
        "5000 rows read, duplicates 0, missing 0" in words
    ), words
