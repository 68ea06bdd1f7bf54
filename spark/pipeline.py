"""The example pipeline: dataset -> transform -> quorumlog (through the data source) -> read
back -> verify per partition.

    python -m spark.pipeline --bootstrap 127.0.0.1:9092 --topic events --rows 100000
    python -m spark.pipeline --bootstrap ... --topic sales --input sales.parquet   (or .csv)
    spark-submit spark/pipeline.py --bootstrap ... (with this repository on PYTHONPATH)

1. Dataset: synthetic events (`--rows` of event_id, user_id, kind, amount_cents, ts) or the
   CSV/Parquet file given by `--input`.
2. Transform: key = the user id (synthetic) or the first column (input), value = the row as
   JSON.
3. Write with `df.write.format("quorumlog")` (Arrow writer unless `--writer row`) into the
   topic, created with `--partitions` partitions (replication factor 1) if it does not exist;
   with `--exactly-once` the write uses the sink's `exactlyOnce` option (the brokers need
   `transaction.two.phase.commit.enable=true`).
4. Read back exactly the offsets this run wrote (startingOffsets = the high watermarks seen
   before writing; `read_committed`) and compare, per log partition, the record count and a
   checksum (sum of crc32(value)) with what the keys' murmur2 partitions predict; and, row by
   row, the values read with the values written: `duplicates` counts the rows read more often
   than they were written, `missing` the rows written but not read.
5. Print a short report; exit 1 on any mismatch, duplicate or missing row.

Delivery guarantee: with `--exactly-once` the sink writes each row exactly once whatever Spark
retries (spark/README.md, Delivery guarantee), so a duplicate is a failure of the sink.
Without it the sink is at-least-once, like spark-sql-kafka: duplicates appear only when Spark
re-runs a task after a partial write, and this check reports them as a mismatch too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def build_session(master: str):
    import warnings

    from pyspark.sql import SparkSession

    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    from spark.worker_site import on_the_workers_path

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with on_the_workers_path():
        session = (
            SparkSession.builder.master(os.environ.get("SPARK_MASTER", master))
            .appName("quorumlog-pipeline")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .getOrCreate()
        )
    session.sparkContext.setLogLevel("ERROR")
    from spark import QuorumLogDataSource

    session.dataSource.register(QuorumLogDataSource)
    return session


def load_dataset(session, rows: int, input_path: str | None):
    """(DataFrame with key and value columns, description)."""
    from pyspark.sql import functions as F

    if input_path:
        reader = session.read
        if input_path.lower().endswith(".csv"):
            source = reader.option("header", "true").option("inferSchema", "true").csv(input_path)
        else:
            source = reader.parquet(input_path)
        first = source.columns[0]
        out = source.select(
            F.col(first).cast("string").alias("key"),
            F.to_json(F.struct(*[F.col(c) for c in source.columns])).alias("value"),
        )
        return out, f"{input_path} ({len(source.columns)} columns)"
    events = session.range(0, rows).select(
        F.col("id").alias("event_id"),
        (F.col("id") % 1000).alias("user_id"),
        F.element_at(
            F.array(*[F.lit(k) for k in ("view", "click", "cart", "buy")]),
            (F.col("id") % 4 + 1).cast("int"),
        ).alias("kind"),
        ((F.col("id") * 7919) % 100000).alias("amount_cents"),
        F.current_timestamp().alias("ts"),
    )
    out = events.select(
        F.concat(F.lit("user-"), F.col("user_id").cast("string")).alias("key"),
        F.to_json(F.struct(*[F.col(c) for c in events.columns])).alias("value"),
        F.array(F.struct(F.lit("origin").alias("key"), F.lit(b"pipeline").alias("value"))).alias(
            "headers"
        ),
    )
    return out, f"synthetic events ({rows} rows)"


def expected_by_partition(df, partition_count: int) -> dict[int, tuple[int, int]]:
    """Per log partition the keyed rows will land in: (records, sum of crc32(value))."""
    from pyspark.sql import functions as F

    from producer.partitioner import partition_for_key

    @F.udf("int")
    def murmur2_partition(key):
        return None if key is None else partition_for_key(key.encode(), partition_count)

    rows = (
        df.select(murmur2_partition("key").alias("p"), F.crc32(F.col("value")).alias("c"))
        .groupBy("p")
        .agg(F.count("*").alias("n"), F.sum("c").alias("s"))
        .collect()
    )
    return {r.p: (r.n, r.s) for r in rows}


def read_back(session, bootstrap: str, topic: str, starting: dict[int, int]):
    """The records this run wrote (from the offsets seen before the write), read_committed."""
    return (
        session.read.format("quorumlog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", json.dumps({topic: {str(p): o for p, o in starting.items()}}))
        .option("kafka.isolation.level", "read_committed")
        .load()
    )


def actual_by_partition(loaded) -> dict[int, tuple[int, int]]:
    from pyspark.sql import functions as F

    rows = (
        loaded.groupBy("partition")
        .agg(F.count("*").alias("n"), F.sum(F.crc32(F.col("value"))).alias("s"))
        .collect()
    )
    return {r.partition: (r.n, r.s) for r in rows}


def duplicates_and_missing(written, loaded) -> tuple[int, int]:
    """Row by row (a row is its value; the same value written k times must be read k times):
    (rows read more often than written, rows written but not read)."""
    from pyspark.sql import functions as F

    want = written.groupBy(F.col("value").cast("binary").alias("v")).agg(F.count("*").alias("w"))
    got = loaded.groupBy(F.col("value").alias("v")).agg(F.count("*").alias("g"))
    joined = want.join(got, "v", "full_outer").select(
        F.coalesce(F.col("w"), F.lit(0)).alias("w"), F.coalesce(F.col("g"), F.lit(0)).alias("g")
    )
    totals = joined.agg(
        F.sum(F.greatest(F.col("g") - F.col("w"), F.lit(0))).alias("duplicates"),
        F.sum(F.greatest(F.col("w") - F.col("g"), F.lit(0))).alias("missing"),
    ).collect()[0]
    return int(totals.duplicates or 0), int(totals.missing or 0)


@dataclass
class Verification:
    """What the pipeline wrote and read back, computed from the data."""

    description: str
    partition_count: int
    exactly_once: bool  # the write used the sink's exactlyOnce option
    written: int = 0
    read: int = 0
    duplicates: int = 0
    missing: int = 0
    write_s: float = 0.0
    read_s: float = 0.0
    # per log partition: (expected records, expected checksum), (read records, read checksum)
    partitions: dict[int, tuple[tuple[int, int], tuple[int, int]]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (
            self.duplicates == 0
            and self.missing == 0
            and self.read == self.written
            and all(want == got for want, got in self.partitions.values())
        )

    def delivery_line(self) -> str:
        """The report's delivery line; says "exactly once" only when the counts prove it."""
        mode = "exactlyOnce write" if self.exactly_once else "at-least-once write"
        verdict = "exactly once" if self.ok else "NOT exactly once"
        return (
            f"delivery: {verdict} ({mode}, read_committed): {self.written} rows written, "
            f"{self.read} rows read, duplicates {self.duplicates}, missing {self.missing}"
        )


