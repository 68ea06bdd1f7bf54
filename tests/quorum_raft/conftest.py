import os
import sys

import pytest

# quorum.raft authenticates the Raft port with pysyncobj's password, which needs `cryptography`.
pytest.importorskip("cryptography", reason="quorum.raft needs the cryptography package")

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def _kill_node_processes():
    """No controller process outlives its test, whatever the test did."""
    yield
    from quorum_raft_toy import NodeProcess

    while NodeProcess.started:
        NodeProcess.started.pop().kill9()
