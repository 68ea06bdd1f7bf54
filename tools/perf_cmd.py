"""`quorumlog perf produce`: produce N records with one client and report throughput and latency.

    quorumlog perf produce --bootstrap 127.0.0.1:9092 --topic perf --records 200000 \\
        --record-size 100 --acks all --client quorumlog [--bulk] [--json]

The same command drives every client (quorumlog's trio producer, per record or with --bulk
its send_many path; confluent-kafka; aiokafka; kafka-python) with the same settings: acks,
linger.ms (default 5), batch size 16 KiB, idempotence exactly when acks=all, the
Java-compatible murmur2 partitioner, unkeyed records of `record-size` random bytes. The clock
starts before the first send and stops when the last record is acknowledged; latency is per
record, from its send call to its delivery callback. Output: records/s, MB/s (10^6 bytes of
values), latency p50/p99/max; with --json one JSON object with at least records_per_s,
mb_per_s, p50_ms, p99_ms (and cpu_us_per_record: the client process's CPU for the run per record).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click
import trio

from tools.admin_client import AdminClient
from tools.cli_support import run_guarded
from tools.progress import CountedValues, polled_progress, stderr_is_terminal

CLIENTS = ("quorumlog", "confluent", "aiokafka", "kafka-python")
BULK_CHUNK_RECORDS = 10000  # records per send_many call in --bulk mode
BATCH_SIZE_BYTES = 16384


@dataclass
class RunWindow:
    """The timed part of one run: wall seconds and this process's CPU seconds (every thread's,
    so librdkafka's and kafka-python's I/O threads count), from the first send to the last
    acknowledgement; connecting and warming up happen before `begin`."""

    wall_start_s: float = 0.0
    cpu_start_s: float = 0.0
    elapsed_s: float = 0.0
    cpu_s: float = 0.0

    def begin(self) -> None:
        self.wall_start_s, self.cpu_start_s = time.perf_counter(), time.process_time()

    def end(self) -> float:
        self.elapsed_s = time.perf_counter() - self.wall_start_s
        self.cpu_s = time.process_time() - self.cpu_start_s
        return self.elapsed_s


def percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(fraction * (len(sorted_values) - 1))))
    return sorted_values[index]


def _acks_value(acks: str) -> int:
    return -1 if acks in ("all", "-1") else int(acks)


def run_quorumlog(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    acks: str,
    linger_ms: int,
    bulk: bool,
    window: RunWindow,
) -> tuple[float, list[float]]:
    import trio

    from producer.producer import Producer

    latencies: list[float] = []
    clock = time.perf_counter

    async def main() -> float:
        async with Producer(
            bootstrap,
            acks=_acks_value(acks),
            linger_ms=linger_ms,
            batch_size=BATCH_SIZE_BYTES,
            enable_idempotence=_acks_value(acks) == -1,
        ) as producer:
            await producer.send(topic, b"warm-up")  # metadata and connections
            await producer.flush()
            window.begin()
            if bulk:
                for begin in range(0, len(values), BULK_CHUNK_RECORDS):
                    sent_at = clock()
                    delivery = await producer.send_many(
                        topic, values[begin : begin + BULK_CHUNK_RECORDS]
                    )
                    # one timing per chunk, taken when its last record is acknowledged
                    count = delivery.record_count
                    delivery.add_callback(
                        lambda _h, t=sent_at, n=count: latencies.extend([(clock() - t) * 1000] * n)
                    )
            else:
                for value in values:
                    sent_at = clock()
                    handle = await producer.send(topic, value)
                    handle.record_handle.add_callback(
                        lambda _h, t=sent_at: latencies.append((clock() - t) * 1000)
                    )
            await producer.flush()
            return window.end()

    return trio.run(main), latencies


def run_confluent(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    acks: str,
    linger_ms: int,
    bulk: bool,
    window: RunWindow,
) -> tuple[float, list[float]]:
    import confluent_kafka

    latencies: list[float] = []
    clock = time.perf_counter
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": linger_ms,
            "batch.size": BATCH_SIZE_BYTES * 64,  # librdkafka's batches are per message set
            "enable.idempotence": _acks_value(acks) == -1,
            "partitioner": "murmur2_random",
            "queue.buffering.max.messages": 1000000,
        }
    )
    producer.produce(topic, b"warm-up")
    producer.flush(30)
    window.begin()
    for value in values:
        sent_at = clock()

        def on_delivery(error: Any, _message: Any, t: float = sent_at) -> None:
            latencies.append((clock() - t) * 1000)

        while True:
            try:
                producer.produce(topic, value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    remaining = producer.flush(60)
    assert remaining == 0, f"{remaining} records not delivered"
    return window.end(), latencies


def run_aiokafka(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    acks: str,
    linger_ms: int,
    bulk: bool,
    window: RunWindow,
) -> tuple[float, list[float]]:
    import asyncio

    from aiokafka import AIOKafkaProducer

    latencies: list[float] = []
    clock = time.perf_counter

    async def main() -> float:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all" if _acks_value(acks) == -1 else _acks_value(acks),
            linger_ms=linger_ms,
            max_batch_size=BATCH_SIZE_BYTES,
            enable_idempotence=_acks_value(acks) == -1,
        )
        await producer.start()
        try:
            await (await producer.send(topic, b"warm-up"))
            window.begin()
            last = None
            for value in values:
                sent_at = clock()
                last = await producer.send(topic, value)
                last.add_done_callback(lambda _f, t=sent_at: latencies.append((clock() - t) * 1000))
            await producer.flush()
            if last is not None:
                await last
            return window.end()
        finally:
            await producer.stop()

    return asyncio.run(main()), latencies


def run_kafka_python(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    acks: str,
    linger_ms: int,
    bulk: bool,
    window: RunWindow,
) -> tuple[float, list[float]]:
    from kafka import KafkaProducer

    latencies: list[float] = []
    clock = time.perf_counter
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all" if _acks_value(acks) == -1 else _acks_value(acks),
        linger_ms=linger_ms,
        batch_size=BATCH_SIZE_BYTES,
        enable_idempotence=_acks_value(acks) == -1,
    )
    try:
        producer.send(topic, b"warm-up").get(timeout=30)
        window.begin()
        for value in values:
            sent_at = clock()
            future = producer.send(topic, value)
            future.add_both(lambda _r, t=sent_at: latencies.append((clock() - t) * 1000))
        producer.flush()
        return window.end(), latencies
    finally:
        producer.close()


RUNNERS: dict[str, Callable[..., tuple[float, list[float]]]] = {
    "quorumlog": run_quorumlog,
    "confluent": run_confluent,
    "aiokafka": run_aiokafka,
    "kafka-python": run_kafka_python,
}


def run_produce_benchmark(
    *,
    bootstrap: str,
    topic: str,
    records: int,
    record_size: int,
    acks: str = "all",
    client: str = "quorumlog",
    linger_ms: int = 5,
    bulk: bool = False,
    show_progress: bool = False,
) -> dict[str, Any]:
    """Run one client's produce workload; the result dict the command prints. With
    show_progress a bar on stderr counts the records handed to the client's send loop."""
    if client not in RUNNERS:
        raise click.BadParameter(f"unknown client {client!r}; one of {', '.join(CLIENTS)}")
    payload = os.urandom(record_size)
    values = CountedValues([payload] * records) if show_progress else [payload] * records
    progress = (
        polled_progress("sending", records, lambda: values.handed_out)
        if show_progress
        else contextlib.nullcontext()
    )
    window = RunWindow()
    with progress:
        elapsed_s, latencies = RUNNERS[client](
            bootstrap, topic, values, acks, linger_ms, bulk, window
        )
    latencies.sort()
    return {
        "client": client + ("-bulk" if bulk and client == "quorumlog" else ""),
        "records": records,
        "record_size": record_size,
        "acks": acks,
        "linger_ms": linger_ms,
        "elapsed_s": round(elapsed_s, 4),
        "records_per_s": round(records / elapsed_s, 1),
        "mb_per_s": round(records * record_size / elapsed_s / 1e6, 3),
        "p50_ms": round(percentile(latencies, 0.50), 3),
        "p99_ms": round(percentile(latencies, 0.99), 3),
        "max_ms": round(latencies[-1], 3) if latencies else float("nan"),
        "acknowledged": len(latencies),
        "cpu_s": round(window.cpu_s, 4),
        "cpu_us_per_record": round(window.cpu_s / records * 1e6, 2),
    }


