"""Nodes die with their supervisor: SIGKILL `quorumlog up`, its node processes stop within
seconds (they watch an inherited pipe for end-of-file) and shut down cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from cluster_harness import REPO, STARTED, free_base_port

from tools.cluster_layout import ClusterLayout

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

NODE_EXIT_TIMEOUT_S = 15


def _alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting for a reaper)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_for(predicate, timeout_s: float) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to see the node processes")
def test_nodes_exit_when_up_is_sigkilled(tmp_path):
    base_port = free_base_port(2)
    layout = ClusterLayout(tmp_path, 2, base_port)
    up = subprocess.Popen(
        [sys.executable, "-m", "tools", "up", "--nodes", "2", "--data-dir", str(tmp_path),
         "--base-port", str(base_port)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    STARTED.append(up)
    assert up.stdout is not None
    for line in up.stdout:
        if line.startswith("bootstrap servers:"):
            break
    else:
        raise AssertionError(f"up exited with {up.wait()} before the cluster was ready")
    pid_files = [layout.node_dir(i) / "node.pid" for i in layout.node_ids]
    pids = [int(path.read_text()) for path in pid_files]
    assert all(_alive(pid) for pid in pids)

    up.send_signal(signal.SIGKILL)
    up.wait(timeout=10)
    try:
        assert _wait_for(lambda: not any(_alive(pid) for pid in pids), NODE_EXIT_TIMEOUT_S)
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    # they stopped the clean way (SIGTERM's path), leaving the clean-shutdown marker
    for node_id in layout.node_ids:
        marker = layout.node_dir(node_id) / "kafka-logs" / ".kafka_cleanshutdown"
        assert _wait_for(marker.exists, 5), marker
