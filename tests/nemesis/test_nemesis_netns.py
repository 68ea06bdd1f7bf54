"""The nemesis on a network of namespaces (`quorumlog nemesis --network netns`): every node on a
host of its own, and partitions made the way they happen to machines -- a host cut off by
iptables inside its namespace, a host whose link goes down, a host that receives nothing but
still sends (an asymmetric cut). A short seeded run, each fault once; then the checker must find
nothing lost, duplicated or out of place. Root and iproute2 only (skipped otherwise)."""

from __future__ import annotations

import pytest

from tools.nemesis import namespaces
from tools.nemesis.runner import NemesisConfig, run

_reason = namespaces.unavailable_reason()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(400),
    pytest.mark.skipif(_reason is not None, reason=f"netns: {_reason}"),
]


async def test_real_partitions_lose_and_duplicate_nothing(tmp_path):
    faults = ["partition", "link-down", "asymmetric-cut"]
    config = NemesisConfig(
        data_dir=tmp_path / "nemesis", rounds=len(faults), seed=5, faults=tuple(faults),
        fault_seconds=3.0, rate_per_s=300, nodes=4, network="netns",
        client_debug="eos,msg,broker,topic,metadata",  # producer-<p>.log: why one stalled
    )  # fmt: skip
    lines: list[str] = []
    result = await run(config, lines.append, order=faults)
    assert result.ok, (result.verdict.violations, str(config.data_dir))
    assert result.available, (result.producer_errors, result.unanswered, str(config.data_dir))
    assert [r.fault for r in result.rounds] == faults
    assert all(r.healed_s is not None for r in result.rounds), result.rounds
    assert result.verdict.acked > 1000
    assert "host" in result.rounds[0].description  # a host's own network, not loopback rules
