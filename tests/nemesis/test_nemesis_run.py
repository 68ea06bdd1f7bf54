"""A short seeded nemesis run on real node processes: every fault kind once (a partition and a
full disk only as root, with iptables and tmpfs), then the checker must find nothing. The long run (>= 100 rounds) is
`quorumlog nemesis --rounds 100`, documented in the README with its result."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "node"))

from cluster_harness import free_base_port  # noqa: E402

from tools.nemesis import disk, network  # noqa: E402
from tools.nemesis.runner import NemesisConfig, run  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


async def test_a_short_seeded_run_loses_and_duplicates_nothing(tmp_path):
    faults = ["kill9", "pause", "kill-controller", "kill-two"]
    if network.available() is None:
        faults.append("partition")
    if disk.available(tmp_path) is None:
        faults.append("disk-full")
    config = NemesisConfig(
        data_dir=tmp_path / "nemesis", rounds=len(faults), seed=3, faults=tuple(faults),
        fault_seconds=3.0, rate_per_s=300, base_port=free_base_port(5),
    )  # fmt: skip
    lines: list[str] = []
    # Every fault once: rounds pick at random, so walk them in order instead.
    result = await run(config, lines.append, order=faults)
    assert result.ok, result.verdict.violations
    assert result.available, (result.producer_errors, result.unanswered)
    assert [r.fault for r in result.rounds] == faults
    assert result.verdict.acked > 1000
    assert (config.data_dir / "history.jsonl").stat().st_size > 0
