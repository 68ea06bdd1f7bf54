"""Replication cost, with real `quorumlog node` processes and confluent-kafka.

1. Throughput, in the same run: `--count` 100-byte values (no key, one partition, linger.ms 5)
   produced by one confluent-kafka Producer in this process (idempotent with acks=all; librdkafka
   requires acks=all for it), timed from the first produce() to flush() of the measured records.
   Before the clock starts each producer is warmed up (one record produced and flushed): its
   connections, metadata and -- idempotent -- its producer id are in place. Without that, a short
   run measured mostly the client's start: an idempotent librdkafka producer waits for a broker
   connection, its PID state machine's timer and an InitProducerId (~300 ms in all, seen with
   debug=eos,protocol), which the non-idempotent acks=1 producer skips; at --count 10000 that
   start alone made rf3 acks=all look 10x slower. The start is reported in its own column.
   * `rf3 acks=all`: a 3-node cluster, topic RF 3, min.insync.replicas 2: each batch is
     acknowledged once both followers fetched it (HW passed it);
   * `rf1 acks=all`: the 1-node cluster, topic RF 1, the same idempotent producer: replication's
     cost is the gap between this row and the first;
   * `rf1 acks=1`: the 1-node cluster, topic RF 1: the append alone.
   Latency, per setup: `--latency-count` single records, each produced and flushed alone
   (linger.ms 0); p50 and p99 of produce-to-ack. For rf3 acks=all that is the whole chain:
   leader append -> both followers' long-polled fetches answered -> follower append -> next
   fetch -> HW -> produce answered. Traced per step (2026-11, 2 cores): ~1.2-2.4 ms p50, every
   step event-driven (no timer: tests/replication's test_acks_all_latency_waits_for_no_timer),
   each hop a Python process's turn; with 1 MB batches the client's own produce() loop
   (~2 us/record of CPU) bounds both setups.
Fail-over is measured by bench/failover.py, on `quorumlog up` defaults.

    python -m bench.replication [--count 100000] [--latency-count 200]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import trio

from bench.rows import emit
from tools.confluent_produce import produce_waiting
from tools.perf_measure import percentile

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "node"))
sys.path.insert(0, str(HERE.parent / "tests" / "replication"))

from replication_harness import (  # noqa: E402
    TOPIC,
    create_topic,
    producer,
    start_cluster,
)

VALUE_BYTES = 100


def throughput(bootstrap: str, count: int, acks: str) -> tuple[float, float]:
    """(records/s over `count` records after the warm-up, seconds the warm-up record took)."""
    p = producer(
        bootstrap,
        acks=acks,
        **{"enable.idempotence": acks == "all"},
        **{
            "batch.size": 1_000_000,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 1_000_000,
        },
    )
    value = b"x" * VALUE_BYTES
    errors: list = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    started = time.perf_counter()
    p.produce(TOPIC, value, on_delivery=on_delivery)
    assert p.flush(60) == 0
    start_s = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(count):
        produce_waiting(p, TOPIC, value, poll_s=0.01, on_delivery=on_delivery)
    assert p.flush(120) == 0
    elapsed = time.perf_counter() - started
    assert not errors, errors[:3]
    return count / elapsed, start_s


def latency_ms(bootstrap: str, count: int, acks: str) -> list[float]:
    """Produce-to-ack of `count` single records, one at a time, sorted (after a warm-up)."""
    p = producer(bootstrap, acks=acks, **{"enable.idempotence": acks == "all", "linger.ms": 0})
    p.produce(TOPIC, b"w")
    assert p.flush(60) == 0
    value = b"x" * VALUE_BYTES
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        p.produce(TOPIC, value)
        assert p.flush(60) == 0
        samples.append((time.perf_counter() - started) * 1000)
    return sorted(samples)


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-replication-") as tmp:
        cluster3 = await trio.to_thread.run_sync(start_cluster, Path(tmp) / "rf3", 3)
        cluster1 = await trio.to_thread.run_sync(start_cluster, Path(tmp) / "rf1", 1)
        try:
            await trio.to_thread.run_sync(create_topic, cluster3.layout.bootstrap_servers, 1, 2)
            await trio.to_thread.run_sync(
                lambda: create_topic_rf(cluster1.layout.bootstrap_servers, 1)
            )
            rows = []
            for name, cluster, acks in (
                ("rf3 acks=all (3 nodes)", cluster3, "all"),
                ("rf1 acks=all (1 node)", cluster1, "all"),
                ("rf1 acks=1 (1 node)", cluster1, "1"),
            ):
                rate, start_s = await trio.to_thread.run_sync(
                    throughput, cluster.layout.bootstrap_servers, args.count, acks
                )
                samples = await trio.to_thread.run_sync(
                    latency_ms, cluster.layout.bootstrap_servers, args.latency_count, acks
                )
                rows.append({"setup": name, "records_per_s": rate,
                             "mb_per_s": rate * VALUE_BYTES / 1e6, "producer_start_s": start_s,
                             "latency_p50_ms": percentile(samples, 0.5),
                             "latency_p99_ms": percentile(samples, 0.99)})  # fmt: skip
            cluster1.stop_all()
            print("| setup | records/s | MB/s (values) | producer start (ms) "
                  "| 1-record latency p50 / p99 (ms) |\n|---|---|---|---|---|")  # fmt: skip
            for row in rows:
                print(f"| {row['setup']} | {row['records_per_s']:,.0f} | {row['mb_per_s']:.1f} "
                      f"| {row['producer_start_s'] * 1000:.0f} "
                      f"| {row['latency_p50_ms']:.2f} / {row['latency_p99_ms']:.2f} |")  # fmt: skip
            emit("replication_throughput", rows)
        finally:
            cluster3.stop_all()
            cluster1.stop_all()


def create_topic_rf(bootstrap: str, replication_factor: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, replication_factor)])[TOPIC].result(30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--latency-count", type=int, default=200)
    args = parser.parse_args()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    trio.run(main_async, args)


if __name__ == "__main__":
    main()
