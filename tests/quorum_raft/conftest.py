import os
import sys

import pytest

# quorum.raft authenticates the Raft port with pysyncobj's password, which needs `cryptography`.
pytest.importorskip("cryptography", reason="quorum.raft needs the cryptography package")

sys.path.insert(0, os.path.dirname(__file__))
