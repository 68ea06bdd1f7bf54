"""Reading quorumlog topics into Spark: the batch reader (planning on the driver, fetching on
executors) and the filter pushdown that narrows offset ranges before anything is fetched.

Planning (`partitions()`, in the driver's planner worker): one FetchClient session lists the
topic-partitions (Metadata), their log start offsets and high watermarks (ListOffsets), and,
for a pushed `timestamp >= T` filter, the first offset at or after T (ListOffsets by time);
`spark.offset_ranges` turns those into OffsetRange input partitions.

Reading (`read(range)`, in an executor): a thread runs a trio FetchClient loop from the range's
start to its end (never past the high watermark seen at planning time) and hands decoded
records, chunk by chunk, through a bounded queue to the generator, which yields Arrow
RecordBatches in exactly the declared schema. Closing the generator early (`limit`) cancels
the fetch loop. If the start was deleted by retention meanwhile (OFFSET_OUT_OF_RANGE),
failOnDataLoss decides: raise, or continue from the log start offset.

Pushed filters (Spark's `pushFilters`, enabled by spark.sql.python.filterPushdown.enabled):
`partition` =, IN, <, <=, >, >=; `offset` =, IN, <, <=, >, >=; `timestamp` >, >= (a lower
bound is exact: ListOffsets by time returns the first offset whose timestamp >= T, so every
earlier record is older; an upper bound on timestamps would not be, records are not sorted by
time). All filters are also returned to Spark, which re-checks them on the rows.
"""

from __future__ import annotations