def high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    import trio

    from producer.fetch_client import FetchClient

    async def query():
        async with FetchClient(bootstrap) as client:
            count = await client.partition_count(topic)
            return {p: await client.latest_offset(topic, p) for p in range(count)}

    return trio.run(query)


def verify_run(args: argparse.Namespace, session=None) -> Verification:  # noqa: ANN001
    """Steps 1-4: write the dataset, read it back, compare; nothing printed. In `session` (one
    the caller owns and keeps running, with the data source registered) if given, else in a
    session of its own, stopped at the end."""
    from spark.admin import create_topic

    create_topic(args.bootstrap, args.topic, args.partitions)
    before = high_watermarks(args.bootstrap, args.topic)
    own_session = session is None
    if own_session:
        session = build_session(args.master)
    cached = []
    try:
        df, description = load_dataset(session, args.rows, args.input)
        df = df.cache()
        cached.append(df)
        result = Verification(description, len(before), args.exactly_once, written=df.count())
        expected = expected_by_partition(df, len(before))
        started = time.monotonic()
        writer = (
            df.write.format("quorumlog")
            .mode("append")
            .option("bootstrap.servers", args.bootstrap)
            .option("topic", args.topic)
            .option("writer", args.writer)
        )
        if args.exactly_once:
            writer = writer.option("exactlyOnce", "true")
        writer.save()
        result.write_s = time.monotonic() - started
        started = time.monotonic()
        loaded = read_back(session, args.bootstrap, args.topic, before).cache()
        cached.append(loaded)
        result.read = loaded.count()
        actual = actual_by_partition(loaded)
        result.duplicates, result.missing = duplicates_and_missing(df, loaded)
        result.read_s = time.monotonic() - started
    finally:
        if own_session:
            session.stop()
        else:
            for frame in cached:
                frame.unpersist()
    for p in sorted(set(expected) | set(actual)):
        result.partitions[p] = (expected.get(p, (0, 0)), actual.get(p, (0, 0)))
    return result


def print_verification(result: Verification, topic: str, writer: str) -> None:
    print(f"quorumlog pipeline: {result.description} -> topic {topic!r} "
          f"({result.partition_count} partitions)")  # fmt: skip
    rate = result.written / max(result.write_s, 1e-9)
    print(f"  wrote {result.written} records in {result.write_s:.2f}s ({rate:,.0f}/s, "
          f"{writer} writer); read back in {result.read_s:.2f}s")  # fmt: skip
    print(f"  {'partition':>9} {'expected':>9} {'read':>9} {'checksum':>8}")
    for p, (want, got) in sorted(result.partitions.items()):
        print(f"  {p:>9} {want[0]:>9} {got[0]:>9} {'ok' if want == got else 'MISMATCH':>8}")
    print(f"  {result.delivery_line()}")
    print("  result: " + ("OK: every record once, checksums match" if result.ok else "MISMATCH"))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True, help="host:port[,host:port...]")
    parser.add_argument("--topic", default="quorumlog-demo")
    parser.add_argument("--rows", type=int, default=100_000, help="synthetic events to write")
    parser.add_argument("--input", default=None, help="a CSV or Parquet file instead")
    parser.add_argument("--partitions", type=int, default=3, help="for a new topic")
    parser.add_argument("--writer", choices=("arrow", "row"), default="arrow")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--exactly-once",
        action="store_true",
        help="write with the sink's exactlyOnce option (brokers with "
        "transaction.two.phase.commit.enable=true)",
    )
    args = parser.parse_args(argv)
    if args.rows < 1 or args.partitions < 1:
        parser.error("--rows and --partitions must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = verify_run(args)
    print_verification(result, args.topic, args.writer)
    return 0 if result.ok else 1


if __name__ == "__main__":
    if __package__ in (None, ""):  # spark-submit spark/pipeline.py: make `spark` importable
        sys.path.insert(0, str(REPO))
    sys.exit(main())
