"""Streaming reads: a DataSourceStreamReader whose offset is the per-partition offset map.

An offset is `{"topic": {"<partition>": next_offset}}` with string partition keys, because
Spark JSON-round-trips offsets through its checkpoint (int keys would come back as strings).
The reader object lives in one driver-side process per query run; after a restart Spark
resumes from the checkpointed offsets, so nothing here needs state beyond that run.

- `initialOffset`: startingOffsets (default `latest`), or startingTimestamp /
  startingOffsetsByTimestamp (which win), resolved to real offsets.
- `latestOffset(start, limit)`: one ListOffsets per partition (the high watermark); a
  partition missing from `start` (new) starts at its log start offset; with `ReadMaxRows`
  (maxOffsetsPerTrigger) the budget is shared across partitions in proportion to their lag
  (rounded down; the remainder goes to partitions in order, like spark-sql-kafka's rate
  limit); returns
  `start` unchanged when nothing is new, and also while fewer than minOffsetsPerTrigger
  records are new and less than maxTriggerDelay has passed since the last batch that read
  something (or since the reader started), like spark-sql-kafka.
- `partitions(start, end)`: one OffsetRange per partition with new records (failOnDataLoss
  applies when `start` fell below the log start offset), cut into pieces of at most
  maxRecordsPerPartition records when that is set; `read` is the batch reader's
  (spark.reader.OffsetRangeReads).
- Trigger.AvailableNow: `prepareForTriggerAvailableNow` freezes the target offsets.
"""

from __future__ import annotations

import time
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from spark.offset_ranges import OffsetRange, resolve_ranges, split_ranges
from spark.options import LATEST, parse_read_options
from spark.reader import (
    PLANNING_TIMEOUT_S,
    OffsetRangeReads,
    partition_offsets,
    resolve_bounds,
    run_trio,
)

Offsets = dict[str, dict[str, int]]


def limit_offsets(start: Offsets, latest: Offsets, max_rows: int) -> Offsets:
    """`latest`, capped so that at most `max_rows` records are taken, shared by lag."""
    lags = {
        (t, p): max(0, latest[t][p] - start.get(t, {}).get(p, latest[t][p]))
        for t in latest
        for p in latest[t]
    }
    total = sum(lags.values())
    end = {t: dict(ps) for t, ps in latest.items()}
    if total <= max_rows:
        return end
    keys = sorted(k for k, lag in lags.items() if lag > 0)
    takes = {k: lags[k] * max_rows // total for k in keys}  # proportional, rounded down
    budget = max_rows - sum(takes.values())
    for k in keys:  # the rounding remainder, in partition order, within each lag
        extra = min(budget, lags[k] - takes[k])
        takes[k] += extra
        budget -= extra
    for (t, p), take in takes.items():
        end[t][p] = start[t][p] + take
    return end


def wait_for_more(new: int, minimum: int | None, waited_ms: float, max_delay_ms: int) -> bool:
    """minOffsetsPerTrigger: skip this trigger (True) when some but fewer than `minimum`
    records are new and the last batch that read something was less than maxTriggerDelay
    ago (spark-sql-kafka's rule; nothing new is no batch anyway)."""
    return minimum is not None and 0 < new < minimum and waited_ms < max_delay_ms


class QuorumLogStreamReader(OffsetRangeReads, DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str], schema: Any) -> None:
        super().__init__(parse_read_options(options, streaming=True), schema)
        self.target: Offsets | None = None  # Trigger.AvailableNow's frozen end
        self.last_trigger_s = time.monotonic()  # for minOffsetsPerTrigger / maxTriggerDelay

    def _known_offsets(self, with_start: bool = False) -> Any:
        import trio

        from producer.fetch_client import FetchClient

        options = self.read_options

        async def query():
            with trio.fail_after(PLANNING_TIMEOUT_S):
                async with FetchClient(options.bootstrap_servers, **options.client_settings) as c:
                    known = await partition_offsets(c, options)
                    if not with_start:
                        return known
                    return known, (await resolve_bounds(c, options, known))[0]

        return run_trio(query)

    def initialOffset(self) -> Offsets:  # noqa: N802  (Spark's names)
        known, starting = self._known_offsets(with_start=True)
        ranges = resolve_ranges(known, starting, LATEST, True)
        out: Offsets = {}
        for r in ranges:
            out.setdefault(r.topic, {})[str(r.partition)] = r.start_offset
        return out

    def _latest(self, start: Offsets) -> Offsets:
        out: Offsets = {}
        for (topic, p), known in self._known_offsets().items():
            out.setdefault(topic, {})[str(p)] = known.high_watermark
            start.setdefault(topic, {}).setdefault(str(p), known.log_start_offset)
        return out

    def getDefaultReadLimit(self):  # noqa: N802
        limit = self.read_options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def latestOffset(self, start: Offsets, limit: Any) -> Offsets:  # noqa: N802
        given = start
        start = {t: dict(ps) for t, ps in start.items()}
        latest = self.target if self.target is not None else self._latest(start)
        for t, ps in latest.items():
            for p, offset in ps.items():
                start.setdefault(t, {}).setdefault(p, offset)
        if isinstance(limit, ReadMaxRows):
            latest = limit_offsets(start, latest, limit.max_rows)
        merged = {t: dict(ps) for t, ps in start.items()}
        for t, ps in latest.items():
            for p, offset in ps.items():
                merged[t][p] = max(offset, merged[t].get(p, offset))
        new = sum(o - start[t][p] for t, ps in merged.items() for p, o in ps.items())
        waited_ms = (time.monotonic() - self.last_trigger_s) * 1000
        if self.target is None and wait_for_more(
            new,
            self.read_options.min_offsets_per_trigger,
            waited_ms,
            self.read_options.max_trigger_delay_ms,
        ):
            return given  # too few yet: wait for more, or for maxTriggerDelay
        if new > 0:
            self.last_trigger_s = time.monotonic()
        return merged

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self.target = self._latest({})

    def partitions(self, start: Offsets, end: Offsets) -> list[OffsetRange]:
        known = self._known_offsets() if self.read_options.fail_on_data_loss else {}
        ranges = []
        for topic, ps in end.items():
            for p, end_offset in ps.items():
                begin = start.get(topic, {}).get(p)
                if begin is None:
                    begin = known[(topic, int(p))].log_start_offset if known else 0
                if end_offset <= begin:
                    continue
                k = known.get((topic, int(p)))
                if k is not None and begin < k.log_start_offset:
                    resolve_ranges({(topic, int(p)): k}, {topic: {int(p): begin}}, -1, True)
                ranges.append(OffsetRange(topic, int(p), begin, end_offset))
        return split_ranges(ranges, None, self.read_options.max_records_per_partition)

    def commit(self, end: Offsets) -> None:
        """Progress lives in Spark's checkpoint; nothing to do here."""