import datetime
import queue
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pyspark.sql.datasource import (
    DataSourceReader,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from spark.offset_ranges import (
    OffsetBounds,
    OffsetRange,
    PartitionOffsets,
    QuorumLogDataLossError,
    narrow_ranges,
    resolve_ranges,
    split_ranges,
)
from spark.options import QuorumLogOptionError, ReadOptions, parse_read_options
from spark.schema import arrow_source_schema

READ_CHUNK_RECORDS = 10_000  # records per yielded Arrow batch (at most)
READ_QUEUE_CHUNKS = 4  # fetched chunks buffered ahead of Spark: the back-pressure bound
PLANNING_TIMEOUT_S = 60
INT64_MAX = 2**63 - 1


def unwrap(exc: BaseException) -> BaseException:
    """The one error inside trio's ExceptionGroup wrappers (nurseries wrap what they raise)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def run_trio(async_fn: Any) -> Any:
    """trio.run(async_fn), raising the underlying error rather than an ExceptionGroup."""
    import trio

    try:
        return trio.run(async_fn)
    except BaseExceptionGroup as group:
        error = unwrap(group)
        if error is group:
            raise
        raise error from None


# -- planning (driver) ---------------------------------------------------------------------------


async def partition_offsets(
    client: Any, options: ReadOptions
) -> dict[tuple[str, int], PartitionOffsets]:
    """The log start offset and high watermark, now, of every partition `options` name: the
    `assign`ed ones, else every partition of the subscribed topics, or of the topics matching
    subscribePattern now (batch and stream planning)."""
    return await fetch_partition_offsets(client, await _list_partitions(client, options))


async def _list_partitions(client: Any, options: ReadOptions) -> list[tuple[str, int]]:
    out = []
    if options.assign is not None:
        for topic, partitions in options.assign.items():
            count = await client.partition_count(topic)
            for p in partitions:
                if p >= count:
                    raise ValueError(f"assign: {topic}-{p} does not exist ({count} partitions)")
                out.append((topic, p))
        return out
    topics: Iterable[str] = options.topics if options.subscribe_pattern is None else ()
    if options.subscribe_pattern is not None:
        from spark.admin import list_topics

        pattern = re.compile(options.subscribe_pattern)
        topics = [t for t in await list_topics(options.bootstrap_servers) if pattern.fullmatch(t)]
    for topic in topics:
        count = await client.partition_count(topic)
        out.extend((topic, p) for p in range(count))
    return out


async def offsets_for_timestamps(
    client: Any,
    offsets: Mapping[tuple[str, int], PartitionOffsets],
    timestamps: int | Mapping[str, Mapping[int, int]],
    option: str,
    if_none: str,
) -> dict[str, dict[int, int]]:
    """Per partition the first offset whose timestamp is >= the partition's timestamp
    (ListOffsets by time). With per-partition timestamps every partition read must be named,
    as in spark-sql-kafka. No such record: the high watermark (`if_none` "latest") or an
    error naming the partition ("error")."""
    if not isinstance(timestamps, int):
        named = {(t, p) for t, ps in timestamps.items() for p in ps}
        if named != set(offsets):
            missing = sorted(set(offsets) - named)
            extra = sorted(named - set(offsets))
            raise QuorumLogOptionError(
                f"option {option}: must name exactly the partitions read; missing "
                f"{[f'{t}-{p}' for t, p in missing]}, not read {[f'{t}-{p}' for t, p in extra]}"
            )
    result: dict[str, dict[int, int]] = {}
    for (topic, p), known in sorted(offsets.items()):
        at = timestamps if isinstance(timestamps, int) else timestamps[topic][p]
        offset = await client.offset_for_time(topic, p, at)
        if offset < 0:
            if if_none == "error":
                raise QuorumLogOptionError(
                    f"option {option}: {topic}-{p} has no record with a timestamp >= {at} "
                    f"(set startingOffsetsByTimestampStrategy=latest to start at the end)"
                )
            offset = known.high_watermark
        result.setdefault(topic, {})[p] = offset
    return result


async def resolve_bounds(
    client: Any, options: ReadOptions, offsets: Mapping[tuple[str, int], PartitionOffsets]
) -> tuple[Any, Any]:
    """(starting, ending) for resolve_ranges: the timestamp options, when given, win over
    startingOffsets / endingOffsets, as in spark-sql-kafka."""
    starting, ending = options.starting, options.ending
    if options.starting_timestamps is not None:
        option = (
            "startingTimestamp"
            if isinstance(options.starting_timestamps, int)
            else "startingOffsetsByTimestamp"
        )
        starting = await offsets_for_timestamps(
            client, offsets, options.starting_timestamps, option, options.timestamp_strategy
        )
    if options.ending_timestamps is not None:
        option = (
            "endingTimestamp"
            if isinstance(options.ending_timestamps, int)
            else "endingOffsetsByTimestamp"
        )
        ending = await offsets_for_timestamps(
            client, offsets, options.ending_timestamps, option, "latest"
        )
    return starting, ending


async def fetch_partition_offsets(
    client: Any, partitions: list[tuple[str, int]]
) -> dict[tuple[str, int], PartitionOffsets]:
    result = {}
    for topic, p in partitions:
        result[(topic, p)] = PartitionOffsets(
            await client.earliest_offset(topic, p), await client.latest_offset(topic, p)
        )
    return result


def plan_offset_ranges(options: ReadOptions, bounds: OffsetBounds | None = None):
    """The OffsetRange list for a batch read (runs ListOffsets on the cluster)."""
    import trio

    from producer.fetch_client import FetchClient

    bounds = bounds or OffsetBounds()

    async def plan() -> list[OffsetRange]:
        with trio.fail_after(PLANNING_TIMEOUT_S):
            async with FetchClient(options.bootstrap_servers, **options.client_settings) as client:
                offsets = await partition_offsets(client, options)
                starting, ending = await resolve_bounds(client, options, offsets)
                ranges = resolve_ranges(offsets, starting, ending, options.fail_on_data_loss)
                by_time = None
                if bounds.low_timestamp_ms is not None:
                    by_time = {
                        (r.topic, r.partition): await client.offset_for_time(
                            r.topic, r.partition, bounds.low_timestamp_ms
                        )
                        for r in ranges
                    }
                return narrow_ranges(ranges, bounds, by_time)

    return split_ranges(run_trio(plan), options.min_partitions, options.max_records_per_partition)


def _to_ms(value: Any) -> int | None:
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)  # naive: local time, as Spark passes it
    if isinstance(value, datetime.date):
        return int(datetime.datetime(value.year, value.month, value.day).timestamp() * 1000)
    return None


def apply_filter(bounds: OffsetBounds, f: Any) -> bool:
    """Tighten `bounds` by one Spark filter; True if it was used."""
    if len(getattr(f, "attribute", ())) != 1:
        return False
    column = f.attribute[0]
    if column == "timestamp":
        value = _to_ms(getattr(f, "value", None))
        if value is None or not isinstance(f, GreaterThan | GreaterThanOrEqual):
            return False
        low = value + 1 if isinstance(f, GreaterThan) else value
        bounds.low_timestamp_ms = max(bounds.low_timestamp_ms or 0, low)
        return True
    if column not in ("partition", "offset"):
        return False
    if isinstance(f, In):
        values = [v for v in f.value if isinstance(v, int)]
        if len(values) != len(f.value):
            return False
        if column == "partition":
            bounds.restrict_partitions(values)
        elif values:
            bounds.low_offset = max(bounds.low_offset, min(values))
            bounds.high_offset = min(bounds.high_offset, max(values) + 1)
        else:
            bounds.high_offset = 0
        return True
    value = getattr(f, "value", None)
    if not isinstance(value, int) or isinstance(value, bool):
        return False
    # (low, high) as inclusive lower / exclusive upper bounds
    if isinstance(f, EqualTo):
        low, high = value, value + 1
    elif isinstance(f, GreaterThan):
        low, high = value + 1, INT64_MAX
    elif isinstance(f, GreaterThanOrEqual):
        low, high = value, INT64_MAX
    elif isinstance(f, LessThan):
        low, high = 0, value
    elif isinstance(f, LessThanOrEqual):
        low, high = 0, value + 1
    else:
        return False
    if column == "partition":
        bounds.low_partition = max(bounds.low_partition, low)
        bounds.high_partition = min(bounds.high_partition, high - 1)
    else:
        bounds.low_offset = max(bounds.low_offset, low)
        bounds.high_offset = min(bounds.high_offset, high)
    return True


# -- reading (executors) -------------------------------------------------------------------------

_DONE = object()


def _records_to_batch(topic: str, partition: int, records: list, schema: Any) -> Any:
    import pyarrow as pa

    count = len(records)
    timestamps_us = pa.array([r.timestamp_ms * 1000 for r in records], pa.int64())
    columns = [
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([topic] * count, pa.string()),
        pa.array([partition] * count, pa.int32()),
        pa.array([r.offset for r in records], pa.int64()),
        timestamps_us.cast(pa.timestamp("us", tz="UTC")),
        pa.array([r.timestamp_type for r in records], pa.int32()),  # 0 Create, 1 LogAppend
    ]
    if len(schema) == 8:
        columns.append(
            pa.array(
                [[{"key": h.key, "value": h.value} for h in r.headers] for r in records],
                schema.field("headers").type,
            )
        )
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def read_range(
    bootstrap_servers: str,
    part: OffsetRange,
    fail_on_data_loss: bool,
    include_headers: bool = False,
    client_settings: Mapping[str, Any] | None = None,
) -> Iterator[Any]:
    """Yield Arrow batches of the records in `part` (see the module docstring)."""
    import trio

    from log.common.errors import OffsetOutOfRangeError
    from producer.fetch_client import FetchClient

    schema = arrow_source_schema(include_headers)
    chunks: queue.Queue = queue.Queue(maxsize=READ_QUEUE_CHUNKS)
    control: dict[str, Any] = {}

    async def fetch_loop() -> None:
        with trio.CancelScope() as scope:
            control["scope"], control["token"] = scope, trio.lowlevel.current_trio_token()
            async with FetchClient(bootstrap_servers, **(client_settings or {})) as client:
                offset = part.start_offset
                while offset < part.end_offset:
                    try:
                        records, next_offset, high_watermark = await client.fetch(
                            part.topic, part.partition, offset
                        )
                    except OffsetOutOfRangeError:
                        start = await client.earliest_offset(part.topic, part.partition)
                        if fail_on_data_loss or start <= offset:
                            raise QuorumLogDataLossError(
                                f"{part.topic}-{part.partition}: offset {offset} was deleted "
                                f"(log start offset {start}); set failOnDataLoss=false to skip"
                            ) from None
                        offset = start
                        continue
                    records = [r for r in records if r.offset < part.end_offset]
                    if records:
                        await trio.to_thread.run_sync(chunks.put, records)
                    if next_offset <= offset:
                        if high_watermark <= offset:
                            break
                        raise RuntimeError(f"{part.topic}-{part.partition}: no progress")
                    offset = next_offset

    def thread_main() -> None:
        try:
            trio.run(fetch_loop)
            chunks.put(_DONE)
        except BaseException as exc:
            chunks.put(unwrap(exc))

    thread = threading.Thread(target=thread_main, name="quorumlog-read", daemon=True)
    thread.start()
    try:
        while True:
            item = chunks.get()
            if item is _DONE:
                break
            if isinstance(item, BaseException):
                raise item
            for i in range(0, len(item), READ_CHUNK_RECORDS):
                yield _records_to_batch(
                    part.topic, part.partition, item[i : i + READ_CHUNK_RECORDS], schema
                )
    finally:
        if thread.is_alive() and "token" in control:
            try:
                trio.from_thread.run_sync(control["scope"].cancel, trio_token=control["token"])
            except (trio.RunFinishedError, RuntimeError):
                pass
        while thread.is_alive():  # drain, so a blocked put can finish
            try:
                chunks.get(timeout=0.1)
            except queue.Empty:
                pass
        thread.join()


class OffsetRangeReads:
    """What the batch and the streaming reader share: their options, whether the schema has
    the headers column, and `read`, which an executor runs for one planned OffsetRange."""

    def __init__(self, read_options: ReadOptions, schema: Any) -> None:
        self.read_options = read_options
        self.include_headers = "headers" in [f.name for f in schema.fields]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, OffsetRange):  # Spark's stand-in when nothing is planned
            return
        yield from read_range(
            self.read_options.bootstrap_servers,
            partition,
            self.read_options.fail_on_data_loss,
            self.include_headers,
            self.read_options.client_settings,
        )


class QuorumLogReader(OffsetRangeReads, DataSourceReader):
    """Batch reads; see the module docstring. Filters are not pushed (see the subclass)."""

    def __init__(self, options: dict[str, str], schema: Any) -> None:
        super().__init__(parse_read_options(options), schema)
        self.bounds = OffsetBounds()

    def partitions(self) -> list[OffsetRange]:
        return list(plan_offset_ranges(self.read_options, self.bounds))


class QuorumLogFilteringReader(QuorumLogReader):
    """QuorumLogReader with filter pushdown (needs spark.sql.python.filterPushdown.enabled)."""

    def pushFilters(self, filters: list[Any]):  # noqa: N802  (Spark's name)
        for f in filters:
            apply_filter(self.bounds, f)
            yield f  # Spark re-checks every filter on the rows
