"""`quorumlog produce`: one record per input line, through our trio Producer.

Lines come from stdin (or --file), read in chunks of at most READ_CHUNK_LINES in a worker
thread so the producer's sender keeps running while we wait for input and memory stays
bounded. With --key-separator each line is KEY<sep>VALUE (split at the first separator; a
line without it is an error, as in kafka-console-producer with parse.key). --header k=v adds
the same headers to every record. The topic must exist (no auto-creation from a typo). At the
end every record's delivery is awaited and a summary printed (records, per-partition offset
ranges, elapsed time); a failed delivery is a one-line error and exit code 1.
"""

from __future__ import annotations

import sys
import time
from typing import IO

import click
import trio

from producer.producer import Producer
from tools.admin_client import AdminClient
from tools.cli_support import (
    CommandError,
    bootstrap_option,
    command_config_option,
    echo_json,
    parse_key_values,
    run_client,
)
from tools.client_security import PLAINTEXT, ClientSecurity

READ_CHUNK_LINES = 1000  # lines per thread hop; bounds what we hold before send() takes it
MAX_LINE_BYTES = 1 << 20  # a longer line is an error (the producer's max.request.size)


def _read_chunk(stream: IO[bytes]) -> list[bytes]:
    lines = []
    for _ in range(READ_CHUNK_LINES):
        line = stream.readline(MAX_LINE_BYTES + 2)
        if not line:
            break
        lines.append(line)
        if stream is sys.stdin.buffer and stream.isatty():
            break  # interactive: send each line as it is typed
    return lines


def split_line(line: bytes, key_separator: bytes | None, line_number: int):
    """(key, value) of one input line (without its newline)."""
    if len(line) > MAX_LINE_BYTES:
        raise CommandError(f"line {line_number} is longer than {MAX_LINE_BYTES} bytes")
    if key_separator is None:
        return None, line
    key, sep, value = line.partition(key_separator)
    if not sep:
        raise CommandError(
            f"line {line_number} has no key separator {key_separator.decode()!r}: {line[:60]!r}"
        )
    return key, value


async def produce_lines(
    bootstrap: str,
    topic: str,
    stream: IO[bytes],
    *,
    key_separator: bytes | None,
    headers: list[tuple[str, bytes]],
    acks: int,
    partition: int | None,
    security: ClientSecurity = PLAINTEXT,
) -> dict:
    async with AdminClient(bootstrap, connector=security.connector) as admin:
        description = await admin.describe_topic(topic)
    if partition is not None and partition >= len(description.partitions):
        raise CommandError(
            f"topic {topic!r} has {len(description.partitions)} partitions; "
            f"no partition {partition}"
        )
    offsets: dict[int, list[int]] = {}  # partition -> [first offset, last offset, records]
    errors: list[BaseException] = []
    record_count = 0

    def on_delivery(handle) -> None:  # noqa: ANN001 - a RecordHandle
        if handle.error is not None:
            errors.append(handle.error)
            return
        metadata = handle.result()
        span = offsets.setdefault(metadata.partition, [metadata.offset, metadata.offset, 0])
        span[0] = min(span[0], metadata.offset)
        span[1] = max(span[1], metadata.offset)
        span[2] += 1

    start = time.perf_counter()
    async with Producer(
        bootstrap, acks=acks, linger_ms=5, connector=security.connector
    ) as producer:
        while not errors:
            lines = await trio.to_thread.run_sync(_read_chunk, stream)
            if not lines:
                break
            for raw in lines:
                record_count += 1
                key, value = split_line(raw.rstrip(b"\r\n"), key_separator, record_count)
                handle = await producer.send(
                    topic, value, key=key, partition=partition, headers=headers
                )
                handle.record_handle.add_callback(on_delivery)
        await producer.flush()
    if errors:
        raise errors[0]
    elapsed_s = time.perf_counter() - start
    return {
        "topic": topic,
        "records": record_count,
        "elapsed_s": round(elapsed_s, 3),
        "records_per_s": round(record_count / elapsed_s, 1) if elapsed_s > 0 else None,
        "partitions": {
            str(p): {"records": n, "first_offset": first, "last_offset": last}
            for p, (first, last, n) in sorted(offsets.items())
        },
    }


@click.command("produce")
@bootstrap_option
@command_config_option
@click.option("--topic", "-t", required=True)
@click.option("--file", "-f", "path", type=click.Path(dir_okay=False, exists=True),
              help="read lines from this file instead of stdin")  # fmt: skip
@click.option("--key-separator", "-K", help="split each line into KEY<sep>VALUE at the first <sep>")
@click.option("--header", "-H", "header_pairs", multiple=True, metavar="KEY=VALUE",
              help="header for every record (repeatable)")  # fmt: skip
@click.option(
    "--acks", type=click.Choice(["all", "-1", "0", "1"]), default="all", show_default=True
)
@click.option("--partition", "-p", type=click.IntRange(0), help="all records to this partition")
@click.option("--json", "as_json", is_flag=True, help="print the summary as JSON")
def produce(
    bootstrap, security, topic, path, key_separator, header_pairs, acks, partition, as_json
):
    """Produce one record per line of stdin (or --file) and print a summary.

    \b
    Examples:
      echo hello | quorumlog produce --topic events
      printf 'user1:clicked\\nuser2:left\\n' | quorumlog produce -t events --key-separator :
      quorumlog produce -t events --file data.txt --header source=import --acks 1
    """
    if key_separator == "":
        raise click.BadParameter("must not be empty", param_hint="--key-separator")
    headers = [(k, v.encode()) for k, v in parse_key_values(header_pairs, "--header").items()]
    acks_value = -1 if acks in ("all", "-1") else int(acks)
    separator = key_separator.encode() if key_separator is not None else None

    async def main() -> dict:
        if path is None:
            return await produce_lines(
                bootstrap, topic, sys.stdin.buffer, key_separator=separator,
                headers=headers, acks=acks_value, partition=partition, security=security,
            )  # fmt: skip
        with open(path, "rb") as stream:
            return await produce_lines(
                bootstrap, topic, stream, key_separator=separator,
                headers=headers, acks=acks_value, partition=partition, security=security,
            )  # fmt: skip

    summary = run_client(main)
    if as_json:
        echo_json(summary)
        return
    spans = ", ".join(
        f"{p}:{s['first_offset']}..{s['last_offset']}" for p, s in summary["partitions"].items()
    )
    click.echo(
        f"Produced {summary['records']} records to {topic} in {summary['elapsed_s']:.2f} s"
        + (f" (partition:offsets {spans})" if spans and acks_value != 0 else ""),
        err=False,
    )
