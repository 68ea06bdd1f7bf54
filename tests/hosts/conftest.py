import os
import sys

import pytest

pytest.importorskip("cryptography", reason="quorum.raft needs the cryptography package")
pytest.importorskip("confluent_kafka", reason="the clients of these tests")

sys.path.insert(0, os.path.dirname(__file__))
