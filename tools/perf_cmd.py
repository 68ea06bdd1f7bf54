"""`quorumlog perf produce`: produce N records with one client and report throughput and latency.

    quorumlog perf produce --bootstrap 127.0.0.1:9092 --topic perf --records 200000 \\
        --record-size 100 --acks all --client quorumlog [--bulk] [--json]

The same command drives every client (quorumlog's trio producer, per record or with --bulk
its send_many path; confluent-kafka; aiokafka; kafka-python) with the same settings: acks,
linger.ms (default 5), batch size 16 KiB, idempotence exactly when acks=all, the
Java-compatible murmur2 partitioner, unkeyed records of `record-size` random bytes. The clock
starts before the first send and stops when the last record is acknowledged; latency is per
record, from its send call to its delivery callback. Every client runs the same shape; a
small sender class per client holds what differs. Output: records/s, MB/s (10^6 bytes of
values), latency p50/p99/max (percentiles as kafka-producer-perf-test takes them); with --json one JSON object with at least records_per_s,
mb_per_s, p50_ms, p99_ms (and cpu_us_per_record: the client process's CPU for the run per record).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import click
import trio

from tools.admin_client import AdminClient
from tools.cli_support import command_config_option, run_guarded
from tools.client_security import PLAINTEXT, ClientSecurity
from tools.confluent_produce import produce_waiting
from tools.perf_measure import LatencyLog, RunWindow, percentile
from tools.progress import CountedValues, maybe_progress, stderr_is_terminal

CLIENTS = ("quorumlog", "confluent", "aiokafka", "kafka-python")
SECURE_CLIENTS = ("quorumlog", "confluent")  # the ones --command-config configures
BULK_CHUNK_RECORDS = 10000  # records per send_many call in --bulk mode
BATCH_SIZE_BYTES = 16384


@dataclass(frozen=True)
class ProduceSettings:
    """What every client is given, each in its own configuration words."""

    bootstrap: str
    topic: str
    acks: str  # as typed: all, -1, 0 or 1
    linger_ms: int
    security: ClientSecurity = PLAINTEXT  # --command-config: quorumlog and confluent only

    @property
    def acks_value(self) -> int:
        """acks as a number (-1: all), as our producer takes it."""
        return -1 if self.acks in ("all", "-1") else int(self.acks)

    @property
    def idempotence(self) -> bool:
        """On exactly when acks=all (for every client)."""
        return self.acks_value == -1

    @property
    def acks_word(self) -> int | str:
        """acks as aiokafka and kafka-python take it."""
        return "all" if self.idempotence else self.acks_value


# -- the clients ---------------------------------------------------------------------------------
#
# A run has one shape (`_run_blocking`, `_run_async`): open the client, warm it up (metadata
# and connections), start the window, send every value with a LatencyLog timer as its
# acknowledgement callback, flush until all are acknowledged, stop the window, close. A sender
# class holds only what differs per client; its DRIVER says how the shape runs it.


class _Sender:
    DRIVER = "blocking"  # called from this thread; or "trio" / "asyncio": an async client

    def __init__(self, settings: ProduceSettings, bulk: bool) -> None:
        self.topic = settings.topic

    def sends(self, values: list[bytes]) -> Iterable[Any]:
        """What each send call takes: one value (the bulk path takes chunks)."""
        return values

    def close(self) -> None:
        pass


class _ConfluentSender(_Sender):
    def __init__(self, settings: ProduceSettings, bulk: bool) -> None:
        import confluent_kafka

        super().__init__(settings, bulk)
        self.producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": settings.bootstrap,
                "acks": settings.acks,
                "linger.ms": settings.linger_ms,
                "batch.size": BATCH_SIZE_BYTES * 64,  # librdkafka's batches are per message set
                "enable.idempotence": settings.idempotence,
                "partitioner": "murmur2_random",
                "queue.buffering.max.messages": 1000000,
                **settings.security.confluent,
            }
        )

    def warm_up(self) -> None:
        self.producer.produce(self.topic, b"warm-up")
        self.producer.flush(30)

    def send(self, value: bytes, latencies: LatencyLog) -> None:
        on_delivery = latencies.timer()
        produce_waiting(self.producer, self.topic, value, poll_s=0.01, on_delivery=on_delivery)
        self.producer.poll(0)

    def flush(self) -> None:
        remaining = self.producer.flush(60)
        assert remaining == 0, f"{remaining} records not delivered"


class _KafkaPythonSender(_Sender):
    def __init__(self, settings: ProduceSettings, bulk: bool) -> None:
        from kafka import KafkaProducer

        super().__init__(settings, bulk)
        self.producer = KafkaProducer(
            bootstrap_servers=settings.bootstrap,
            acks=settings.acks_word,
            linger_ms=settings.linger_ms,
            batch_size=BATCH_SIZE_BYTES,
            enable_idempotence=settings.idempotence,
        )

    def warm_up(self) -> None:
        self.producer.send(self.topic, b"warm-up").get(timeout=30)

    def send(self, value: bytes, latencies: LatencyLog) -> None:
        on_ack = latencies.timer()
        self.producer.send(self.topic, value).add_both(on_ack)

    def flush(self) -> None:
        self.producer.flush()

    def close(self) -> None:
        self.producer.close()


class _QuorumlogSender(_Sender):
    """Our trio producer: `send` per record, or with `bulk` send_many per chunk of values."""

    DRIVER = "trio"

    def __init__(self, settings: ProduceSettings, bulk: bool) -> None:
        from producer.producer import Producer

        super().__init__(settings, bulk)
        self.bulk = bulk
        self.producer = Producer(
            settings.bootstrap,
            acks=settings.acks_value,
            linger_ms=settings.linger_ms,
            batch_size=BATCH_SIZE_BYTES,
            enable_idempotence=settings.idempotence,
            connector=settings.security.connector,
        )

    async def __aenter__(self) -> _QuorumlogSender:
        await self.producer.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self.producer.__aexit__(*exc_info)

    async def warm_up(self) -> None:
        await self.producer.send(self.topic, b"warm-up")
        await self.producer.flush()

    def sends(self, values: list[bytes]) -> Iterable[Any]:
        if not self.bulk:
            return values
        return (
            values[begin : begin + BULK_CHUNK_RECORDS]
            for begin in range(0, len(values), BULK_CHUNK_RECORDS)
        )

    async def send(self, value_or_chunk: Any, latencies: LatencyLog) -> None:
        if not self.bulk:
            on_ack = latencies.timer()
            (await self.producer.send(self.topic, value_or_chunk)).record_handle.add_callback(
                on_ack
            )
            return
        # one timing per chunk, taken when its last record is acknowledged
        on_chunk = latencies.timer(len(value_or_chunk))
        (await self.producer.send_many(self.topic, value_or_chunk)).add_callback(on_chunk)

    async def flush(self) -> None:
        await self.producer.flush()


class _AiokafkaSender(_Sender):
    DRIVER = "asyncio"

    def __init__(self, settings: ProduceSettings, bulk: bool) -> None:
        from aiokafka import AIOKafkaProducer

        super().__init__(settings, bulk)
        self.last: Any = None  # the last send's future: awaited after the flush
        self.producer = AIOKafkaProducer(
            bootstrap_servers=settings.bootstrap,
            acks=settings.acks_word,
            linger_ms=settings.linger_ms,
            max_batch_size=BATCH_SIZE_BYTES,
            enable_idempotence=settings.idempotence,
        )

    async def __aenter__(self) -> _AiokafkaSender:
        await self.producer.start()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.producer.stop()

    async def warm_up(self) -> None:
        await (await self.producer.send(self.topic, b"warm-up"))

    async def send(self, value: bytes, latencies: LatencyLog) -> None:
        on_ack = latencies.timer()
        self.last = await self.producer.send(self.topic, value)
        self.last.add_done_callback(on_ack)

    async def flush(self) -> None:
        await self.producer.flush()
        if self.last is not None:
            await self.last


SENDERS: dict[str, type[_Sender]] = {
    "quorumlog": _QuorumlogSender,
    "confluent": _ConfluentSender,
    "aiokafka": _AiokafkaSender,
    "kafka-python": _KafkaPythonSender,
}
assert set(SENDERS) == set(CLIENTS)


def _run_blocking(sender: Any, values: list[bytes], window: RunWindow) -> tuple[float, list[float]]:
    latencies = LatencyLog()
    try:
        sender.warm_up()
        window.begin()
        for item in sender.sends(values):
            sender.send(item, latencies)
        sender.flush()
        return window.end(), latencies.ms
    finally:
        sender.close()


async def _run_async(
    sender_class: type[_Sender],
    settings: ProduceSettings,
    bulk: bool,
    values: list[bytes],
    window: RunWindow,
) -> tuple[float, list[float]]:
    latencies = LatencyLog()
    client: Any = sender_class(settings, bulk)  # made inside the event loop
    async with client as sender:
        await sender.warm_up()
        window.begin()
        for item in sender.sends(values):
            await sender.send(item, latencies)
        await sender.flush()
        return window.end(), latencies.ms


def run_client(
    client: str, settings: ProduceSettings, bulk: bool, values: list[bytes], window: RunWindow
) -> tuple[float, list[float]]:
    """One timed run of `client`: (elapsed seconds, per-record latencies in ms)."""
    sender_class = SENDERS[client]
    if sender_class.DRIVER == "trio":
        return trio.run(_run_async, sender_class, settings, bulk, values, window)
    if sender_class.DRIVER == "asyncio":
        import asyncio

        return asyncio.run(_run_async(sender_class, settings, bulk, values, window))
    return _run_blocking(sender_class(settings, bulk), values, window)


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
    security: ClientSecurity = PLAINTEXT,
) -> dict[str, Any]:
    """Run one client's produce workload; the result dict the command prints. With
    show_progress a bar on stderr counts the records handed to the client's send loop."""
    if client not in SENDERS:
        raise click.BadParameter(f"unknown client {client!r}; one of {', '.join(CLIENTS)}")
    if security is not PLAINTEXT and client not in SECURE_CLIENTS:
        raise click.UsageError(
            f"--command-config works with --client {' or '.join(SECURE_CLIENTS)}"
        )
    payload = os.urandom(record_size)
    counted = CountedValues([payload] * records) if show_progress else None
    values = counted if counted is not None else [payload] * records
    window = RunWindow()
    handed_out = lambda: counted.handed_out if counted is not None else 0  # noqa: E731
    with maybe_progress(show_progress, "sending", records, handed_out):
        elapsed_s, latencies = run_client(
            client,
            ProduceSettings(bootstrap, topic, acks, linger_ms, security),
            bulk,
            values,
            window,
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


async def _check_cluster(bootstrap: str, security: ClientSecurity = PLAINTEXT) -> None:
    """Fail fast with one line when nobody answers (clients would retry for minutes)."""
    async with AdminClient(bootstrap, connector=security.connector) as admin:
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
@command_config_option
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
    security: ClientSecurity,
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
    run_guarded(trio.run, _check_cluster, bootstrap, security)
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
        security=security,
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
