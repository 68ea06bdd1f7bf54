"""Writing a DataFrame to quorumlog from Spark's executors.

Each write task (one Spark partition, one attempt) builds its own SyncProducer inside
`write()` (nothing live is pickled: the writer object carries only parsed options), sends its
rows and returns a `QuorumLogCommitMessage` only after every record was acknowledged
(idempotent producer, acks=all by default). The message reports, per log partition, the
record count and the first and last offsets. The driver's `commit()` checks that every task
reported all of its records acknowledged; a task whose records were not all acknowledged
raises `QuorumLogWriteError` naming the log partition and the cause instead of returning.

Two paths feed the producer:

- Arrow (default, `DataSourceArrowWriter`): Spark hands over `pyarrow.RecordBatch`es, gathered
  until they hold `arrowGatherBytes` (4 MiB; so that each partition's share fills whole
  producer batches); each gathered batch is validated (no null values) and split by topic;
  each row's target partition is computed for the whole batch at once (the `partition`
  column, else the Java client's murmur2 of the key, vectorized in spark/key_partitions.py,
  else the producer's sticky choice). One take puts the rows in partition order (cut where
  stickiness changes, so that no row overtakes an earlier one of its partition); each
  partition's rows are cut into runs that fill a batch, and the records sections (keys,
  values, headers, timestamps) of all runs are encoded in one pass
  (spark/record_encoding.encode_runs). The runs, views of that one buffer, go to the
  producer's thread in one `send_encoded` hand-over; the producer only adds the batch header
  (producer id, epoch, sequence) when it sends. No Python object per row. The producer's
  `batch.size` defaults to 512 KiB and `max.request.size` to 8 MiB here
  (WRITER_PRODUCER_DEFAULTS).
- Row (`.option("writer", "row")`, for comparison): one `send` per Row.

Delivery guarantee with `.option("exactlyOnce", "true")`: exactly once, all or nothing per job
(per micro-batch when streaming), through transactions the driver commits as one decision
(spark/exactly_once.py): each task attempt writes in its own transaction and prepares it; the
commit message carries it. Readers see the job's records only with read_committed (the reader's
default).

Delivery guarantee otherwise: at-least-once, like spark-sql-kafka. Nothing acknowledged is lost, and a
job that succeeds had every record acknowledged. Duplicates are possible when Spark re-runs a
task (a retry after a failure, a speculative copy): the records that the earlier attempt had
already had acknowledged are written again by the new attempt. When a task fails because
its input raised, the writer first waits for the records it had already handed to the
producer (so the duplicates are exactly those acknowledged records), then closes the producer
and re-raises. A task Spark kills outright gets no chance to run any code.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    DataSourceWriter,
    WriterCommitMessage,
)

from spark.exactly_once import COMMIT, JobStart, PreparedTxn, SinkStart
from spark.key_partitions import key_partitions
from spark.options import WriteOptions, parse_write_options
from spark.schema import validate_sink_schema

ROW_CHUNK = 1000  # row path: rows validated together before any of them is sent
# The writer's producer defaults, where the job sets no kafka.* value: a bulk job's batches
# are full at once (linger plays no part), and per-batch costs dominate at Kafka's 16 KiB
# (measured: a write task's rate x1.8 at 512 KiB; bench/spark_write.py). 512 KiB stays
# below the broker's default max.message.bytes (1 MiB).
# Requests of up to 8 MiB carry several such batches to a node at once (Kafka's 1 MiB
# max.request.size fits one), fewer requests for the brokers to handle; their
# socket.request.max.bytes is 100 MiB.
WRITER_PRODUCER_DEFAULTS = {"batch.size": "524288", "max.request.size": "8388608"}
MAX_IN_FLIGHT_FUTURES = 100_000  # row path: wait for acks before queueing more than this

logger = logging.getLogger(__name__)


class QuorumLogWriteError(RuntimeError):
    """A write task could not get all of its records acknowledged, or its input was bad."""


@dataclass
class PartitionWriteStats:
    records: int = 0
    first_offset: int = -1
    last_offset: int = -1

    def add(self, count: int, first: int, last: int) -> None:
        self.records += count
        if first >= 0 and (self.first_offset < 0 or first < self.first_offset):
            self.first_offset = first
        self.last_offset = max(self.last_offset, last)


@dataclass
class QuorumLogCommitMessage(WriterCommitMessage):
    """One task's report: per (topic, partition) the records written and their offsets."""

    spark_partition: int
    attempt: int
    records_sent: int
    records_acknowledged: int
    partitions: dict[tuple[str, int], PartitionWriteStats] = field(default_factory=dict)
    # exactlyOnce: the task's prepared transaction (None: it wrote nothing, or skipped a job
    # that was committed before, `skipped`); the offset its intent checks read from and the
    # records they read
    prepared: PreparedTxn | None = None
    skipped: bool = False
    intents_from: int = 0
    intent_records_read: int = 0


