"""A Spark driver for tests/spark/test_speculation.py: real speculative task attempts.

Local mode never runs speculative copies (Spark turns speculation off when the master is
local), and `local-cluster[2,1,1024]` runs but never places one either: a speculative copy
only goes to a host where no attempt of that task ran (TaskSetManager: hasAttemptOnHost), and
every local-cluster worker has the same host. So this starts Spark's standalone master and two
workers (`spark-class`, from the pip pyspark) bound to two loopback addresses, 127.0.0.2 and
127.0.0.3: two hosts on one machine. Then it runs one exactlyOnce job with speculation
forced on:

    python tests/spark/speculation_driver.py BOOTSTRAP TOPIC ROWS MARKER_DIR

Task 0's first attempt hands over the first 1,500 of its 2,000 rows (slow_first_attempt says why
not 1,000), then waits until a speculative copy of itself (attempt >= 1) has handed over all of
its rows; so the copy finishes first and
wins, and the first attempt loses with rows written. Each task attempt leaves a file
`p<partition>-a<attempt>` in MARKER_DIR, so the test can see that a copy ran; the standalone
cluster's logs and work directories go to MARKER_DIR/standalone (pytest's tmp_path, cleaned up
with it).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from spark_harness import JVM_OPTIONS, jvm_env  # noqa: E402 - the test JVMs' options

HOSTS = ("127.0.0.2", "127.0.0.3")
WAIT_FOR_COPY_S = 240  # a hang guard: the test fails if no copy ran
SPECULATION = {
    "spark.speculation": "true",
    "spark.speculation.interval": "100ms",
    "spark.speculation.multiplier": "1.1",
    "spark.speculation.quantile": "0.5",
    "spark.speculation.minTaskRuntime": "100ms",
    # judge a task by its run time only (Spark 3.4+ also asks for a low processing rate)
    "spark.speculation.efficiency.enabled": "false",
}


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def unusable_reason() -> str | None:
    """Why this machine cannot run the standalone cluster, or None."""
    if not (spark_home() / "bin" / "spark-class").exists():
        return "the pyspark install has no bin/spark-class (needed for the standalone cluster)"
    for host in HOSTS:
        with socket.socket() as s:
            try:
                s.bind((host, 0))
            except OSError as exc:
                return f"cannot bind {host} ({exc}): two workers need two loopback hosts"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StandaloneCluster:
    """A standalone master on 127.0.0.1 and one 1-core worker on each of HOSTS."""

    def __init__(self, work: Path) -> None:
        self.work = work
        work.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.processes: list[subprocess.Popen] = []

    def _start(self, name: str, *args: str) -> None:
        env = {**jvm_env(), "SPARK_HOME": str(spark_home()), "SPARK_NO_DAEMONIZE": "1"}
        log = open(self.work / f"{name}.log", "w")  # noqa: SIM115 - the process keeps it
        self.processes.append(subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args], env=env, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        ))  # fmt: skip

    def __enter__(self) -> str:
        deploy = "org.apache.spark.deploy"
        self._start("master", f"{deploy}.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", "0")  # fmt: skip
        for i, host in enumerate(HOSTS):
            self._start(f"worker-{i}", f"{deploy}.worker.Worker", "--host", host,
                        "--webui-port", "0", "--cores", "1", "--memory", "1g",
                        "--work-dir", str(self.work / f"worker-{i}"),
                        f"spark://127.0.0.1:{self.port}")  # fmt: skip
        return f"spark://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        import signal

        for process in self.processes:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for process in self.processes:
            process.wait()


def make_session(master: str):
    import warnings

    from pyspark.sql import SparkSession

    from spark.worker_site import worker_python_path

    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = (
        SparkSession.builder.master(master)
        .appName("quorumlog-speculation")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.executorEnv.PYTHONPATH", worker_python_path())
        .config("spark.executor.memory", "512m")
        .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
        .config("spark.executor.extraJavaOptions", JVM_OPTIONS)
        .config("spark.cores.max", "2")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
    )
    for key, value in SPECULATION.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    from spark import QuorumLogDataSource

    session.dataSource.register(QuorumLogDataSource)
    return session


CHUNK_ROWS = 250  # what the stalling function yields at a time


def slow_first_attempt(session, rows: int, markers: str):
    """`rows` rows in 2 tasks; task 0's first attempt stalls past its first half until a copy
    is done.

    It stalls only once 500 rows past the first writer batch (1,000 rows: the session's
    maxRecordsPerBatch) have left it, in 250-row pieces. Stalling right after the first 1,000
    rows, as it did, could leave them in Spark: when Spark killed the loser nothing of it had
    been written (the test's 'the losing attempt wrote rows' failed in a fresh-clone run, 4000
    > 4000). Where they waited is inferred, not traced: this worker's buffered output (64 KiB,
    ~320 of these rows) holds the tail of what was yielded last, and the JVM may ask for the
    row after a full batch before it hands that batch to the writer."""
    import pandas as pd

    first_batch = rows // 2 // 2
    stall_after = first_batch + 2 * CHUNK_ROWS

    def stall(batches):
        from pyspark import TaskContext

        context = TaskContext.get()
        partition, attempt = context.partitionId(), context.attemptNumber()
        Path(markers, f"p{partition}-a{attempt}").touch()
        copy_done = Path(markers, "copy-done")
        sent = 0
        for batch in batches:
            for start in range(0, len(batch), CHUNK_ROWS):
                if partition == 0 and attempt == 0 and sent >= stall_after:
                    deadline = time.monotonic() + WAIT_FOR_COPY_S
                    while not copy_done.exists() and time.monotonic() < deadline:
                        time.sleep(0.1)
                chunk = batch["value"].iloc[start : start + CHUNK_ROWS]
                sent += len(chunk)
                yield pd.DataFrame({"value": chunk.reset_index(drop=True)})
        if partition == 0 and attempt > 0:
            copy_done.touch()

    # 200-byte values, as in test_exactly_once.py: the first half really leaves the JVM
    df = session.range(0, rows, 1, 2).selectExpr("lpad(cast(id as string), 200, '0') value")
    return df.mapInPandas(stall, "value string")


def main(argv: list[str]) -> None:
    bootstrap, topic, rows, markers = argv[0], argv[1], int(argv[2]), argv[3]
    with StandaloneCluster(Path(markers, "standalone")) as master:
        session = make_session(master)
        try:
            (
                slow_first_attempt(session, rows, markers)
                .write.format("quorumlog").mode("append")
                .option("bootstrap.servers", bootstrap).option("topic", topic)
                .option("exactlyOnce", "true")
                # each Arrow batch sent as it comes, as in test_exactly_once.py: gathered
                # (4 MiB by default, more than the task's rows), the first attempt's half
                # would wait in the writer, and Spark killing the loser could leave it unsent
                .option("arrowGatherBytes", "0").save()
            )  # fmt: skip
        finally:
            session.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