async def _check_cluster(bootstrap: str) -> None:
    """Fail fast with one line when nobody answers (clients would retry for minutes)."""
    async with AdminClient(bootstrap) as admin:
        await admin.metadata([])  # brokers only; every Kafka-protocol broker answers it


@click.group("perf")
def perf() -> None:
    """Performance tools (like kafka-producer-perf-test).

    \b
    Examples:
      quorumlog perf produce --bootstrap 127.0.0.1:9092 --topic perf --records 200000
    """


@perf.command("produce")
@click.option("--bootstrap", required=True, help="host:port[,host:port...]")
@click.option("--topic", required=True)
@click.option("--records", type=click.IntRange(1), required=True, help="records to produce")
@click.option("--record-size", type=click.IntRange(0), default=100, show_default=True)
@click.option(
    "--acks", type=click.Choice(["all", "-1", "0", "1"]), default="all", show_default=True
)
@click.option("--client", type=click.Choice(CLIENTS), default="quorumlog", show_default=True)
@click.option("--linger-ms", type=click.IntRange(0), default=5, show_default=True)
@click.option("--bulk", is_flag=True, help="quorumlog: use send_many (the bulk path)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
def produce(
    bootstrap: str,
    topic: str,
    records: int,
    record_size: int,
    acks: str,
    client: str,
    linger_ms: int,
    bulk: bool,
    as_json: bool,
) -> None:
    """Produce N records and print records/s, MB/s and latency percentiles.

    A progress bar on stderr (a terminal, without --json) counts the records sent.

    \b
    Examples:
      quorumlog perf produce --bootstrap 127.0.0.1:9092 --topic perf --records 200000
      quorumlog perf produce --bootstrap 127.0.0.1:9092 --topic perf --records 1000000 \\
          --record-size 100 --acks 1 --client confluent --json
    """
    run_guarded(trio.run, _check_cluster, bootstrap)
    result = run_produce_benchmark(
        bootstrap=bootstrap,
        topic=topic,
        records=records,
        record_size=record_size,
        acks=acks,
        client=client,
        linger_ms=linger_ms,
        bulk=bulk,
        show_progress=not as_json and stderr_is_terminal(),
    )
    if as_json:
        click.echo(json.dumps(result))
        return
    click.echo(
        f"{result['client']}: {records} records of {record_size} bytes, acks={acks}: "
        f"{result['records_per_s']:.0f} records/s, {result['mb_per_s']:.2f} MB/s, "
        f"latency p50 {result['p50_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms, "
        f"max {result['max_ms']:.1f} ms"
    )