class _Tracker:
    """Collects acknowledgements (called on the producer's thread) and the first error."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stats: dict[tuple[str, int], PartitionWriteStats] = {}
        self.errors: list[str] = []
        self.sent = 0
        self.acknowledged = 0
        self.pending: list[Future] = []

    def _stats(self, topic: str, partition: int) -> PartitionWriteStats:
        key = (topic, partition)
        stats = self.stats.get(key)
        if stats is None:
            stats = self.stats[key] = PartitionWriteStats()
        return stats

    def bulk_done(self, topic: str, future: Future) -> None:
        """A send_encoded hand-over completed: its BulkDeliveries (or the call's error)."""
        try:
            deliveries = future.result()
        except BaseException as exc:  # the call itself failed
            with self.lock:
                self.errors.append(f"topic {topic}: {exc!r}")
            return
        with self.lock:
            for delivery in deliveries:
                error = delivery.error
                # (indices, partition, base_offset, timestamp_ms) per completed batch
                for indices, partition, base_offset, _ts in delivery.parts:
                    if error is not None and base_offset < 0:
                        self.errors.append(f"{delivery.topic}-{partition}: {error!r}")
                        continue
                    count = len(indices)
                    self.acknowledged += count
                    self._stats(delivery.topic, partition).add(
                        count, base_offset, base_offset + count - 1
                    )
                if error is not None and not self.errors:
                    self.errors.append(f"topic {delivery.topic}: {error!r}")

    def record_done(self, topic: str, partition: int | None, future: Future) -> None:
        error = future.exception()
        with self.lock:
            if error is not None:
                where = f"{topic}-{partition}" if partition is not None else f"topic {topic}"
                self.errors.append(f"{where}: {error!r}")
                return
            metadata = future.result()
            self.acknowledged += 1
            self._stats(metadata.topic, metadata.partition).add(1, metadata.offset, metadata.offset)


def _task_ids() -> tuple[int, int]:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return -1, 0
    return context.partitionId(), context.attemptNumber()


def _stream_batch_id() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    raw = None if context is None else context.getLocalProperty("streaming.sql.batchId")
    if raw is None:
        raise QuorumLogWriteError("quorumlog sink: a streaming task without a batch id")
    return int(raw)


def _run(async_fn: Any, *args: Any) -> Any:
    import trio

    return trio.run(async_fn, *args)


def _as_bytes_list(column: Any) -> list:
    import pyarrow as pa

    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    return column.to_pylist()


def _header_list(headers: Any) -> list[tuple[str, bytes | None]] | None:
    if not headers:
        return None
    out = []
    for header in headers:
        key, value = (header["key"], header["value"]) if isinstance(header, dict) else header
        if isinstance(value, str):
            value = value.encode()
        out.append((key, None if value is None else bytes(value)))
    return out


def _binary_keys_and_values(batch: Any) -> Any:
    """The batch with string `key`/`value` columns as binary (their UTF-8 bytes, as the row
    path sends them): cast once per Arrow batch, not once per partition piece."""
    import pyarrow as pa

    names = batch.schema.names
    columns = list(batch.columns)
    changed = False
    for name in ("key", "value"):
        if name in names and pa.types.is_string(columns[names.index(name)].type):
            columns[names.index(name)] = columns[names.index(name)].cast(pa.binary())
            changed = True
    return pa.RecordBatch.from_arrays(columns, names=names) if changed else batch


def _gathered(batches: Iterable[Any], gather_bytes: int) -> Iterator[Any]:
    """Spark's Arrow batches joined into batches of at least `gather_bytes` (the last one
    smaller), so that each partition's share fills whole producer batches; one at a time
    as they come when `gather_bytes` is 0 or a batch is that large on its own."""
    import pyarrow as pa

    pending: list[Any] = []
    pending_bytes = 0
    for batch in batches:
        if not pending and batch.nbytes >= gather_bytes:
            yield batch
            continue
        pending.append(batch)
        pending_bytes += batch.nbytes
        if pending_bytes >= gather_bytes:
            yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)
            pending, pending_bytes = [], 0
    if pending:
        yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)


