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
   topic, created with `--partitions` partitions (replication factor 1) if it does not exist.
4. Read back exactly the offsets this run wrote (startingOffsets = the high watermarks seen
   before writing) and compare, per log partition, the record count and a checksum
   (sum of crc32(value)) with what the keys' murmur2 partitions predict.
5. Print a short report; exit 1 on any mismatch.

Delivery guarantee (for the README): the quorumlog sink is at-least-once, like
spark-sql-kafka. No acknowledged record is lost and a successful job had every record
acknowledged (idempotent producer, acks=all by default); duplicates appear only when Spark
re-runs a task after a partial write (a retry or a speculative copy), in which case the
earlier attempt's acknowledged records are written again. This check then reports the extra
records as a mismatch, which is the point: it verifies exactly-once delivery for a clean run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def build_session(master: str):
    import warnings

    from pyspark.sql import SparkSession

    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    paths = [str(REPO), os.environ.get("PYTHONPATH", "")]
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
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


def actual_by_partition(session, bootstrap: str, topic: str, starting: dict[int, int]):
    from pyspark.sql import functions as F

    loaded = (
        session.read.format("quorumlog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", json.dumps({topic: {str(p): o for p, o in starting.items()}}))
        .load()
    )
    rows = (
        loaded.groupBy("partition")
        .agg(F.count("*").alias("n"), F.sum(F.crc32(F.col("value"))).alias("s"))
        .collect()
    )
    return {r.partition: (r.n, r.s) for r in rows}


def high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    import trio

    from producer.fetch_client import FetchClient

    async def query():
        async with FetchClient(bootstrap) as client:
            count = await client.partition_count(topic)
            return {p: await client.latest_offset(topic, p) for p in range(count)}

    return trio.run(query)


def run(args: argparse.Namespace) -> int:
    from spark.admin import create_topic

    create_topic(args.bootstrap, args.topic, args.partitions)
    before = high_watermarks(args.bootstrap, args.topic)
    session = build_session(args.master)
    try:
        df, description = load_dataset(session, args.rows, args.input)
        df = df.cache()
        total = df.count()
        expected = expected_by_partition(df, len(before))
        started = time.monotonic()
        (
            df.write.format("quorumlog")
            .mode("append")
            .option("bootstrap.servers", args.bootstrap)
            .option("topic", args.topic)
            .option("writer", args.writer)
            .save()
        )
        write_s = time.monotonic() - started
        started = time.monotonic()
        actual = actual_by_partition(session, args.bootstrap, args.topic, before)
        read_s = time.monotonic() - started
    finally:
        session.stop()
    print(f"quorumlog pipeline: {description} -> topic {args.topic!r} ({len(before)} partitions)")
    print(f"  wrote {total} records in {write_s:.2f}s ({total / max(write_s, 1e-9):,.0f}/s, "
          f"{args.writer} writer); read back in {read_s:.2f}s")  # fmt: skip
    print(f"  {'partition':>9} {'expected':>9} {'read':>9} {'checksum':>8}")
    ok = True
    for p in sorted(set(expected) | set(actual)):
        want, got = expected.get(p, (0, 0)), actual.get(p, (0, 0))
        good = want == got
        ok &= good
        print(f"  {p:>9} {want[0]:>9} {got[0]:>9} {'ok' if good else 'MISMATCH':>8}")
    print("  result: " + ("OK: every record once, checksums match" if ok else "MISMATCH"))
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True, help="host:port[,host:port...]")
    parser.add_argument("--topic", default="quorumlog-demo")
    parser.add_argument("--rows", type=int, default=100_000, help="synthetic events to write")
    parser.add_argument("--input", default=None, help="a CSV or Parquet file instead")
    parser.add_argument("--partitions", type=int, default=3, help="for a new topic")
    parser.add_argument("--writer", choices=("arrow", "row"), default="arrow")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.partitions < 1:
        parser.error("--rows and --partitions must be at least 1")
    return run(args)


if __name__ == "__main__":
    if __package__ in (None, ""):  # spark-submit spark/pipeline.py: make `spark` importable
        sys.path.insert(0, str(REPO))
    sys.exit(main())
