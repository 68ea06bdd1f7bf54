"""Helpers for the Spark tests and the benchmark: topic creation on a real cluster (replication
factor 1) and a local SparkSession in which the quorumlog data source is found without a
register() call (Spark's lookup imports pyspark_quorumlog.py from the workers' PYTHONPATH)."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def create_topic(cluster, name: str, partitions: int, **configs: str) -> None:
    import trio

    from log.common.errors import ErrorCode
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
    return session
