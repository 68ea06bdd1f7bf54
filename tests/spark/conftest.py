"""Fixtures for the Spark data source tests: one real 3-node quorumlog cluster and one local
SparkSession per module (both slow to start), plus topic creation (replication factor 1)."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("cryptography", reason="quorum.raft needs the cryptography package")

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "node"))


def create_topic(cluster, name: str, partitions: int, **configs: str) -> None:
    import trio

    from log.protocol.errors import ErrorCode
    from quorum import controller as c

    async def create():
        client = cluster.client()
        try:
            with trio.fail_after(30):
                response = await client.create_topics(
                    c.CreateTopicsRequest((c.CreatableTopic(name, partitions, 1, configs),))
                )
        finally:
            await client.aclose()
        assert response.results[0].error_code == ErrorCode.NONE, response

    trio.run(create)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from cluster_harness import Cluster

    cluster = Cluster(tmp_path_factory.mktemp("spark-cluster"), 3)
    try:
        cluster.start_all()
        yield cluster
    finally:
        cluster.stop_all()


@pytest.fixture(scope="module")
def bootstrap(cluster) -> str:
    return cluster.layout.bootstrap_servers


def make_session(master: str = "local[2,2]"):
    from pyspark.sql import SparkSession

    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    paths = [str(REPO), os.environ.get("PYTHONPATH", "")]
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    os.environ["PYSPARK_PYTHON"] = sys.executable  # workers need this venv's packages
    session = (
        SparkSession.builder.master(master)
        .appName("quorumlog-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    from spark import QuorumLogDataSource

    session.dataSource.register(QuorumLogDataSource)
    return session


@pytest.fixture(scope="module")
def session():
    s = make_session()
    try:
        yield s
    finally:
        s.stop()