def _partition_order(targets: Any) -> tuple[Any, list[tuple[int | None, int, int]]]:
    """(the row order that groups the rows by target partition, None if they are in it
    already; [(partition or None for the producer's sticky choice, start, end)] in that
    order). Rows left to the sticky partitioner (-1) may land on any partition, so pieces
    are cut where stickiness changes and no row overtakes an earlier one of the same
    partition; within a piece of explicit targets a stable sort groups them (row order kept
    per partition; a radix sort on 16-bit targets)."""
    import numpy as np

    rows = len(targets)
    sticky = targets < 0
    cuts = [0, *(np.flatnonzero(sticky[1:] != sticky[:-1]) + 1).tolist(), rows]
    pieces: list[Any] = []
    groups: list[tuple[int | None, int, int]] = []
    reordered = False
    narrow = np.int16 if rows and int(targets.max()) < 2**15 else np.int64
    for first, end in zip(cuts, cuts[1:], strict=False):
        if sticky[first]:
            pieces.append(np.arange(first, end))
            groups.append((None, first, end))
            continue
        piece = targets[first:end]
        order = np.argsort(piece.astype(narrow), kind="stable")
        ordered = piece[order]
        bounds = [0, *(np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist(), end - first]
        reordered = reordered or len(bounds) > 2
        pieces.append(order + first)
        for start, stop in zip(bounds, bounds[1:], strict=False):
            groups.append((int(ordered[start]), first + start, first + stop))
    return (np.concatenate(pieces) if reordered else None), groups


def _arrow_indices(order: Any) -> Any:
    """An int64 numpy array as an Arrow array over the same memory. (Handing `take` the
    numpy array converts it with pa.array, whose first call imports pandas: 0.2 s of CPU
    in each fresh Python worker, for nothing the writer uses.)"""
    import numpy as np
    import pyarrow as pa

    order = np.ascontiguousarray(order, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(order), [None, pa.py_buffer(order)])


def _bulk_settings(properties: Mapping[str, str]) -> tuple[bool, tuple[int, int]]:
    """(partitioner.ignore.keys, (records bytes per batch, offsetDelta varint bytes at
    most)) from the producer settings: how the writer cuts and encodes runs."""
    import numpy as np

    from producer.bulk import records_limit_bytes
    from producer.config import ProducerConfig
    from spark.record_encoding import varint_widths

    config = ProducerConfig.from_kafka_properties(properties)
    limit = records_limit_bytes(config.compression, config.batch_size)
    delta_bytes = int(varint_widths(np.array([max(limit, 1)]))[0])  # a run has < limit records
    return config.partitioner_ignore_keys, (max(limit, 1), delta_bytes)


class _TaskWriter:
    """The body of one write task: sends through a SyncProducer, then reports."""

    def __init__(
        self,
        options: WriteOptions,
        job_id: str | None = None,
        intents_from: int = 0,
        committed_before: bool = False,
    ) -> None:
        self.options = options
        self.job_id = job_id  # exactlyOnce: the job (or micro-batch) this task writes for
        # exactlyOnce, from the driver at the job's start: where the job's intents begin, and
        # whether an earlier run with this job id committed it (then nothing is written)
        self.intents_from = intents_from
        self.committed_before = committed_before
        self.intent_records_read = 0
        self.spark_partition, self.attempt = _task_ids()
        self.tracker = _Tracker()
        self._partition_counts: dict[str, Future] = {}  # topic -> its partition count
        self.producer_config = {
            "bootstrap.servers": options.bootstrap_servers,
            **WRITER_PRODUCER_DEFAULTS,
            **options.producer_properties,
        }
        self._ignore_keys, self._records_limit = _bulk_settings(self.producer_config)
        self._skipped = False  # exactlyOnce: the job was committed by another attempt
        self._runs: list[tuple] = []  # send_encoded's arguments, for _hand_over
        self._runs_records = 0

    def run(self, batches: Iterable[Any], *, rows: bool) -> QuorumLogCommitMessage:
        from producer.errors import ProducerClosedError
        from producer.sync_producer import SyncProducer
        from spark.exactly_once import transactional_id

        config = self.producer_config
        txn_id = None
        if self.job_id is not None:
            if self.committed_before or self._decided() == COMMIT:
                for _batch in batches:  # a replay of a committed job: written already
                    pass
                return QuorumLogCommitMessage(self.spark_partition, self.attempt, 0, 0,
                                              skipped=True, intents_from=self.intents_from,
                                              intent_records_read=self.intent_records_read)  # fmt: skip
            txn_id = transactional_id(self.job_id, self.spark_partition, self.attempt)
            config = {**config, "transactional.id": txn_id,
                      "transaction.two.phase.commit.enable": "true"}  # fmt: skip
        producer = SyncProducer(config=config)
        if self.options.topic is not None:  # its metadata is asked for while batches come
            self._partition_counts[self.options.topic] = producer.partition_count(
                self.options.topic
            )
        try:
            if txn_id is not None:
                producer.init_transactions()
                producer.begin_transaction()
            try:
                if rows:
                    self._send_rows(producer, batches)
                else:
                    for batch in _gathered(batches, self.options.gather_bytes):
                        self._send_arrow(producer, batch)
                        self._hand_over(producer)
            except BaseException as exc:
                # Wait for what was handed over, so that what a failed attempt leaves behind
                # is exactly its acknowledged records, and say how many there are.
                self._wait_all(producer)
                exc.add_note(
                    f"quorumlog sink: Spark partition {self.spark_partition} attempt "
                    f"{self.attempt} failed after {self.tracker.acknowledged} record(s) were "
                    f"acknowledged; they stay in the log (at-least-once)"
                )
                raise
            self._wait_all(producer)
            prepared = None
            if txn_id is not None:
                self._report()  # raises (and the transaction is aborted) if a record failed
                prepared = self._prepare(producer, txn_id)
        except BaseException:
            if txn_id is not None:
                try:
                    producer.abort_transaction()
                except Exception as exc:  # fenced, or the thread ended: the driver sweeps it
                    logger.info("quorumlog sink: abort of %s: %r", txn_id, exc)
            try:
                producer.close(0)
            except ProducerClosedError:
                pass  # its thread ended: the error on its way out already says so, and why
            raise
        producer.close(0)
        message = self._report()
        if txn_id is not None:
            message.prepared = prepared
            message.skipped = self._skipped
            message.intents_from = self.intents_from
            message.intent_records_read = self.intent_records_read
        return message

    def _decided(self) -> str | None:
        """exactlyOnce: the job's decision so far, read from the offset the driver noted when
        the job started (what this job wrote, never the topic's history)."""
        from spark.exactly_once import job_decided

        decision, read = _run(
            job_decided, self.options.bootstrap_servers, self.job_id, self.intents_from
        )
        self.intent_records_read += read
        return decision

    def _prepare(self, producer: Any, txn_id: str) -> PreparedTxn | None:
        """Flushed: prepare, unless the driver decided the job meanwhile (a straggler)."""
        if self.tracker.sent == 0:
            producer.abort_transaction()  # nothing was added: nothing to commit
            return None
        decided = self._decided()
        if decided is not None:
            producer.abort_transaction()
            if decided == COMMIT:
                self._skipped = True
                return None  # another attempt's output was committed
            raise QuorumLogWriteError(f"quorumlog sink: job {self.job_id} was aborted")
        producer_id, epoch = producer.prepare_transaction()
        return PreparedTxn(txn_id, producer_id, epoch)

    # -- Arrow ---------------------------------------------------------------------------------

    def _check_batch(self, batch: Any) -> None:
        import pyarrow as pa

        names = batch.schema.names
        value = batch.column(names.index("value"))
        if value.null_count:
            raise QuorumLogWriteError(
                f"quorumlog sink: {value.null_count} row(s) with a null 'value' in Spark "
                f"partition {self.spark_partition}; nothing of this batch was sent"
            )
        if self.options.topic is None:
            topic = batch.column(names.index("topic"))
            if topic.null_count:
                raise QuorumLogWriteError(
                    "quorumlog sink: row(s) with a null 'topic' and no topic option"
                )
        assert pa is not None

    def _send_arrow(self, producer: Any, batch: Any) -> None:
        """One (gathered) Arrow batch: split by topic, then by target partition computed for
        the whole column at once (the partition column, else murmur2 of the key, else -1:
        the producer's sticky partitioner); the rows are put in partition order with one
        take (row order kept per partition) and encoded together by _send_columns."""
        import pyarrow.compute as pc

        if batch.num_rows == 0:
            return
        self._check_batch(batch)
        batch = _binary_keys_and_values(batch)
        names = batch.schema.names
        if self.options.topic is not None or "topic" not in names:
            by_topic = [(self.options.topic, batch)]
        else:
            topics = batch.column(names.index("topic"))
            distinct = pc.unique(topics).to_pylist()
            by_topic = (
                [(distinct[0], batch)]
                if len(distinct) == 1
                else [(t, batch.filter(pc.equal(topics, t))) for t in distinct]
            )
        for topic, part in by_topic:
            assert topic is not None  # the schema check requires the option or the column
            targets = self._targets(producer, topic, part)
            if targets is None:
                self._send_columns(producer, part, topic, [(None, 0, part.num_rows)])
                continue
            order, groups = _partition_order(targets)
            if order is not None:  # one take (of the columns sent) for the whole batch
                used = [
                    n for n in ("key", "value", "headers", "timestamp") if n in part.schema.names
                ]
                part = part.select(used).take(_arrow_indices(order))
            self._send_columns(producer, part, topic, groups)

    def _targets(self, producer: Any, topic: str, batch: Any) -> Any:
        """int64 partition per row (-1: the producer's sticky choice), or None when every row
        is left to the sticky partitioner (no partition column, no keys)."""
        import numpy as np
        import pyarrow as pa

        from spark.record_encoding import int_values

        names = batch.schema.names
        explicit = None
        if "partition" in names:
            column = batch.column(names.index("partition"))
            if column.null_count == 0 and pa.types.is_integer(column.type):
                return int_values(column)
            if column.null_count < batch.num_rows:
                explicit = column.to_numpy(zero_copy_only=False)
                if column.null_count == 0:
                    return explicit.astype(np.int64)
        keyed = None
        if "key" in names and not self._ignore_keys:
            key_column = batch.column(names.index("key"))
            if key_column.null_count < batch.num_rows:
                keyed = key_partitions(key_column, self._partition_count(producer, topic))
        if explicit is None:
            return keyed
        valid = ~np.isnan(explicit) if explicit.dtype.kind == "f" else np.ones(len(explicit), bool)
        merged = keyed if keyed is not None else np.full(batch.num_rows, -1, dtype=np.int64)
        merged = merged.copy()
        merged[valid] = explicit[valid].astype(np.int64)
        return merged

    def _partition_count(self, producer: Any, topic: str) -> int:
        """The topic's partition count, from the producer's metadata (asked once per topic;
        for the topic option at the task's start, so that it overlaps the first batches)."""
        count = self._partition_counts.get(topic)
        if count is None:
            count = self._partition_counts[topic] = producer.partition_count(topic)
        return count.result(self.options.task_timeout_ms / 1000)

    def _send_columns(
        self, producer: Any, batch: Any, topic: Any, groups: list[tuple[int | None, int, int]]
    ) -> None:
        """Rows of an Arrow batch already in partition order, `groups` (partition or None:
        sticky, start, end) saying whose rows are where: each group cut into runs that fill a
        batch, all runs encoded in one pass (spark/record_encoding.py) and queued for the
        producer as ready records sections, views of the one encoded buffer (handed over by
        _hand_over)."""
        import numpy as np
        import pyarrow as pa

        from spark.record_encoding import (
            column_lengths,
            encode_runs,
            int_values,
            plan_runs,
            record_sizes,
        )

        names = batch.schema.names

        def used(name: str) -> Any:
            if name not in names:
                return None
            column = batch.column(names.index(name))
            return column if column.null_count < batch.num_rows else None

        values = batch.column(names.index("value"))
        keys, headers, stamps = used("key"), used("headers"), used("timestamp")
        if pa.types.is_string(values.type):  # UTF-8 bytes, as the row path sends them
            values = values.cast(pa.binary())
        if keys is not None and pa.types.is_string(keys.type):
            keys = keys.cast(pa.binary())
        timestamps = None
        if stamps is not None:  # epoch ms; a null timestamp is the time now, as with send()
            as_ms = stamps.cast(pa.timestamp("ms", tz=stamps.type.tz), safe=False)
            now = time.time_ns() // 1_000_000
            timestamps = int_values(as_ms.cast(pa.int64()), null_as=now)
        limit, delta_bytes = self._records_limit
        try:
            lengths = column_lengths(keys, values)
            sizes = record_sizes(keys, values, delta_bytes, timestamps, headers, lengths)
            runs: list[tuple[int, int]] = []
            targets: list[int | None] = []
            for partition, first, end in groups:
                for start, stop in plan_runs(sizes[first:end], limit):
                    runs.append((first + start, first + stop))
                    targets.append(partition)
            data, bounds = encode_runs(keys, values, runs, timestamps, headers, lengths)
        except ValueError as exc:  # a header with a null key
            raise QuorumLogWriteError(
                f"quorumlog sink: Spark partition {self.spark_partition}: {exc}; nothing of "
                f"this batch was sent"
            ) from None
        spans = None
        if timestamps is not None:
            starts = [start for start, _ in runs]
            spans = zip(
                np.minimum.reduceat(timestamps, starts).tolist(),
                np.maximum.reduceat(timestamps, starts).tolist(),
                strict=True,
            )
        for index, (start, end) in enumerate(runs):
            count = end - start
            self._runs.append((
                topic,
                targets[index],
                None if keys is None else keys.slice(start, count),
                values.slice(start, count),
                data[bounds[index] : bounds[index + 1]],
                None if spans is None else next(spans),
                headers is not None,
            ))  # fmt: skip
            self._runs_records += count

    def _hand_over(self, producer: Any) -> None:
        """The runs of one Arrow batch go to the producer's thread in one command."""
        if not self._runs:
            return
        future = producer.send_encoded(self._runs)
        self.tracker.sent += self._runs_records
        topics = ",".join(sorted({run[0] for run in self._runs}))
        future.add_done_callback(lambda f: self.tracker.bulk_done(topics, f))
        self.tracker.pending.append(future)
        self._runs, self._runs_records = [], 0

    # -- rows ----------------------------------------------------------------------------------

    def _send_rows(self, producer: Any, rows: Iterable[Any]) -> None:
        """The row writer: Spark Rows, validated a chunk at a time, then sent one by one."""
        chunk: list = []
        for row in rows:
            chunk.append(row)
            if len(chunk) >= ROW_CHUNK:
                self._send_row_chunk(producer, chunk)
                chunk = []
        self._send_row_chunk(producer, chunk)

    def _send_row_chunk(self, producer: Any, rows: list) -> None:
        for row in rows:
            if row["value"] is None:
                raise QuorumLogWriteError(
                    f"quorumlog sink: a row with a null 'value' in Spark partition "
                    f"{self.spark_partition}; nothing of its chunk of {len(rows)} rows was sent"
                )
        for row in rows:
            self._send_row(producer, row)

    def _send_row(self, producer: Any, row: Any) -> None:
        get = row.get if isinstance(row, dict) else (lambda name: getattr(row, name, None))
        value = get("value")
        if value is None:
            raise QuorumLogWriteError(
                f"quorumlog sink: a row with a null 'value' in Spark partition "
                f"{self.spark_partition}"
            )
        topic = self.options.topic or get("topic")
        if topic is None:
            raise QuorumLogWriteError("quorumlog sink: a row with a null 'topic'")
        key = get("key")
        partition = get("partition")
        timestamp = get("timestamp")
        if timestamp is not None and not isinstance(timestamp, int):
            timestamp = int(timestamp.timestamp() * 1000)
        future = producer.send(
            topic,
            value.encode() if isinstance(value, str) else bytes(value),
            None if key is None else key.encode() if isinstance(key, str) else bytes(key),
            partition,
            _header_list(get("headers")),
            timestamp,
        )
        tracker = self.tracker
        tracker.sent += 1
        future.add_done_callback(lambda f, t=topic, p=partition: tracker.record_done(t, p, f))
        if tracker.sent - tracker.acknowledged > MAX_IN_FLIGHT_FUTURES:
            producer.flush()

    # -- completion ----------------------------------------------------------------------------

    def _wait_all(self, producer: Any) -> None:
        deadline = time.monotonic() + self.options.task_timeout_ms / 1000
        producer.flush(self.options.task_timeout_ms / 1000)
        for future in self.tracker.pending:
            future.result(max(0.0, deadline - time.monotonic()))

    def _report(self) -> QuorumLogCommitMessage:
        tracker = self.tracker
        with tracker.lock:
            if tracker.errors:
                raise QuorumLogWriteError(
                    f"quorumlog sink: Spark partition {self.spark_partition} attempt "
                    f"{self.attempt}: {tracker.sent - tracker.acknowledged} of {tracker.sent} "
                    f"record(s) not acknowledged; first failure: {tracker.errors[0]}"
                )
            if tracker.acknowledged != tracker.sent:
                raise QuorumLogWriteError(
                    f"quorumlog sink: Spark partition {self.spark_partition}: only "
                    f"{tracker.acknowledged} of {tracker.sent} record(s) acknowledged"
                )
            return QuorumLogCommitMessage(
                self.spark_partition,
                self.attempt,
                tracker.sent,
                tracker.acknowledged,
                dict(tracker.stats),
            )


def check_messages(messages: Iterable[Any]) -> dict[tuple[str, int], PartitionWriteStats]:
    """The driver's check: every task reported all records acknowledged; the totals."""
    totals: dict[tuple[str, int], PartitionWriteStats] = {}
    for index, message in enumerate(messages):
        if not isinstance(message, QuorumLogCommitMessage):
            raise QuorumLogWriteError(f"quorumlog sink: task {index} reported no commit message")
        if message.records_acknowledged != message.records_sent:
            raise QuorumLogWriteError(
                f"quorumlog sink: task {index}: {message.records_acknowledged} of "
                f"{message.records_sent} record(s) acknowledged"
            )
        for key, stats in message.partitions.items():
            total = totals.setdefault(key, PartitionWriteStats())
            total.add(stats.records, stats.first_offset, stats.last_offset)
    return totals


class _WriterBase:
    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        self.write_options = parse_write_options(options)
        validate_sink_schema(schema, self.write_options.topic)
        self.job_id: str | None = None
        self.job_start: JobStart | None = None  # exactlyOnce batch jobs: _start_batch_job
        if self.write_options.exactly_once:
            from spark.exactly_once import ensure_intent_topic

            ensure_intent_topic(self.write_options.bootstrap_servers)

    def _start_batch_job(self) -> None:
        """exactlyOnce batch writes, on the driver before any task: the job id; a given one
        first finishes what an earlier run with that id left; the offset the job's intent
        checks read from (spark/exactly_once.py start_job)."""
        import uuid

        from spark.exactly_once import start_job

        options = self.write_options
        if not options.exactly_once:
            return
        self.job_id = options.job_id or uuid.uuid4().hex
        self.job_start = _run(
            start_job, options.bootstrap_servers, self.job_id, options.job_id is not None
        )

    def _batch_task(self, rows: bool, iterator: Iterator[Any]) -> QuorumLogCommitMessage:
        start = self.job_start
        if start is None:
            return _TaskWriter(self.write_options).run(iterator, rows=rows)
        task = _TaskWriter(self.write_options, self.job_id, start.intents_from,
                           start.committed_before)  # fmt: skip
        return task.run(iterator, rows=rows)

    def _decide(
        self,
        job_id: str | None,
        messages: list[Any],
        commit: bool,
        intents_from: int = 0,
        earlier: dict[str, Any] | None = None,
    ) -> None:
        """exactlyOnce: commit the tasks' prepared transactions as one decision, or abort."""
        import functools

        from spark.exactly_once import abort_job, commit_job

        if job_id is None:
            return
        bootstrap = self.write_options.bootstrap_servers
        if not commit:
            _run(functools.partial(abort_job, bootstrap, job_id, intents_from=intents_from,
                                   earlier=earlier))  # fmt: skip
            return
        prepared = [m.prepared for m in messages if getattr(m, "prepared", None) is not None]
        reports = [m for m in messages if isinstance(m, QuorumLogCommitMessage)]
        checks = {  # what the tasks' intent checks cost, kept in the intent
            "from": min((m.intents_from for m in reports), default=intents_from),
            "most_read": max((m.intent_records_read for m in reports), default=0),
        }
        decide = functools.partial(commit_job, bootstrap, job_id, prepared,
                                   intents_from=intents_from, earlier=earlier, checks=checks)  # fmt: skip
        if not _run(decide):
            logger.info("quorumlog sink: job %s was committed before; output unchanged", job_id)

    def _decide_batch_job(self, messages: list[Any], commit: bool) -> None:
        start = self.job_start
        if start is not None:
            self._decide(self.job_id, messages, commit, start.intents_from, start.earlier)

    def _commit(self, messages: list[Any], decide: Any) -> None:
        totals = check_messages(messages)
        decide()
        records = sum(stats.records for stats in totals.values())
        logger.info(
            "quorumlog sink: %d task(s) wrote %d record(s), all acknowledged: %s",
            len(messages),
            records,
            ", ".join(
                f"{t}-{p}: {s.records} [{s.first_offset}..{s.last_offset}]"
                for (t, p), s in sorted(totals.items())
            ),
        )


class QuorumLogArrowWriter(_WriterBase, DataSourceArrowWriter):
    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        super().__init__(options, schema)
        self._start_batch_job()

    def write(self, iterator: Iterator[Any]) -> QuorumLogCommitMessage:
        return self._batch_task(False, iterator)

    def commit(self, messages: list[Any]) -> None:
        self._commit(messages, lambda: self._decide_batch_job(messages, True))

    def abort(self, messages: list[Any]) -> None:
        """exactlyOnce: nothing of the job becomes visible. Otherwise at-least-once:
        acknowledged records stay in the log (see the module docstring)."""
        self._decide_batch_job(messages, False)


class QuorumLogRowWriter(_WriterBase, DataSourceWriter):
    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        super().__init__(options, schema)
        self._start_batch_job()

    def write(self, iterator: Iterator[Any]) -> QuorumLogCommitMessage:
        return self._batch_task(True, iterator)

    def commit(self, messages: list[Any]) -> None:
        self._commit(messages, lambda: self._decide_batch_job(messages, True))

    def abort(self, messages: list[Any]) -> None:
        """As QuorumLogArrowWriter.abort."""
        self._decide_batch_job(messages, False)


class QuorumLogStreamWriter(_WriterBase, DataSourceStreamArrowWriter):
    """The streaming sink: each micro-batch's tasks write like batch tasks. exactlyOnce: each
    micro-batch is a job `<sink>-b<batchId>`, so a batch replayed after a restart from the
    checkpoint is written once (the sink id: exactlyOnceJobId, else a hash of the checkpoint
    location); otherwise at-least-once, a replayed micro-batch is written again. Each commit
    first finishes earlier batches a crashed driver left (recover_batches).

    PySpark makes this writer on the driver for each micro-batch before its tasks run (and
    again for each commit or abort): exactlyOnce, it notes then the sink's newest intent and
    the intent topic's end (spark/exactly_once.py SinkStart), from which the tasks' checks
    read."""

    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        super().__init__(options, schema)
        self.sink_id: str | None = None
        self.sink_start: SinkStart | None = None
        if self.write_options.exactly_once:
            import hashlib

            from spark.exactly_once import start_sink

            lowered = {str(k).lower(): str(v) for k, v in options.items()}
            checkpoint = lowered.get("checkpointlocation")
            if self.write_options.job_id is None and checkpoint is None:
                raise QuorumLogWriteError(
                    "quorumlog sink: exactlyOnce streaming needs a checkpointLocation or an "
                    "exactlyOnceJobId"
                )
            self.sink_id = self.write_options.job_id or (
                "s" + hashlib.sha256(str(checkpoint).encode()).hexdigest()[:20]
            )
            self.sink_start = _run(
                start_sink, self.write_options.bootstrap_servers, f"{self.sink_id}-b"
            )

    def _batch_job(self, batch_id: int) -> str | None:
        return None if self.sink_id is None else f"{self.sink_id}-b{batch_id}"

    def write(self, iterator: Iterator[Any]) -> QuorumLogCommitMessage:
        start = self.sink_start
        if start is None:
            return _TaskWriter(self.write_options).run(iterator, rows=False)
        batch = _stream_batch_id()
        task = _TaskWriter(self.write_options, self._batch_job(batch), start.intents_from,
                           start.earlier(batch) is not None)  # fmt: skip
        return task.run(iterator, rows=False)

    def _decide_batch(self, messages: list[Any], batch_id: int, commit: bool) -> None:
        start = self.sink_start
        if start is not None:
            self._decide(self._batch_job(batch_id), messages, commit, start.intents_from,
                         start.earlier(batch_id))  # fmt: skip

    def commit(self, messages: list[Any], batchId: int) -> None:  # noqa: N803  (Spark's name)
        if self.sink_start is not None:
            # PySpark makes a new writer for each commit: recovery cannot run at start-up,
            # where it would abort the prepared transactions of the batch being committed.
            from spark.exactly_once import recover_batches

            _run(recover_batches, self.write_options.bootstrap_servers, f"{self.sink_id}-b",
                 batchId, self.sink_start)  # fmt: skip
        self._commit(messages, lambda: self._decide_batch(messages, batchId, True))

    def abort(self, messages: list[Any], batchId: int) -> None:  # noqa: N803
        """exactlyOnce: the micro-batch's transactions are aborted; otherwise at-least-once."""
        self._decide_batch(messages, batchId, False)
