"""Consume throughput against the produce rate of the same run, on `quorumlog up` defaults.

A 3-node cluster with the settings `quorumlog up` writes, one topic of 3 partitions, RF 3,
min.insync.replicas 2. First one confluent-kafka producer (acks=all, idempotent, linger.ms 5,
1 MB batches) writes `--count` 100-byte values, timed from the first produce() to flush():
the produce rate. Then the whole topic is read from the start, once by each consumer, through
`quorumlog perf consume`'s runners (tools/perf_consume.py): our FetchClient (one fetch loop per
partition) and confluent-kafka's Consumer on a plain assignment; each from its first fetch to
its last record. The consumers read what the producer wrote in this run, so the ratios say how
the fetch path keeps up with the produce path on the same machine.

    python -m bench.consume_throughput [--count 500000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.defaults_cluster import defaults_cluster  # noqa: E402
from bench.rows import emit
from tools.confluent_produce import produce_waiting

TOPIC = "consume-bench"
VALUE_BYTES = 100


def produce(bootstrap: str, count: int) -> float:
    """Records/s of one confluent-kafka producer writing `count` values (acks=all)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([topic])[TOPIC].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "batch.size": 1_000_000, "batch.num.messages": 10_000,
                  "queue.buffering.max.messages": 1_000_000})  # fmt: skip
    p.produce(TOPIC, b"w" * VALUE_BYTES)
    assert p.flush(60) == 0
    value = b"x" * VALUE_BYTES
    start = time.perf_counter()
    for _ in range(count):
        produce_waiting(p, TOPIC, value, poll_s=0.01)
    assert p.flush(300) == 0
    return count / (time.perf_counter() - start)


def main() -> None:
    from tools.perf_consume import run_consume_benchmark

    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=500_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-consume-") as tmp:
        cluster = defaults_cluster(Path(tmp), 3)
        cluster.start_all()
        try:
            bootstrap = cluster.layout.bootstrap_servers
            produce_rate = produce(bootstrap, args.count)
            results = {
                client: run_consume_benchmark(bootstrap=bootstrap, topic=TOPIC, client=client)
                for client in ("quorumlog", "confluent")
            }
        finally:
            cluster.stop_all()
    rows = [{"side": "produce (confluent-kafka, acks=all)", "records_per_s": produce_rate,
             "vs_produce": 1.0}]  # fmt: skip
    for client, result in results.items():
        name = "our FetchClient" if client == "quorumlog" else "confluent-kafka Consumer"
        rows.append({"side": f"consume ({name})", "records_per_s": result["records_per_s"],
                     "vs_produce": result["records_per_s"] / produce_rate})  # fmt: skip
    print(f"{args.count:,} x {VALUE_BYTES} B, 3 partitions RF 3, 3 nodes on `quorumlog up` "
          "defaults\n| side | records/s | vs produce |\n|---|---|---|")  # fmt: skip
    for row in rows:
        print(f"| {row['side']} | {row['records_per_s']:,.0f} | {row['vs_produce']:.2f}x |")
    emit("consume_throughput", rows)


if __name__ == "__main__":
    main()
