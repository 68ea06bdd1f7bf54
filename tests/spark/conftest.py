"""Fixtures for the Spark data source tests: one real 3-node quorumlog cluster and one local
SparkSession for all of them (both slow to start; under pytest-xdist, on the worker that runs
tests/spark, stopped when it has run them: tests/group_lifetime.py). Each test writes topics of
its own names, so the tests share them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("cryptography", reason="quorum.raft needs the cryptography package")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tests" / "node"))
sys.path.insert(0, str(HERE))

from group_lifetime import SPARK_GROUP, stop_with_group  # noqa: E402


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    from cluster_harness import Cluster

    props = {
        # two-phase commit on: the exactly-once writer's transactions (test_exactly_once.py)
        "transaction.two.phase.commit.enable": True,
        # no time-based retention: tests write records stamped 2020-2024, older than Kafka's
        # 7 days, and the retention pass (every 5 minutes) deleted them under a slow test's
        # feet once the suite had run that long (test_filter_pushdown's log start moved)
        "log.retention.ms": -1,
    }
    cluster = Cluster(tmp_path_factory.mktemp("spark-cluster"), 3, extra_props=props, shared=True)
    stop = stop_with_group(SPARK_GROUP, cluster.stop_all)
    try:
        cluster.start_all()
        yield cluster
    finally:
        stop()


@pytest.fixture(scope="session")
def bootstrap(cluster) -> str:
    return cluster.layout.bootstrap_servers


@pytest.fixture(scope="session")
def session():
    from spark_harness import make_session, stop_session

    s = make_session()
    stop = stop_with_group(SPARK_GROUP, lambda: stop_session(s))
    try:
        yield s
    finally:
        stop()
