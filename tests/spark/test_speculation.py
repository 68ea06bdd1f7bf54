"""Real speculative task attempts (issue 17): a Spark standalone cluster of two workers on two
loopback hosts (tests/spark/speculation_driver.py says why not local mode or local-cluster),
speculation forced on, one task's first attempt stalled until its speculative copy is done, so
the copy wins and the first attempt loses after writing rows. With exactlyOnce, read_committed
shows each row exactly once. (That the option matters, i.e. that without it a re-run task's
rows appear twice, is shown by test_exactly_once.py with a retried task.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from spark_harness import REPO, create_topic
from speculation_driver import unusable_reason

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
ROWS = 4000


def _values(session, bootstrap, topic, isolation="read_committed") -> list[int]:
    rows = (
        session.read.format("quorumlog").option("bootstrap.servers", bootstrap)
        .option("subscribe", topic).option("kafka.isolation.level", isolation).load()
        .selectExpr("cast(value as string) v").collect()
    )  # fmt: skip
    return sorted(int(r.v) for r in rows)


def test_a_speculative_copy_wins_and_each_row_is_written_exactly_once(cluster, session, tmp_path):
    reason = unusable_reason()
    if reason is not None:
        pytest.skip(reason)
    bootstrap = cluster.layout.bootstrap_servers
    create_topic(cluster, "spec-eos", 2)
    driver = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("speculation_driver.py")), bootstrap,
         "spec-eos", str(ROWS), str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    assert driver.returncode == 0, driver.stderr[-3000:]
    # task 0 ran twice, its first attempt and a speculative copy (no task failed: no retry),
    # and the copy handed over all its rows while the first attempt waited
    assert {p.name for p in tmp_path.iterdir()} >= {"p0-a0", "p0-a1", "p1-a0", "copy-done"}

    assert _values(session, bootstrap, "spec-eos") == list(range(ROWS))
    physical = _values(session, bootstrap, "spec-eos", "read_uncommitted")
    assert len(physical) > ROWS, "the losing attempt wrote rows (then was aborted)"
