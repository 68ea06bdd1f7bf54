"""`quorumlog up` end to end: ready, clean stop, restart of the same cluster, a node killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import trio
from cluster_harness import REPO, STARTED, free_base_port

from log.common.errors import ErrorCode
from log.common.node_config import NodeConfig, Voter
from quorum import controller as c
from quorum.controller_client import ControllerClient
from tools.cluster_layout import ClusterLayout
from tools.metadata_cmd import read_offline, read_online

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def _start_up(data_dir, base_port) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-m", "tools", "up", "--nodes", "3", "--data-dir", str(data_dir),
         "--base-port", str(base_port)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    STARTED.append(process)
    return process


def _read_until(process: subprocess.Popen, marker: str, timeout_s: float = 90) -> str:
    assert process.stdout is not None
    os.set_blocking(process.stdout.fileno(), False)
    deadline, out = time.monotonic() + timeout_s, ""
    while time.monotonic() < deadline:
        chunk = process.stdout.read()
        if chunk:
            out += chunk.decode(errors="replace")
            if marker in out:
                return out
        elif process.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"{marker!r} not seen; output so far:\n{out}")


def _stop_up(process: subprocess.Popen, layout: ClusterLayout) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    for node_id in layout.node_ids:
        assert (layout.node_dir(node_id) / "kafka-logs" / ".kafka_cleanshutdown").exists()


async def test_up_start_stop_restart_and_kill(tmp_path):
    base_port = free_base_port(3)
    layout = ClusterLayout(tmp_path, 3, base_port)
    up = _start_up(tmp_path, base_port)
    out = _read_until(up, "bootstrap servers:")
    assert f"127.0.0.1:{base_port}" in out
    cluster_id = NodeConfig.load(layout.node_dir(1)).props["cluster.id"]
    voters = [Voter(i, "127.0.0.1", layout.controller_port(i)) for i in layout.controller_ids]
    secret = NodeConfig.load(layout.node_dir(1)).props["controller.quorum.password"]
    client = ControllerClient(voters, secret=secret, max_attempts=40)
    try:
        with trio.fail_after(20):
            r = await client.create_topics(c.CreateTopicsRequest((c.CreatableTopic("kept", 2, 3),)))
    finally:
        await client.aclose()
    assert r.results[0].error_code == ErrorCode.NONE
    _stop_up(up, layout)
    offline, _ = read_offline(layout.node_dir(1))
    assert offline.image.topic("kept") is not None
    # The offline tool, as a user runs it.
    from click.testing import CliRunner

    from tools.cli import main

    result = CliRunner().invoke(main, ["metadata", "--data-dir", str(layout.node_dir(2))])
    assert result.exit_code == 0 and "kept" in result.output and "broker_epoch=" in result.output
    result = CliRunner().invoke(
        main, ["metadata", "--data-dir", str(layout.node_dir(2)), "--records", "--json"]
    )
    assert result.exit_code == 0 and '"type": "TopicRecord"' in result.output

    # Again: the same cluster (same id, the topic is still there).
    up = _start_up(tmp_path, base_port)
    _read_until(up, "bootstrap servers:")
    assert NodeConfig.load(layout.node_dir(1)).props["cluster.id"] == cluster_id
    machine = await read_online("127.0.0.1", layout.controller_port(2), secret)
    assert machine.image.topic("kept").topic_id == offline.image.topic("kept").topic_id

    # SIGKILL one node: reported, the others keep running.
    pid = int((layout.node_dir(2) / "node.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    _read_until(up, "node-2 exited", timeout_s=20)
    assert up.poll() is None
    machine = await read_online("127.0.0.1", layout.controller_port(1), secret)
    assert machine.image.topic("kept") is not None
    up.send_signal(signal.SIGTERM)
    assert up.wait(timeout=60) == 0
    for node_id in (1, 3):
        assert (layout.node_dir(node_id) / "kafka-logs" / ".kafka_cleanshutdown").exists()
