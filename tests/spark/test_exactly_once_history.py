"""Exactly-once jobs on a cluster with a long history of them: the intent topic holds HISTORY
intent records of other jobs (written here with our producer, as compaction leaves a cluster's
past jobs: one record per job id, forever). A job's intent checks read only what was written
since the job started (spark/exactly_once.py JobStart, SinkStart), never that history: each
commit intent keeps what its tasks' checks cost ("checks": the offset they read from, the most
records one task read). On the Spark tests' shared cluster and session (tests/spark/conftest.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
from spark_harness import create_topic, forget_batch_commit

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]

HISTORY = 20_000
FEW = HISTORY // 100  # far more than a job's checks read, far less than the history


@pytest.fixture(scope="module")
def history(cluster) -> int:
    """HISTORY done commit intents of other jobs; the intent topic's end offset after them."""
    from producer.producer import Producer
    from spark.exactly_once import INTENT_TOPIC, ensure_intent_topic

    bootstrap = cluster.layout.bootstrap_servers
    ensure_intent_topic(bootstrap)

    async def populate() -> None:
        async with Producer(bootstrap, acks=-1, linger_ms=5) as producer:
            handles = []
            for n in range(HISTORY):
                job = f"history{n:06d}"
                intent = {"job": job, "decision": "commit", "done": True,
                          "transactions": [[f"quorumlog-spark-{job}-p0-a0", 1000 + n, 0]]}  # fmt: skip
                handles.append(
                    await producer.send(INTENT_TOPIC, json.dumps(intent).encode(), job.encode(), 0)
                )
            for handle in handles:
                await handle.wait()

    trio.run(populate)
    end = trio.run(_intent_end, bootstrap)
    assert end >= HISTORY
    return end


def _values(session, bootstrap: str, topic: str) -> list[int]:
    rows = (
        session.read.format("quorumlog").option("bootstrap.servers", bootstrap)
        .option("subscribe", topic).load().selectExpr("cast(value as string) v").collect()
    )  # fmt: skip
    return sorted(int(r.v) for r in rows)


def _write(df, bootstrap: str, topic: str, job_id: str) -> None:
    (
        df.write.format("quorumlog").mode("append").option("bootstrap.servers", bootstrap)
        .option("topic", topic).option("exactlyOnce", "true")
        .option("exactlyOnceJobId", job_id).save()
    )  # fmt: skip


def _intents_since(bootstrap: str, start: int) -> list[tuple[int, str, dict]]:
    """(offset, job id, intent) of every intent record from `start` on."""
    from producer.fetch_client import FetchClient
    from spark.exactly_once import INTENT_TOPIC

    async def read():
        async with FetchClient(bootstrap) as client:
            return [
                (r.offset, bytes(r.key).decode(), json.loads(bytes(r.value)))
                async for r in client.iter_records(INTENT_TOPIC, 0, start)
            ]

    return trio.run(read)


def test_a_batch_jobs_checks_read_from_its_start_not_the_history(cluster, session, history):
    from spark.exactly_once import read_intent

    bootstrap = cluster.layout.bootstrap_servers
    create_topic(cluster, "eos-history", 2)
    df = session.range(0, 4000, 1, 2).selectExpr("cast(id as string) as value")
    _write(df, bootstrap, "eos-history", "history_batch")
    assert _values(session, bootstrap, "eos-history") == list(range(4000))
    intent = trio.run(read_intent, bootstrap, "history_batch")
    assert intent is not None and intent["decision"] == "commit" and intent["done"]
    assert len(intent["transactions"]) == 2
    checks = intent["checks"]
    assert checks["from"] >= history, "the tasks' checks started inside the history"
    assert checks["most_read"] < FEW, f"a task's checks read {checks['most_read']} records"


