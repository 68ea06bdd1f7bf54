"""Offset planning, option parsing and the streaming rate limit: plain functions, no Spark
session and no cluster (pyspark is imported for its InputPartition/Filter classes only)."""

from __future__ import annotations

import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from pyspark.sql.datasource import EqualTo, GreaterThan, In, LessThanOrEqual  # noqa: E402

from spark.offset_ranges import (  # noqa: E402
    OffsetBounds,
    OffsetRange,
    PartitionOffsets,
    QuorumLogDataLossError,
    narrow_ranges,
    resolve_ranges,
    split_ranges,
)
from spark.options import (  # noqa: E402
    EARLIEST,
    LATEST,
    QuorumLogOptionError,
    parse_read_options,
    parse_write_options,
)
from spark.reader import apply_filter  # noqa: E402
from spark.stream_reader import limit_offsets, wait_for_more  # noqa: E402

pytestmark = pytest.mark.spark

OFFSETS = {("t", 0): PartitionOffsets(10, 100), ("t", 1): PartitionOffsets(0, 50)}


def test_resolve_ranges_earliest_latest_and_json():
    assert resolve_ranges(OFFSETS, EARLIEST, LATEST, True) == [
        OffsetRange("t", 0, 10, 100), OffsetRange("t", 1, 0, 50)
    ]  # fmt: skip
    assert resolve_ranges(OFFSETS, {"t": {0: 20, 1: LATEST}}, {"t": {0: 30}}, True) == [
        OffsetRange("t", 0, 20, 30), OffsetRange("t", 1, 50, 50)
    ]  # fmt: skip
    assert resolve_ranges(OFFSETS, EARLIEST, {"t": {0: 10_000}}, True)[0].end_offset == 100


def test_start_below_the_log_start_is_data_loss_unless_allowed():
    with pytest.raises(QuorumLogDataLossError, match="t-0: offsets 0..9 were deleted"):
        resolve_ranges(OFFSETS, {"t": {0: 0}}, LATEST, True)
    assert resolve_ranges(OFFSETS, {"t": {0: 0}}, LATEST, False)[0].start_offset == 10
    with pytest.raises(ValueError, match="past the high watermark"):
        resolve_ranges(OFFSETS, {"t": {1: 60}}, LATEST, True)


def test_split_follows_kafka_offset_range_calculator():
    ranges = [OffsetRange("t", 0, 0, 900), OffsetRange("t", 1, 0, 100), OffsetRange("t", 2, 5, 5)]
    assert split_ranges(ranges, None) == ranges[:2]
    assert split_ranges(ranges, 2) == ranges[:2]
    assert split_ranges(ranges, 10) == [
        *(OffsetRange("t", 0, s, s + 100) for s in range(0, 900, 100)),
        OffsetRange("t", 1, 0, 100),
    ]


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 5000), min_size=1, max_size=8),
    min_partitions=st.integers(1, 64),
    max_records=st.none() | st.integers(1, 3000),
)
@example(sizes=[1], min_partitions=2, max_records=1)  # more pieces than records (found once)
def test_split_covers_every_offset_exactly_once(sizes, min_partitions, max_records):
    ranges = [OffsetRange("t", p, 7, 7 + size) for p, size in enumerate(sizes)]
    pieces = split_ranges(ranges, min_partitions, max_records)
    if max_records is not None:  # maxRecordsPerPartition: no piece above it
        assert all(0 < r.size <= max_records for r in pieces)
    for p, size in enumerate(sizes):
        mine = sorted((r.start_offset, r.end_offset) for r in pieces if r.partition == p)
        covered = [o for s, e in mine for o in range(s, e)]
        assert covered == list(range(7, 7 + size))
    if sum(1 for s in sizes if s) < min_partitions:
        assert len(pieces) >= sum(1 for s in sizes if s)


def test_filters_narrow_partitions_and_offsets():
    bounds = OffsetBounds()
    assert apply_filter(bounds, In(("partition",), (1, 3)))
    assert apply_filter(bounds, GreaterThan(("offset",), 19))
    assert apply_filter(bounds, LessThanOrEqual(("offset",), 40))
    assert not apply_filter(bounds, EqualTo(("value",), b"x"))
    assert not apply_filter(bounds, EqualTo(("offset",), "12"))
    ranges = [OffsetRange("t", p, 0, 30) for p in range(4)]
    assert narrow_ranges(ranges, bounds) == [
        OffsetRange("t", 1, 20, 30),
        OffsetRange("t", 3, 20, 30),
    ]
    bounds = OffsetBounds(low_timestamp_ms=5)
    by_time = {("t", 0): 12, ("t", 1): -1, ("t", 2): 0, ("t", 3): 40}
    assert narrow_ranges(ranges, bounds, by_time) == [
        OffsetRange("t", 0, 12, 30), OffsetRange("t", 2, 0, 30)
    ]  # fmt: skip


