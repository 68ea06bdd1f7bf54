"""Partition scale: how a 3-node cluster on `quorumlog up` defaults copes with many partitions.

For each size (`--partitions 1000 5000 10000`): create that many partitions, RF 3, as topics of
at most TOPIC_PARTITIONS (1,000) partitions, one CreateTopics each through confluent-kafka's
AdminClient (Kafka's controller refuses an operation of more than 10,000 metadata records, so
10,000 partitions cannot be one topic there either; neither can they here), then measure
* `create_s`: from the first CreateTopics until the last one's future resolved;
* `isr_full_s`: from then until every partition has a leader and its whole replica set in its
  ISR (metadata polled every 0.2 s, so +-0.2 s);
* the first acks=all record of every partition: one record per partition from one
  confluent-kafka producer (acks=all, linger.ms 5), p50/p99/max of produce-to-ack and the
  seconds until all were acknowledged (librdkafka sends one partition per ProduceRequest and a
  broker answers one request per connection at a time, as Kafka does, so this is a chain of
  replication round trips as long as a third of the partitions);
* `idle_cpu_pct`: the three node processes' CPU (% of one core, summed) over 5 idle seconds
  afterwards: what following that many idle partitions costs (every fetch session round).
Every size runs on a fresh cluster. The nodes run Kafka's defaults for everything (the settings
`quorumlog up` writes), nothing from the test harness. A node keeps one file descriptor open
per segment (its .log; index entries are written by open-append-close, as Kafka keeps one per
segment with its indexes mmapped), so a size whose replicas need more descriptors than a node
may open (RLIMIT_NOFILE) is reported as skipped with that reason rather than run into EMFILE.

    python -m bench.partition_scale [--partitions 1000 5000 10000]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

from bench.defaults_cluster import defaults_cluster  # noqa: E402
from bench.process_cpu import cpu_seconds
from bench.rows import emit

TOPIC = "scale"
TOPIC_PARTITIONS = 1000
FDS_PER_PARTITION = 1  # one segment: its .log
FDS_BASE = 500  # sockets, Raft journal, metadata, Python itself


def measure(partitions: int, workdir: Path) -> dict:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = defaults_cluster(workdir, 3)
    cluster.start_all()
    try:
        bootstrap = cluster.layout.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        sizes = {f"{TOPIC}-{i}": min(TOPIC_PARTITIONS, partitions - i * TOPIC_PARTITIONS)
                 for i in range(-(-partitions // TOPIC_PARTITIONS))}  # fmt: skip
        start = time.monotonic()
        for name, count in sizes.items():
            admin.create_topics([NewTopic(name, count, 3)], request_timeout=600)[name].result()
        created = time.monotonic()
        while True:
            described = [
                p for t in admin.list_topics(timeout=60).topics.values()
                if t.topic in sizes for p in t.partitions.values()
            ]  # fmt: skip
            full = sum(1 for p in described if p.leader >= 0 and len(p.isrs) == 3)
            if len(described) == partitions and full == partitions:
                break
            if time.monotonic() - created > 600:
                raise RuntimeError(f"only {full} of {partitions} ISRs full after 600 s")
            time.sleep(0.2)
        isr_full = time.monotonic()
        latencies: list[float] = []
        errors: list = []
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        producer.produce(next(iter(sizes)), b"warm-up", partition=0)
        producer.flush(60)
        first = time.monotonic()
        for name, count in sizes.items():
            for partition in range(count):
                sent = time.monotonic()

                def on_delivery(err, _msg, sent=sent) -> None:
                    (errors.append(err) if err else latencies.append(time.monotonic() - sent))

                producer.produce(name, b"x" * 100, partition=partition, on_delivery=on_delivery)
                producer.poll(0)
        producer.flush(600)
        all_acked = time.monotonic()
        if errors:
            raise RuntimeError(f"{len(errors)} deliveries failed, e.g. {errors[0]}")
        pids = [p.pid for p in cluster.processes.values()]
        cpu_before = cpu_seconds(pids)
        time.sleep(5)
        idle_cpu_pct = (cpu_seconds(pids) - cpu_before) / 5 * 100
        latencies.sort()
        return {
            "partitions": partitions,
            "create_s": created - start,
            "isr_full_s": isr_full - created,
            "first_ack_p50_ms": statistics.median(latencies) * 1000,
            "first_ack_p99_ms": latencies[int(0.99 * (len(latencies) - 1))] * 1000,
            "first_ack_max_ms": latencies[-1] * 1000,
            "all_acked_s": all_acked - first,
            "idle_cpu_pct": idle_cpu_pct,
        }
    finally:
        cluster.stop_all()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, nargs="+", default=[1000, 5000, 10000])
    args = parser.parse_args()
    rows = []
    print("| partitions (RF 3) | create s | until every ISR full s | first acks=all p50 / p99 / "
          "max ms | all acked s | idle CPU % (3 nodes) |\n|---|---|---|---|---|---|")  # fmt: skip
    fd_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    for partitions in args.partitions:
        needed = FDS_PER_PARTITION * partitions + FDS_BASE  # RF 3 on 3 nodes: all on each
        if fd_limit != resource.RLIM_INFINITY and needed > fd_limit:
            print(f"| {partitions:,} | skipped: each node needs ~{needed:,} file descriptors, "
                  f"RLIMIT_NOFILE is {fd_limit:,} | | | | |", flush=True)  # fmt: skip
            rows.append({"partitions": partitions, "skipped": f"needs ~{needed:,} file "
                         f"descriptors per node, RLIMIT_NOFILE {fd_limit:,}"})  # fmt: skip
            continue
        with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
            row = measure(partitions, Path(tmp))
        rows.append(row)
        print(f"| {partitions:,} | {row['create_s']:.1f} | {row['isr_full_s']:.1f} "
              f"| {row['first_ack_p50_ms']:.0f} / {row['first_ack_p99_ms']:.0f} / "
              f"{row['first_ack_max_ms']:.0f} | {row['all_acked_s']:.1f} "
              f"| {row['idle_cpu_pct']:.0f} |", flush=True)  # fmt: skip
    emit("partition_scale", rows)


if __name__ == "__main__":
    main()
