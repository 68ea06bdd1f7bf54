import os
import sys

import pytest

# quorum.raft authenticates the Raft port with pysyncobj's password, which needs `cryptography`.
pytest.importorskip("cryptography", reason="quorum.raft needs the cryptography package")

# The real-process tests drive nodes through tests/node's cluster harness.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "node"))


@pytest.fixture(autouse=True)
def _kill_node_processes():
    """No node process outlives its test, whatever the test did."""
    yield
    from cluster_harness import kill_started

    kill_started()
