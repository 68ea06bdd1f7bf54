"""A Spark driver for tests/spark/test_exactly_once.py's driver-crash tests, run as its own
process so that the test can SIGKILL it (and its JVM) at a moment it sees from outside
(the job's transactions and commit intents in the cluster).

    python tests/spark/eos_driver.py batch BOOTSTRAP TOPIC ROWS JOB_ID
    python tests/spark/eos_driver.py stream BOOTSTRAP SOURCE SINK CHECKPOINT
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main(argv: list[str]) -> None:
    from spark_harness import make_session

    session = make_session()
    if argv[0] == "batch":
        bootstrap, topic, rows, job_id = argv[1], argv[2], int(argv[3]), argv[4]
        df = session.range(0, rows, 1, 2).selectExpr("cast(id as string) as value")
        (
            df.write.format("quorumlog").mode("append").option("bootstrap.servers", bootstrap)
            .option("topic", topic).option("exactlyOnce", "true")
            .option("exactlyOnceJobId", job_id).save()
        )  # fmt: skip
    else:
        bootstrap, source, sink, checkpoint = argv[1:5]
        run_stream(session, bootstrap, source, sink, checkpoint)
    session.stop()


STREAM_JOB_ID = "eos_stream"  # the sink's id: its micro-batches are jobs eos_stream-b<n>


def run_stream(session, bootstrap: str, source: str, sink: str, checkpoint: str) -> None:
    """The exactly-once copy of `source` to `sink`, micro-batches of at most 2000 records."""
    stream = (
        session.readStream.format("quorumlog").option("bootstrap.servers", bootstrap)
        .option("subscribe", source).option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "2000").load().selectExpr("value")
    )  # fmt: skip
    query = (
        stream.writeStream.format("quorumlog").option("bootstrap.servers", bootstrap)
        .option("topic", sink).option("exactlyOnce", "true")
        .option("exactlyOnceJobId", STREAM_JOB_ID)
        .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))


if __name__ == "__main__":
    main(sys.argv[1:])
