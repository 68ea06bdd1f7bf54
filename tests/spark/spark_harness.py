"""Helpers for the Spark tests and the benchmark: topic creation on a real cluster (replication
factor 1) and a local SparkSession in which the quorumlog data source is found without a
register() call (Spark's lookup imports pyspark_quorumlog.py from the workers' PYTHONPATH)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The tests' JVMs live for seconds to minutes and run small jobs: with C1 alone (no C2 compiler
# threads) and the serial collector, a session's start-up and first jobs take about half the
# CPU time of HotSpot's defaults (7.5 s against 14 s for a local session and two small jobs,
# measured on the 2-core test machine, which runs two test workers at once). Test runs only:
# a long-running job's hot loops are faster with C2. Nor do they verify the bytecode of the
# classes they load from Spark's jars (the JDK's own classes are never verified): a local session
# and two small jobs took 14.2-15.6 s of JVM CPU against 17.0-17.9 s with verification (three
# runs each, 2026-11-27).
JVM_OPTIONS = (
    "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    " -XX:+UnlockDiagnosticVMOptions -XX:-BytecodeVerificationRemote"
)


def jvm_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (default: os.environ) with JVM_OPTIONS for the JVMs that Spark's scripts start in
    a process given this environment: a driver (spark-submit reads SPARK_SUBMIT_OPTS) and a
    standalone master or worker (SPARK_DAEMON_JAVA_OPTS)."""
    env = dict(os.environ if base is None else base)
    for name in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
        env[name] = " ".join(o for o in (env.get(name, ""), JVM_OPTIONS) if o)
    return env


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


def forget_batch_commit(checkpoint: Path, batch: int) -> None:
    """Remove the streaming checkpoint's record that micro-batch `batch` committed, as a driver
    killed between the sink's commit and Spark's checkpoint leaves it: the file and the
    checksum Hadoop's local file system keeps beside it (left behind, the restarted query's
    write of that batch fails: "Multiple streaming queries are concurrently using ...")."""
    commits = checkpoint / "commits"
    (commits / str(batch)).unlink()
    (commits / f".{batch}.crc").unlink(missing_ok=True)


def stop_session(session) -> None:
    """Stop the session and the JVM behind it: SparkSession.stop ends the SparkContext but leaves
    PySpark's gateway JVM running (idle, a gigabyte of heap) until this process exits."""
    from pyspark import SparkContext

    session.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    SparkContext._gateway = None
    SparkContext._jvm = None
    gateway.shutdown()
    proc = getattr(gateway, "proc", None)  # set by pyspark.java_gateway.launch_gateway
    if proc is not None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def make_session(master: str = "local[2,2]"):
    from pyspark.sql import SparkSession

    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    from spark.worker_site import on_the_workers_path

    os.environ["PYSPARK_PYTHON"] = sys.executable  # workers need this venv's packages
    with on_the_workers_path():
        session = (
            SparkSession.builder.master(master)
            .appName("quorumlog-spark-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.python.filterPushdown.enabled", "true")
            .config("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
            .config("spark.python.worker.reuse", "true")
            .getOrCreate()
        )
    session.sparkContext.setLogLevel("ERROR")
    return session
