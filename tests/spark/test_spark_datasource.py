"""Real Spark (local[2,2]: two cores, one retry per task) against a real 3-node quorumlog
cluster (replication factor 1 topics spread over the nodes): the `quorumlog` data source's
writers, reader, planning, filter pushdown, task retries and streaming."""

from __future__ import annotations

import datetime
import shutil
from pathlib import Path

import pytest
from spark_harness import create_topic

from producer.partitioner import partition_for_key
from spark.offset_ranges import OffsetRange
from spark.options import parse_read_options
from spark.reader import QuorumLogFilteringReader, plan_offset_ranges
from spark.schema import source_schema

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]

PARTITIONS = 4


def _read(session, bootstrap, topic, **options):
    reader = session.read.format("quorumlog").option("bootstrap.servers", bootstrap)
    reader = reader.option("subscribe", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _write(df, bootstrap, topic=None, **options):
    writer = df.write.format("quorumlog").mode("append").option("bootstrap.servers", bootstrap)
    if topic is not None:
        writer = writer.option("topic", topic)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def _high_watermarks(bootstrap, topic):
    import trio

    from producer.fetch_client import FetchClient

    async def query():
        async with FetchClient(bootstrap) as client:
            count = await client.partition_count(topic)
            return {p: await client.latest_offset(topic, p) for p in range(count)}

    return trio.run(query)


@pytest.mark.parametrize("writer", ["arrow", "row"])
def test_round_trip_keys_headers_partitions_string_and_binary(cluster, bootstrap, session, writer):
    topic = f"roundtrip-{writer}"
    create_topic(cluster, topic, PARTITIONS)
    keyed = session.range(0, 3000, 1, 3).selectExpr(
        "concat('k', cast(id as string)) as key",  # string key
        "cast(concat('v', cast(id as string)) as binary) as value",  # binary value
    )
    _write(keyed, bootstrap, topic, writer=writer)
    explicit = session.range(3000, 3100, 1, 2).selectExpr(
        "cast(cast(id as string) as binary) as key",  # binary key
        "concat('v', cast(id as string)) as value",  # string value
        "cast(id % 2 as int) as partition",
        "array(named_struct('key', 'h', 'value', cast(cast(id as string) as binary))) as headers",
        f"'{topic}' as topic",  # the topic column (no topic option)
    )
    _write(explicit, bootstrap, None, writer=writer)

    rows = _read(session, bootstrap, topic, includeHeaders="true").collect()
    assert len(rows) == 3100
    by_value = {bytes(r.value).decode(): r for r in rows}
    assert set(by_value) == {f"v{i}" for i in range(3100)}
    for i in range(3000):  # keyed rows: murmur2 partitions, like the Java client
        r = by_value[f"v{i}"]
        assert bytes(r.key) == f"k{i}".encode()
        assert r.partition == partition_for_key(f"k{i}".encode(), PARTITIONS)
        assert r.headers == [] and r.topic == topic and r.timestampType == 0
    for i in range(3000, 3100):
        r = by_value[f"v{i}"]
        assert r.partition == i % 2 and bytes(r.key) == str(i).encode()
        assert [(h.key, bytes(h.value)) for h in r.headers] == [("h", str(i).encode())]
    offsets = {}
    for r in rows:
        offsets.setdefault(r.partition, []).append(r.offset)
    for partition, found in offsets.items():  # every offset once, from 0: nothing lost
        assert sorted(found) == list(range(len(found))), partition


def test_min_partitions_splits_ranges_and_planning_is_what_spark_runs(cluster, bootstrap, session):
    topic = "split"
    create_topic(cluster, topic, 2)
    df = session.range(0, 2000, 1, 2).selectExpr(
        "cast(id as string) as value", "cast(id % 2 as int) as partition"
    )
    _write(df, bootstrap, topic)
    options = {"bootstrap.servers": bootstrap, "subscribe": topic, "minPartitions": "6"}
    ranges = plan_offset_ranges(parse_read_options(options))
    assert sorted(ranges, key=lambda r: (r.partition, r.start_offset)) == [
        OffsetRange(topic, p, s, e) for p in (0, 1) for s, e in ((0, 333), (333, 666), (666, 1000))
    ]
    loaded = _read(session, bootstrap, topic, minPartitions="6")
    assert loaded.rdd.getNumPartitions() == 6
    assert loaded.count() == 2000
    assert loaded.select("offset", "partition").distinct().count() == 2000
    assigned = (
        session.read.format("quorumlog").option("bootstrap.servers", bootstrap)
        .option("assign", '{"split": [1]}').load()
    )  # fmt: skip
    assert assigned.rdd.getNumPartitions() == 1
    assert {r.partition for r in assigned.collect()} == {1} and assigned.count() == 1000
    ending = _read(
        session, bootstrap, topic,
        startingOffsets='{"split": {"0": 10, "1": -2}}',
        endingOffsets='{"split": {"0": 20, "1": 5}}',
    )  # fmt: skip
    assert sorted((r.partition, r.offset) for r in ending.collect()) == [
        (0, o) for o in range(10, 20)
    ] + [(1, o) for o in range(5)]


def test_filter_pushdown_narrows_the_planned_ranges(cluster, bootstrap, session):
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In, LessThan

    topic = "pushdown"
    create_topic(cluster, topic, 3)
    old = session.range(0, 300, 1, 1).selectExpr(
        "cast(id as string) as value", "cast(id % 3 as int) as partition",
        "timestamp'2020-01-01 00:00:00' as timestamp",
    )  # fmt: skip
    new = session.range(300, 600, 1, 1).selectExpr(
        "cast(id as string) as value", "cast(id % 3 as int) as partition",
        "timestamp'2024-01-01 00:00:00' as timestamp",
    )  # fmt: skip
    _write(old, bootstrap, topic)
    _write(new, bootstrap, topic)
    options = {"bootstrap.servers": bootstrap, "subscribe": topic}

    def planned(filters):
        reader = QuorumLogFilteringReader(options, source_schema())
        assert list(reader.pushFilters(filters)) == filters  # Spark still re-checks them
        return sorted(reader.partitions(), key=lambda r: r.partition)

    assert planned([]) == [OffsetRange(topic, p, 0, 200) for p in range(3)]
    assert planned([EqualTo(("partition",), 1), GreaterThanOrEqual(("offset",), 50)]) == [
        OffsetRange(topic, 1, 50, 200)
    ]
    assert planned([In(("partition",), (0, 2)), LessThan(("offset",), 7)]) == [
        OffsetRange(topic, 0, 0, 7), OffsetRange(topic, 2, 0, 7)
    ]  # fmt: skip
    since = datetime.datetime(2023, 6, 1)
    assert planned([GreaterThanOrEqual(("timestamp",), since)]) == [
        OffsetRange(topic, p, 100, 200) for p in range(3)
    ]
    # Through Spark: the same narrowing decides how many tasks run.
    df = _read(session, bootstrap, topic, pushFilters="true").where(
        "partition = 1 and offset >= 150"
    )
    assert df.rdd.getNumPartitions() == 1
    assert sorted(r.offset for r in df.collect()) == list(range(150, 200))
    recent = _read(session, bootstrap, topic, pushFilters="true").where(
        "timestamp >= timestamp'2023-06-01 00:00:00'"
    )
    assert sorted(int(bytes(r.value)) for r in recent.collect()) == list(range(300, 600))
    plain = _read(session, bootstrap, topic, includeHeaders="false")
    assert "headers" not in plain.columns and plain.count() == 600
    unpushed = _read(session, bootstrap, topic).where("partition = 1 and offset >= 150")
    assert unpushed.rdd.getNumPartitions() == 3 and unpushed.count() == 50


def test_task_retry_after_partial_write_loses_nothing(cluster, bootstrap, session):
    """Task 0's first attempt fails in its input (a mapInPandas that raises after 3000 of
    its 4000 rows) after the writer, which runs a batch behind, had sent part of them; Spark
    retries the task. Every row arrives; the only duplicates are the records the failed
    attempt had acknowledged (whole 1000-row Arrow batches from the task's start), each once
    more."""
    import pandas as pd

    topic = "retry"
    create_topic(cluster, topic, PARTITIONS)

    def fail_once(batches):
        from pyspark import TaskContext

        context = TaskContext.get()
        fail = context.partitionId() == 0 and context.attemptNumber() == 0
        sent = 0
        for batch in batches:  # 1000 rows each (maxRecordsPerBatch)
            if fail and sent >= 3000:
                raise RuntimeError("injected failure in the first attempt of task 0")
            sent += len(batch)
            yield pd.DataFrame({"key": batch["key"], "value": batch["value"]})

    # 200-byte values: a batch (~200 KB) does not sit in a 64 KB stream buffer in the JVM
    df = session.range(0, 8000, 1, 2).selectExpr(
        "cast(id as string) as key", "concat('v', lpad(cast(id as string), 200, '0')) as value"
    )
    failing = df.mapInPandas(fail_once, "key string, value string")
    # arrowGatherBytes 0: each Arrow batch handed over as it comes (the default gathers 4 MiB
    # first, more than this task's rows before the failure)
    _write(failing, bootstrap, topic, arrowGatherBytes="0")
    values = [bytes(r.value).decode() for r in _read(session, bootstrap, topic).collect()]
    counts: dict[str, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    assert sorted(int(v[1:]) for v in counts) == list(range(8000)), "a record was lost"
    duplicated = sorted(int(v[1:]) for v, n in counts.items() if n > 1)
    assert all(n <= 2 for n in counts.values())
    # range(0, 8000, 1, 2): task 0 holds ids 0..3999, in batches of 1000
    assert len(duplicated) in (1000, 2000, 3000), len(duplicated)
    assert duplicated == list(range(len(duplicated)))
    print(f"the failed attempt left {len(duplicated)} acknowledged records behind")


def test_bad_input_fails_clearly_before_sending(cluster, bootstrap, session):
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    topic = "badinput"
    create_topic(cluster, topic, 2)
    errors = (PySparkException, Py4JJavaError)
    wrong_type = session.range(0, 10).selectExpr("id as value")
    with pytest.raises(errors, match="column 'value' must be string or binary, got bigint"):
        _write(wrong_type, bootstrap, topic)
    with pytest.raises(errors, match="required column 'value'"):
        _write(session.range(0, 10).selectExpr("cast(id as string) as key"), bootstrap, topic)
    with pytest.raises(errors, match="no topic"):
        _write(session.range(0, 10).selectExpr("cast(id as string) as value"), bootstrap)
    with pytest.raises(errors, match="column 'partition' must be int"):
        bad = session.range(0, 10).selectExpr("cast(id as string) as value", "id as partition")
        _write(bad, bootstrap, topic)
    with_null = session.range(0, 100, 1, 1).selectExpr(
        "case when id = 57 then null else cast(id as string) end as value"
    )
    for writer in ("arrow", "row"):
        with pytest.raises(errors, match="null 'value'"):
            _write(with_null, bootstrap, topic, writer=writer)
    with pytest.raises(errors, match="linger.ms: expected an integer"):
        _write(session.range(1).selectExpr("'x' as value"), bootstrap, topic,
               **{"producer.linger.ms": "soon"})  # fmt: skip
    assert _high_watermarks(bootstrap, topic) == {0: 0, 1: 0}, "nothing may have been sent"
    _write(session.range(0, 0, 1, 2).selectExpr("'x' as value"), bootstrap, topic)  # empty: ok
    assert _high_watermarks(bootstrap, topic) == {0: 0, 1: 0}


def test_streaming_round_trip_resumes_from_the_checkpoint(cluster, bootstrap, session, tmp_path):
    source, sink = "stream-in", "stream-out"
    create_topic(cluster, source, 2)
    create_topic(cluster, sink, 2)
    checkpoint = str(tmp_path / "checkpoint")

    def run_query():
        stream = (
            session.readStream.format("quorumlog")
            .option("bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "150")
            .option("minOffsetsPerTrigger", "100")  # Trigger.AvailableNow reads all anyway
            .option("maxTriggerDelay", "1h")
            .load()
            .selectExpr("key", "concat(value, cast('!' as binary)) as value")
        )
        query = (
            stream.writeStream.format("quorumlog")
            .option("bootstrap.servers", bootstrap)
            .option("topic", sink)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None
        return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]

    first = session.range(0, 400, 1, 2).selectExpr(
        "cast(id as string) as key", "cast(id as string) as value"
    )
    _write(first, bootstrap, source)
    batches = run_query()
    assert sum(batches) == 400 and max(batches) <= 150, batches
    second = session.range(400, 500, 1, 1).selectExpr(
        "cast(id as string) as key", "cast(id as string) as value"
    )
    _write(second, bootstrap, source)
    assert sum(run_query()) == 100  # resumed from the checkpoint: only the new records
    out = sorted(bytes(r.value).decode() for r in _read(session, bootstrap, sink).collect())
    assert out == sorted(f"{i}!" for i in range(500))
    shutil.rmtree(checkpoint, ignore_errors=True)


@pytest.fixture(scope="module")
def retention_broker(tmp_path_factory):
    """One in-process KafkaServer (tests/broker's single-node stand-in) on a trio thread, so
    that the test can run retention now (a node runs it every 5 minutes)."""
    import importlib.util
    import threading

    import trio

    path = Path(__file__).resolve().parents[1] / "broker" / "conftest.py"
    spec = importlib.util.spec_from_file_location("spark_tests_broker_harness", path)
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    tmp_path = tmp_path_factory.mktemp("retention-broker")
    ready = threading.Event()
    box: dict = {}

    async def main():
        async with trio.open_nursery() as nursery:
            box["broker"] = await harness.start_broker(nursery, tmp_path)
            box["token"] = trio.lowlevel.current_trio_token()
            box["stop"] = trio.Event()
            ready.set()
            await box["stop"].wait()
            nursery.cancel_scope.cancel()

    thread = threading.Thread(target=trio.run, args=(main,), daemon=True)
    thread.start()
    assert ready.wait(30)
    yield box
    trio.from_thread.run_sync(box["stop"].set, trio_token=box["token"])
    thread.join(30)


def test_fail_on_data_loss_after_retention_deleted_records(session, retention_broker):
    import functools
    import time

    import trio
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    broker, token = retention_broker["broker"], retention_broker["token"]
    topic = "lossy"
    configs = {"segment.bytes": "2048", "retention.bytes": "8192"}
    trio.from_thread.run(
        functools.partial(broker.create_topic, topic, 1, **configs), trio_token=token
    )
    bootstrap = broker.bootstrap
    df = session.range(0, 2000, 1, 1).selectExpr("cast(id as string) as value")
    errors = (PySparkException, Py4JJavaError)
    # A batch larger than segment.bytes is refused: the task names the partition and cause.
    with pytest.raises(errors, match=r"lossy-0: RecordListTooLargeError"):
        _write(df, bootstrap, topic)
    _write(df, bootstrap, topic, **{"producer.batch.size": "1024"})

    def retention():
        return broker.server.log_manager.cleanup_logs(int(time.time() * 1000))

    assert trio.from_thread.run_sync(retention, trio_token=token) > 0
    options = {"bootstrap.servers": bootstrap, "subscribe": topic}
    (planned,) = plan_offset_ranges(parse_read_options(options))  # earliest: the log start
    log_start, high_watermark = planned.start_offset, planned.end_offset
    assert 0 < log_start < high_watermark == 2000
    from_zero = {"startingOffsets": '{"lossy": {"0": 0}}'}
    with pytest.raises(errors, match="were deleted"):
        _read(session, bootstrap, topic, **from_zero).count()
    rows = _read(session, bootstrap, topic, failOnDataLoss="false", **from_zero).collect()
    assert sorted(r.offset for r in rows) == list(range(log_start, 2000))
    assert sorted(int(bytes(r.value)) for r in rows) == list(range(log_start, 2000))


def test_pipeline_writes_reads_back_and_verifies(cluster, bootstrap, session, tmp_path, capsys):
    """spark/pipeline.py's steps on a CSV file (the synthetic-events default shares everything
    after loading), in the tests' session: `quorumlog demo` (tests/cli/test_demo.py) runs the
    pipeline as users do, in a process and SparkSession of its own."""
    from spark import pipeline

    csv = tmp_path / "people.csv"
    csv.write_text("name,age\n" + "".join(f"p{i},{i % 90}\n" for i in range(300)))
    args = pipeline.parse_args(
        ["--bootstrap", bootstrap, "--topic", "pipeline", "--partitions", "3", "--input", str(csv)]
    )
    result = pipeline.verify_run(args, session)
    pipeline.print_verification(result, args.topic, args.writer)
    assert result.ok, capsys.readouterr().out
    assert (result.written, result.read, result.duplicates, result.missing) == (300, 300, 0, 0)
    assert "OK: every record once" in capsys.readouterr().out
    assert sum(_high_watermarks(bootstrap, "pipeline").values()) == 300
    assert session.range(3).count() == 3  # the tests' session is still running


def test_retention_between_planning_and_reading(session, retention_broker):
    """The executor's side of failOnDataLoss: a planned range whose start is deleted before
    the task fetches it (read_range, as an executor runs it)."""
    import functools
    import time

    import trio

    from spark.offset_ranges import QuorumLogDataLossError
    from spark.reader import read_range

    broker, token = retention_broker["broker"], retention_broker["token"]
    topic = "lossy-late"
    configs = {"segment.bytes": "2048", "retention.bytes": "8192"}
    trio.from_thread.run(
        functools.partial(broker.create_topic, topic, 1, **configs), trio_token=token
    )
    df = session.range(0, 1000, 1, 1).selectExpr("cast(id as string) as value")
    _write(df, broker.bootstrap, topic, **{"producer.batch.size": "1024"})
    options = parse_read_options({"bootstrap.servers": broker.bootstrap, "subscribe": topic})
    (planned,) = plan_offset_ranges(options)
    assert planned == OffsetRange(topic, 0, 0, 1000)

    def retention():
        return broker.server.log_manager.cleanup_logs(int(time.time() * 1000))

    assert trio.from_thread.run_sync(retention, trio_token=token) > 0
    with pytest.raises(QuorumLogDataLossError, match="offset 0 was deleted"):
        list(read_range(broker.bootstrap, planned, True))
    batches = list(read_range(broker.bootstrap, planned, False))
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    assert offsets and offsets == list(range(offsets[0], 1000)) and offsets[0] > 0


def test_log_append_time_topic_reads_timestamp_type_1_and_the_append_time(
    cluster, bootstrap, session
):
    import trio

    from producer.fetch_client import FetchClient
    from producer.producer import Producer

    topic = "log-append-time"
    create_topic(cluster, topic, 1, **{"message.timestamp.type": "LogAppendTime"})

    async def produce_and_fetch():
        async with Producer(bootstrap, linger_ms=2) as producer:
            for i in range(50):
                await producer.send(topic, b"v%d" % i, partition=0, timestamp_ms=1000 + i)
            await producer.flush()
        async with FetchClient(bootstrap) as client:
            return await client.read_all(topic, 0, 0, 50)

    fetched = trio.run(produce_and_fetch)
    assert {r.timestamp_type for r in fetched} == {1}
    rows = _read(session, bootstrap, topic).orderBy("offset").collect()
    assert [bytes(r.value) for r in rows] == [b"v%d" % i for i in range(50)]
    assert {r.timestampType for r in rows} == {1}
    append_ms = [round(r.timestamp.timestamp() * 1000) for r in rows]  # naive local, like Spark
    assert append_ms == [r.timestamp_ms for r in fetched]  # the broker's, not the producer's
    assert min(append_ms) > 1_000_000