def test_read_options_follow_spark_sql_kafka():
    options = parse_read_options(
        {"bootstrap.servers": "h:1", "assign": '{"a": [1, 0]}', "startingoffsets": "earliest",
         "endingoffsets": '{"a": {"0": 5, "1": -1}}', "minpartitions": "8",
         "failondataloss": "false"}
    )  # fmt: skip
    assert options.assign == {"a": (0, 1)} and options.starting == EARLIEST
    assert options.ending == {"a": {0: 5, 1: LATEST}} and options.min_partitions == 8
    assert not options.fail_on_data_loss and options.topics == ("a",)
    bad = [
        ({"subscribe": "a"}, "bootstrap.servers is required"),
        ({"bootstrap.servers": "h:1"}, "exactly one of"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "assign": "{}"}, "exactly one of"),
        ({"bootstrap.servers": "h:1", "assign": "[1]"}, "option assign"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "endingoffsets": "earliest"}, "earliest"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "startingoffsets": "{x"}, "JSON"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "minpartitions": "0"}, "minPartitions"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "failondataloss": "1"}, "failOnData"),
    ]
    for raw, message in bad:
        with pytest.raises(QuorumLogOptionError, match=message):
            parse_read_options(raw)


def test_write_options_pass_producer_settings_to_producer_config():
    options = parse_write_options(
        {"bootstrap.servers": "h:1", "topic": "t", "producer.linger.ms": "20",
         "producer.acks": "all", "writer": "row"}
    )  # fmt: skip
    assert options.producer_properties == {"linger.ms": "20", "acks": "all"}
    assert options.writer_kind == "row" and options.topic == "t"
    for raw, message in [
        ({"bootstrap.servers": "h:1", "producer.no.such": "1"}, "unknown producer"),
        ({"bootstrap.servers": "h:1", "producer.acks": "2"}, "acks"),
        ({"bootstrap.servers": "h:1", "writer": "pandas"}, "option writer"),
        ({"bootstrap.servers": "h:1", "topic": " "}, "option topic"),
    ]:
        with pytest.raises(QuorumLogOptionError, match=message):
            parse_write_options(raw)


def test_stream_limit_shares_the_budget_by_lag():
    start = {"t": {"0": 0, "1": 100, "2": 7}}
    latest = {"t": {"0": 300, "1": 200, "2": 7}}
    assert limit_offsets(start, latest, 1000) == latest
    assert limit_offsets(start, latest, 40) == {"t": {"0": 30, "1": 110, "2": 7}}
    rng = random.Random(7)
    for _ in range(200):
        lags = [rng.randrange(0, 50) for _ in range(4)]
        start = {"t": {str(p): 10 for p in range(4)}}
        latest = {"t": {str(p): 10 + lag for p, lag in enumerate(lags)}}
        budget = rng.randrange(1, 120)
        end = limit_offsets(start, latest, budget)
        taken = [end["t"][str(p)] - 10 for p in range(4)]
        assert all(0 <= t <= lag for t, lag in zip(taken, lags, strict=True))
        assert sum(taken) == min(budget, sum(lags)), (lags, budget, taken)


READ = {"kafka.bootstrap.servers": "h:1", "subscribe": "a"}


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({**READ, "subscibe": "b"}, False, "'subscibe'.*did you mean 'subscribe'"),
        ({**READ, "startingoffset": "earliest"}, False, "did you mean 'startingOffsets'"),
        ({**READ, "failondatalos": "false"}, True, "did you mean 'failOnDataLoss'"),
        ({**READ, "includeheader": "true"}, False, "did you mean 'includeHeaders'"),
        ({**READ, "maxoffsetspertrigger": "5"}, False, "not an option of a batch read"),
        ({**READ, "endingoffsets": "latest"}, True, "not an option of a streaming read"),
        ({**READ, "nonsense": "1"}, False, "unknown option 'nonsense'"),
        ({**READ, "kafka.sesion.timeout.ms": "5"}, False, "kafka.sesion.timeout.ms: not a con"),
        ({**READ, "kafka.request.timout.ms": "5"}, False, "did you mean 'kafka.request.timeo"),
        ({**READ, "kafka.auto.offset.reset": "x"}, False, "auto.offset.reset.*startingOffsets"),
        ({**READ, "kafka.isolation.level": "serializable"}, False, "isolation.level: expected"),
        ({**READ, "startingtimestamp": "x"}, False, "startingTimestamp: expected an integer"),
        ({**READ, "endingoffsetsbytimestamp": "{"}, False, "endingOffsetsByTimestamp: exp"),
        ({**READ, "startingoffsetsbytimestampstrategy": "x"}, False, "Strategy: expected"),
        ({**READ, "maxrecordsperpartition": "0"}, False, "maxRecordsPerPartition"),
        ({**READ, "maxtriggerdelay": "5 parsecs"}, True, "maxTriggerDelay: expected a dur"),
        ({**READ, "minoffsetspertrigger": "9", "maxoffsetspertrigger": "5"}, True, "<="),
        ({**READ, "subscribepattern": "a"}, False, "exactly one of"),
        ({"kafka.bootstrap.servers": "h:1", "subscribepattern": "(x"}, False, "bad regex"),
        ({**READ, "bootstrap.servers": "other:2"}, False, "disagree"),
        ({**READ, "path": "/tmp/x"}, False, "unknown option 'path'"),
    ],
)
def test_unknown_or_misspelt_read_options_are_errors_naming_them(options, streaming, message):
    with pytest.raises(QuorumLogOptionError, match=message):
        parse_read_options(options, streaming=streaming)


