"""`quorumlog perf consume`: read a topic from its beginning and report throughput.

    quorumlog perf consume --bootstrap 127.0.0.1:9092 --topic perf [--records N] \\
        [--client quorumlog|confluent] [--json]

Like kafka-consumer-perf-test: the records of every partition are read from the log start
offset up to the high watermark each had when the run began (or until --records N, whichever
comes first), and the report is records/s and MB/s (10^6 bytes of keys and values). Clients:
`quorumlog` is our FetchClient with one fetch loop per partition, concurrently; `confluent` is
confluent-kafka's Consumer on a plain assignment (no group, nothing committed). The clock runs
from the first fetch to the last record. A progress bar on stderr counts records (terminal,
not --json). An empty topic is an error: there is nothing to measure.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import click
import trio

from tools.admin_client import AdminClient
from tools.cli_support import CommandError, command_config_option, run_guarded
from tools.client_security import PLAINTEXT, ClientSecurity
from tools.progress import maybe_progress, stderr_is_terminal

CLIENTS = ("quorumlog", "confluent")
POLL_BATCH_MESSAGES = 1000  # confluent: messages per consume() call
POLL_TIMEOUT_S = 0.5
IDLE_LIMIT_S = 30.0  # confluent: no record and no end-of-partition for this long is an error


@dataclass
class Tally:
    """What was read so far (updated by the fetch loops, read by the progress bar)."""

    records: int = 0
    payload_bytes: int = 0  # keys and values

    def add(self, key: bytes | None, value: bytes | None) -> None:
        """Count one record read (its key and value bytes)."""
        self.records += 1
        self.payload_bytes += len(value or b"") + len(key or b"")


async def _plan(bootstrap: str, topic: str, security: ClientSecurity) -> dict[int, tuple[int, int]]:
    """{partition: (log start offset, high watermark)} at the start of the run."""
    async with AdminClient(bootstrap, connector=security.connector) as admin:
        description = await admin.describe_topic(topic)
        partitions = [p.partition for p in description.partitions]
        starts = await admin.log_start_offsets(topic, partitions)
        ends = await admin.high_watermarks(topic, partitions)
    return {p: (starts[p], ends[p]) for p in partitions if ends[p] > starts[p]}


def run_quorumlog(bootstrap: str, topic: str, plan, limit: int, tally: Tally,  # noqa: ANN001
                  security: ClientSecurity) -> float:  # fmt: skip
    from producer.fetch_client import FetchClient

    async def main() -> float:
        async with FetchClient(bootstrap, connector=security.connector) as client:
            start = time.perf_counter()
            async with trio.open_nursery() as nursery:

                async def read(partition: int, start_offset: int, end_offset: int) -> None:
                    async for record in client.iter_records(
                        topic, partition, start_offset, end_offset
                    ):
                        tally.add(record.key, record.value)
                        if tally.records >= limit:
                            nursery.cancel_scope.cancel()
                            return

                for partition, (start_offset, end_offset) in plan.items():
                    nursery.start_soon(read, partition, start_offset, end_offset)
            return time.perf_counter() - start

    return trio.run(main)


def run_confluent(bootstrap: str, topic: str, plan, limit: int, tally: Tally,  # noqa: ANN001
                  security: ClientSecurity) -> float:  # fmt: skip
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "quorumlog-perf-consume",
         "enable.auto.commit": False, "enable.partition.eof": True,
         "fetch.wait.max.ms": 100, **security.confluent}
    )  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, p, start) for p, (start, _) in plan.items()])
        remaining = {p: end for p, (_, end) in plan.items()}  # partitions not yet at their end
        start = time.perf_counter()
        idle_since = start
        while remaining and tally.records < limit:
            messages = consumer.consume(POLL_BATCH_MESSAGES, POLL_TIMEOUT_S)
            now = time.perf_counter()
            if not messages and now - idle_since > IDLE_LIMIT_S:
                raise CommandError(f"no records for {IDLE_LIMIT_S:.0f} s; partitions left: "
                                   f"{sorted(remaining)}")  # fmt: skip
            for message in messages:
                idle_since = now
                error = message.error()
                partition = message.partition()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        remaining.pop(partition, None)
                        continue
                    raise CommandError(f"{error.name()}: {error.str()}")
                if partition not in remaining or message.offset() >= remaining[partition]:
                    remaining.pop(partition, None)  # past the run's end: not counted
                    continue
                tally.add(message.key(), message.value())
                offset = message.offset()
                assert offset is not None  # a record read from a partition has one
                if offset + 1 >= remaining[partition]:
                    remaining.pop(partition)
                if tally.records >= limit:
                    break
        return time.perf_counter() - start
    finally:
        consumer.close()


RUNNERS = {"quorumlog": run_quorumlog, "confluent": run_confluent}


def run_consume_benchmark(
    *,
    bootstrap: str,
    topic: str,
    records: int | None = None,
    client: str = "quorumlog",
    show_progress: bool = False,
    security: ClientSecurity = PLAINTEXT,
) -> dict[str, Any]:
    """Read the topic (up to `records`); the result dict the command prints."""
    plan = trio.run(_plan, bootstrap, topic, security)
    available = sum(end - start for start, end in plan.values())
    if available == 0:
        raise CommandError(f"topic {topic!r} has no records to consume")
    limit = min(records or available, available)
    tally = Tally()
    with maybe_progress(show_progress, "consuming", limit, lambda: tally.records):
        elapsed_s = RUNNERS[client](bootstrap, topic, plan, limit, tally, security)
    elapsed_s = max(elapsed_s, 1e-9)
    return {
        "client": client,
        "topic": topic,
        "records": tally.records,
        "bytes": tally.payload_bytes,
        "elapsed_s": round(elapsed_s, 4),
        "records_per_s": round(tally.records / elapsed_s, 1),
        "mb_per_s": round(tally.payload_bytes / elapsed_s / 1e6, 3),
    }


@click.command("consume")
@click.option("--bootstrap", required=True, help="host:port[,host:port...]")
@click.option("--topic", required=True)
@click.option("--records", type=click.IntRange(1), help="stop after this many [all]")
@click.option("--client", type=click.Choice(CLIENTS), default="quorumlog", show_default=True)
@command_config_option
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
def consume(bootstrap: str, topic: str, records: int | None, client: str,
            security: ClientSecurity, as_json: bool) -> None:  # fmt: skip
    """Read a topic from the beginning and print records/s and MB/s.

    \b
    Examples:
      quorumlog perf consume --bootstrap 127.0.0.1:9092 --topic perf
      quorumlog perf consume --bootstrap 127.0.0.1:9092 --topic perf --records 100000 \\
          --client confluent --json
    """
    result = run_guarded(
        lambda: run_consume_benchmark(
            bootstrap=bootstrap, topic=topic, records=records, client=client,
            show_progress=not as_json and stderr_is_terminal(), security=security,
        )
    )  # fmt: skip
    if as_json:
        click.echo(json.dumps(result))
        return
    click.echo(
        f"{client}: {result['records']} records, {result['bytes']} bytes in "
        f"{result['elapsed_s']:.2f} s: {result['records_per_s']:.0f} records/s, "
        f"{result['mb_per_s']:.2f} MB/s"
    )