def test_a_job_id_run_again_after_its_abort_writes_once(cluster, session, history):
    """A failed run's abort intent is no decision for the next run with the same job id: it
    writes and commits its output (the tasks check only what was written since their job
    started; the abort is older)."""
    bootstrap = cluster.layout.bootstrap_servers
    create_topic(cluster, "eos-rerun", 2)

    def always_fail(batches):
        for _batch in batches:
            raise RuntimeError("injected failure in every attempt")
        yield from ()

    df = session.range(0, 3000, 1, 2).selectExpr("cast(id as string) as value")
    with pytest.raises(Exception, match="injected failure in every attempt"):
        _write(df.mapInPandas(always_fail, "value string"), bootstrap, "eos-rerun", "rerun1")
    assert _values(session, bootstrap, "eos-rerun") == []
    _write(df, bootstrap, "eos-rerun", "rerun1")
    assert _values(session, bootstrap, "eos-rerun") == list(range(3000))


def _stream(session, bootstrap: str, checkpoint: Path) -> None:
    """The exactly-once copy of eos-h-in to eos-h-out, micro-batches of at most 1000 records,
    sink id "history_stream"."""
    stream = (
        session.readStream.format("quorumlog").option("bootstrap.servers", bootstrap)
        .option("subscribe", "eos-h-in").option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "1000").load().selectExpr("value")
    )  # fmt: skip
    query = (
        stream.writeStream.format("quorumlog").option("bootstrap.servers", bootstrap)
        .option("topic", "eos-h-out").option("exactlyOnce", "true")
        .option("exactlyOnceJobId", "history_stream")
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()
    assert query.exception() is None, query.exception()


def test_each_micro_batch_checks_from_its_own_start_and_a_replay_is_skipped(
    cluster, session, history, tmp_path
):
    """Three micro-batches: each one's tasks check from an offset past the previous batch's
    commit (the sink's writer is made for each micro-batch), reading a few records. Then the
    checkpoint's record of the last batch is removed (what a driver killed between the sink's
    commit and Spark's checkpoint leaves): the restarted query replays that batch, which the
    sink finds committed (its newest intent) and does not write again."""
    bootstrap = cluster.layout.bootstrap_servers
    create_topic(cluster, "eos-h-in", 2)
    create_topic(cluster, "eos-h-out", 2)
    (
        session.range(0, 3000, 1, 2).selectExpr("cast(id as string) as value").write
        .format("quorumlog").mode("append").option("bootstrap.servers", bootstrap)
        .option("topic", "eos-h-in").save()
    )  # fmt: skip
    start = trio.run(_intent_end, bootstrap)
    checkpoint = tmp_path / "checkpoint"
    _stream(session, bootstrap, checkpoint)
    assert _values(session, bootstrap, "eos-h-out") == list(range(3000))

    written = [(o, job, i) for o, job, i in _intents_since(bootstrap, start)
               if job.startswith("history_stream-b")]  # fmt: skip
    done = {job: offset for offset, job, intent in written if intent["done"]}
    assert sorted(done) == ["history_stream-b0", "history_stream-b1", "history_stream-b2"]
    for _offset, job, intent in written:
        checks = intent["checks"]
        assert checks["from"] >= history and checks["most_read"] < FEW, (job, checks)
        batch = int(job.rsplit("-b", 1)[1])
        if batch:
            previous = done[f"history_stream-b{batch - 1}"]
            assert checks["from"] > previous, f"batch {batch} checked from {checks['from']}"

    forget_batch_commit(checkpoint, 2)  # Spark forgets that it committed batch 2
    before_replay = trio.run(_intent_end, bootstrap)
    _stream(session, bootstrap, checkpoint)
    assert (checkpoint / "commits" / "2").exists(), "Spark did not run batch 2 again"
    assert _values(session, bootstrap, "eos-h-out") == list(range(3000))
    replayed = [i for _o, job, i in _intents_since(bootstrap, before_replay)
                if job == "history_stream-b2"]  # fmt: skip
    assert replayed == [], "the replay of a committed micro-batch wrote a new intent"


async def _intent_end(bootstrap: str) -> int:
    from producer.fetch_client import FetchClient
    from spark.exactly_once import INTENT_TOPIC

    async with FetchClient(bootstrap) as client:
        return await client.latest_offset(INTENT_TOPIC, 0)
