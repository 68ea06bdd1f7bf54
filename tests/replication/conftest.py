import os
import sys

import pytest

pytest.importorskip("cryptography", reason="quorum.raft needs the cryptography package")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "node"))
sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def _kill_node_processes():
    """No node process outlives its test, whatever the test did."""
    yield
    from cluster_harness import kill_started

    kill_started()
