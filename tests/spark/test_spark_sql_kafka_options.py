"""A job written for spark-sql-kafka-0-10 runs against quorumlog with only the format name
changed: its option names (kafka.*, subscribePattern, the timestamp options, includeHeaders,
maxRecordsPerPartition, groupIdPrefix, kafka.group.id), its columns, and no register() call
(the session of tests/spark/spark_harness.py registers nothing). Real local Spark, real
3-node cluster."""

from __future__ import annotations

import datetime

import pytest
from spark_harness import create_topic

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]

T0_MS = 1_700_000_000_000  # the first row's timestamp; row i is written at T0_MS + i seconds
ROWS = 120


def _spark_errors():
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    return (PySparkException, Py4JJavaError)


@pytest.fixture(scope="module")
def written(cluster, bootstrap, session):
    """Two topics matching `sqlk-ev-.*` (and one that does not), written the way a
    spark-sql-kafka job writes: kafka.* producer settings, topic/key/value/partition/headers/
    timestamp columns. Row i goes to partition i % 3 of topic sqlk-ev-(i % 2)."""
    for name in ("sqlk-ev-0", "sqlk-ev-1", "sqlk-other"):
        create_topic(cluster, name, 3)
    df = session.range(0, ROWS, 1, 1).selectExpr(  # one task: timestamps rise per partition
        "concat('sqlk-ev-', cast(id % 2 as string)) as topic",
        "concat('k', cast(id as string)) as key",
        "case when id % 10 = 3 then null else concat('k', cast(id as string)) end as key2",
        "cast(concat('v', cast(id as string)) as binary) as value",
        "cast(id % 3 as int) as partition",
        "array(named_struct('key', 'n', 'value', cast(cast(id as string) as binary)),"
        "      named_struct('key', 'empty', 'value', cast(null as binary))) as headers",
        f"timestamp_millis({T0_MS} + id * 1000) as timestamp",
    )
    df = df.drop("key").withColumnRenamed("key2", "key")  # some keys null
    (
        df.write.format("quorumlog")
        .mode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.acks", "all")
        .option("kafka.linger.ms", "5")
        .option("kafka.compression.type", "lz4")
        .save()
    )
    other = session.range(0, 5).selectExpr("cast(id as string) as value")
    (
        other.write.format("quorumlog")
        .mode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", "sqlk-other")
        .save()
    )
    return bootstrap


def _load(session, bootstrap, **options):
    reader = session.read.format("quorumlog").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _ids(rows) -> list[int]:
    return sorted(int(bytes(r.value).decode()[1:]) for r in rows)


def test_spark_sql_kafka_read_with_pattern_headers_and_group_options(session, written):
    df = _load(
        session, written, subscribePattern="sqlk-ev-.*", includeHeaders="true",
        startingOffsets="earliest", endingOffsets="latest", failOnDataLoss="true",
        groupIdPrefix="spark-kafka-source", **{"kafka.group.id": "analytics",
                                               "kafka.request.timeout.ms": "20000"},
    )  # fmt: skip
    assert df.columns == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"
    ]  # fmt: skip
    rows = df.collect()
    assert _ids(rows) == list(range(ROWS))  # sqlk-other does not match the pattern
    for r in rows:
        i = int(bytes(r.value).decode()[1:])
        assert (r.topic, r.partition) == (f"sqlk-ev-{i % 2}", i % 3)
        assert r.key is None if i % 10 == 3 else bytes(r.key) == f"k{i}".encode()
        assert [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers] == [
            ("n", str(i).encode()),
            ("empty", None),
        ]
        stamp = r.timestamp.replace(tzinfo=None) if r.timestamp.tzinfo else r.timestamp
        expected = datetime.datetime.fromtimestamp((T0_MS + i * 1000) / 1000)
        assert stamp == expected and r.timestampType == 0
    by_partition: dict[tuple[str, int], list[int]] = {}
    for r in sorted(rows, key=lambda r: r.offset):
        by_partition.setdefault((r.topic, r.partition), []).append(int(bytes(r.value)[1:]))
    for found in by_partition.values():  # the (one) task's rows in its order, per partition
        assert found == sorted(found)
    plain = _load(session, written, subscribe="sqlk-ev-0,sqlk-ev-1")
    assert "headers" not in plain.columns  # spark-sql-kafka's default: includeHeaders=false
    assert plain.count() == ROWS


