"""A quick selection of librdkafka's own test suite against an in-process broker.

The whole suite runs with `make compat` (bench/compat.py: a 3-node cluster, ~15 minutes on 2
cores); these few produce/consume/offset tests (about 20 s) need one broker and replication
factor 1. They run where librdkafka's test-runner is built under build/compat/ (`make test`
builds it first, as root with apt-get: `make compat-runner`) and skip with the reason elsewhere.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest
import trio

from bench.compat import LIBRDKAFKA_DIR, parse_rdkafka
from tests.broker.conftest import start_broker

RUNNER = LIBRDKAFKA_DIR / "tests" / "test-runner"
# Each passed on a single in-process broker, quick mode, in 1-3 s.
QUICK_SELECTION = ["0001", "0002", "0003", "0005", "0007", "0008", "0011", "0012", "0013",
                   "0031", "0035", "0036"]  # fmt: skip
HANG_S = 180

pytestmark = pytest.mark.skipif(
    not RUNNER.exists(),
    reason=f"librdkafka's test-runner is not built ({RUNNER}): `make compat-runner` builds it",
)


async def test_quick_selection_passes(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **{"num.partitions": 4})
    conf = tmp_path / "test.conf"
    conf.write_text(f"bootstrap.servers={broker.bootstrap}\ntest.timeout.multiplier=4\n")
    env = {**os.environ, "LD_LIBRARY_PATH": "../src:../src-cpp", "TEST_KAFKA_VERSION": "3.7.0",
           "RDKAFKA_TEST_CONF": str(conf)}  # fmt: skip
    results: dict[str, str] = {}
    done: subprocess.CompletedProcess | None = None
    for number in QUICK_SELECTION:
        done = None
        with trio.move_on_after(HANG_S):  # a hang guard (killed), not a speed assertion
            done = await trio.run_process(
                [str(RUNNER), "-p1", "-Q", "-E", "-L", number],
                cwd=RUNNER.parent, env=env, capture_stdout=True, stderr=subprocess.STDOUT, check=False,
            )  # fmt: skip
        if done is None:
            results[number] = f"hung (killed after {HANG_S} s)"
            continue
        output = done.stdout.decode(errors="replace")
        rows = {n: r for n, r in parse_rdkafka(output).items() if n.startswith(number)}
        failure = re.search(r"### Test .* failed at .*\n.*", output)
        results[number] = ",".join(rows.values()) or f"exit {done.returncode}"
        if done.returncode != 0 or "PASSED" not in rows.values():
            results[number] += f": {failure.group(0) if failure else output[-2000:]}"
    assert all(r == "PASSED" for r in results.values()), results