def test_spark_sql_kafka_read_options_are_understood():
    options = parse_read_options(
        {"kafka.bootstrap.servers": "h:1", "subscribepattern": "ev.*", "kafka.group.id": "g",
         "groupidprefix": "spark-kafka", "kafka.client.id": "c", "kafka.request.timeout.ms": "7000",
         "kafka.fetch.max.wait.ms": "50", "kafka.security.protocol": "PLAINTEXT",
         "startingtimestamp": "1000", "startingoffsetsbytimestamp": '{"ev": {"0": 5}}',
         "endingoffsetsbytimestamp": '{"ev": {"0": 9000}}', "includeheaders": "true",
         "startingoffsetsbytimestampstrategy": "latest", "maxrecordsperpartition": "100",
         "kafkaconsumer.polltimeoutms": "9000", "fetchoffset.numretries": "4"}
    )  # fmt: skip
    assert options.subscribe_pattern == "ev.*" and options.subscribe is None
    assert options.starting_timestamps == 1000  # startingTimestamp wins, as in Spark
    assert options.ending_timestamps == {"ev": {0: 9000}}
    assert options.timestamp_strategy == "latest" and options.include_headers
    assert options.max_records_per_partition == 100
    assert options.client_settings == {
        "client_id": "c", "request_timeout_ms": 7000, "max_wait_ms": 50, "max_attempts": 4,
        "isolation_level": 1,  # read_committed unless kafka.isolation.level says otherwise
    }  # fmt: skip
    uncommitted = parse_read_options({**READ, "kafka.isolation.level": "read_uncommitted"})
    assert uncommitted.client_settings["isolation_level"] == 0
    stream = parse_read_options(
        {**READ, "minoffsetspertrigger": "10", "maxtriggerdelay": "30s",
         "maxoffsetspertrigger": "100"},
        streaming=True,
    )  # fmt: skip
    assert (stream.min_offsets_per_trigger, stream.max_trigger_delay_ms) == (10, 30_000)
    assert parse_read_options(READ).include_headers is False  # spark-sql-kafka's default


WRITE = {"kafka.bootstrap.servers": "h:1", "topic": "t"}


def test_write_options_take_kafka_names_and_refuse_unknown_ones():
    options = parse_write_options({**WRITE, "kafka.linger.ms": "20", "kafka.acks": "all"})
    assert options.producer_properties == {"linger.ms": "20", "acks": "all"}
    assert options.bootstrap_servers == "h:1"
    for raw, message in [
        ({**WRITE, "kafka.liner.ms": "5"}, "kafka.liner.ms.*did you mean 'kafka.linger.ms'"),
        ({**WRITE, "producer.liner.ms": "5"}, "did you mean 'producer.linger.ms'"),
        ({**WRITE, "kafka.value.serializer": "x"}, "kafka.value.serializer: not supported"),
        ({**WRITE, "topc": "x"}, "'topc'.*did you mean 'topic'"),
        ({**WRITE, "subscribe": "x"}, "not an option of a write"),
        ({**WRITE, "kafka.acks": "1", "producer.acks": "all"}, "disagree"),
        ({**WRITE, "kafka.acks": "1", "kafka.enable.idempotence": "true"}, "acks"),
    ]:
        with pytest.raises(QuorumLogOptionError, match=message):
            parse_write_options(raw)


def test_min_offsets_per_trigger_waits_until_max_trigger_delay():
    assert not wait_for_more(5, None, 0, 1000)  # no minimum: every trigger reads
    assert wait_for_more(5, 10, 999, 1000)  # too few, not waited long enough: skip
    assert not wait_for_more(5, 10, 1000, 1000)  # maxTriggerDelay passed: read the 5
    assert not wait_for_more(10, 10, 0, 1000)  # enough
    assert not wait_for_more(0, 10, 0, 1000)  # nothing new: no batch either way
