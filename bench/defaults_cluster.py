"""A cluster of real `quorumlog node` processes with the settings `quorumlog up` writes.

The benches that measure what users get (fail-over, partition scale, end-to-end latency,
consume throughput) start their nodes through tests/node's harness, whose TEST_PROPS shorten
heartbeats and sessions for tests; here those are left out, so every node runs Kafka's
defaults as `quorumlog up` configures them.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "node"))

import cluster_harness  # noqa: E402
from cluster_harness import Cluster  # noqa: E402


def defaults_cluster(workdir: Path, nodes: int = 3) -> Cluster:
    """A formatted (not yet started) Cluster on `quorumlog up` defaults."""
    saved = dict(cluster_harness.TEST_PROPS)
    cluster_harness.TEST_PROPS.clear()
    try:
        return Cluster(workdir, nodes)
    finally:
        cluster_harness.TEST_PROPS.update(saved)