def test_timestamp_options_choose_the_offsets(session, written):
    def ids(**options):
        return _ids(_load(session, written, subscribePattern="sqlk-ev-.*", **options).collect())

    assert ids(startingTimestamp=str(T0_MS + 50_000)) == list(range(50, ROWS))
    assert ids(endingTimestamp=str(T0_MS + 80_000)) == list(range(80))
    both = ids(startingTimestamp=str(T0_MS + 50_000), endingTimestamp=str(T0_MS + 80_000))
    assert both == list(range(50, 80))
    per_partition = {f"sqlk-ev-{t}": {str(p): T0_MS for p in range(3)} for t in range(2)}
    per_partition["sqlk-ev-1"]["2"] = T0_MS + 100_000  # topic 1 partition 2: ids from 100
    import json

    chosen = ids(startingOffsetsByTimestamp=json.dumps(per_partition))
    assert chosen == [i for i in range(ROWS) if not (i % 2 == 1 and i % 3 == 2 and i < 100)]
    # startingTimestamp wins over startingOffsetsByTimestamp and startingOffsets
    assert ids(
        startingTimestamp=str(T0_MS + 110_000),
        startingOffsetsByTimestamp=json.dumps(per_partition),
        startingOffsets="earliest",
    ) == list(range(110, ROWS))
    after_all = str(T0_MS + 10 * ROWS * 1000)
    with pytest.raises(_spark_errors(), match="no record with a timestamp >="):
        ids(startingTimestamp=after_all)
    assert ids(startingTimestamp=after_all, startingOffsetsByTimestampStrategy="latest") == []
    with pytest.raises(_spark_errors(), match="must name exactly the partitions read"):
        ids(startingOffsetsByTimestamp=json.dumps({"sqlk-ev-0": {"0": T0_MS}}))


def test_max_records_per_partition_and_min_partitions_split_the_read(session, written):
    df = _load(session, written, assign='{"sqlk-ev-0": [0, 1, 2]}', maxRecordsPerPartition="7")
    assert df.rdd.getNumPartitions() == 3 * 3  # 20 records per partition -> 3 pieces of <= 7
    assert _ids(df.collect()) == list(range(0, ROWS, 2))


def test_unknown_and_misspelt_options_fail_the_query_naming_them(session, written, tmp_path):
    errors = _spark_errors()
    read = {"subscribe": "sqlk-ev-0"}
    for options, message in [
        (
            {**read, "startingOffset": "earliest"},
            "'startingoffset'.*did you mean 'startingOffsets'",
        ),
        ({"subscibe": "sqlk-ev-0"}, "'subscibe'.*did you mean 'subscribe'"),
        ({**read, "kafka.max.poll.records": "5"}, "kafka.max.poll.records"),
        ({**read, "maxOffsetsPerTrigger": "5"}, "not an option of a batch read"),
    ]:
        with pytest.raises(errors, match=message):
            _load(session, written, **options).collect()
    df = session.range(0, 3).selectExpr("cast(id as string) as value")
    for options, message in [
        ({"topic": "sqlk-other", "kafka.lingerms": "5"}, "did you mean 'kafka.linger.ms'"),
        ({"topik": "sqlk-other"}, "'topik'.*did you mean 'topic'"),
    ]:
        writer = df.write.format("quorumlog").mode("append")
        writer = writer.option("kafka.bootstrap.servers", written)
        for key, value in options.items():
            writer = writer.option(key, value)
        with pytest.raises(errors, match=message):
            writer.save()
    stream = session.readStream.format("quorumlog").option("kafka.bootstrap.servers", written)
    stream = stream.option("subscribe", "sqlk-ev-0").option("maxOffsetPerTrigger", "5").load()
    with pytest.raises(errors, match="did you mean 'maxOffsetsPerTrigger'"):
        query = (
            stream.writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination(120)
        finally:
            query.stop()


def test_topic_option_overrides_the_topic_column(cluster, session, written):
    create_topic(cluster, "sqlk-override", 1)
    df = session.range(0, 10).selectExpr("'sqlk-other' as topic", "cast(id as string) as value")
    (
        df.write.format("quorumlog")
        .mode("append")
        .option("kafka.bootstrap.servers", written)
        .option("topic", "sqlk-override")
        .save()
    )
    got = _load(session, written, subscribe="sqlk-override").collect()
    assert sorted(int(bytes(r.value)) for r in got) == list(range(10))
    assert _load(session, written, subscribe="sqlk-other").count() == 5  # unchanged
