"""`quorumlog consume`: print a topic's records, by plain partition assignment or in a group.

Start position per partition: --offset earliest (default) | latest | N, or --timestamp (the
first offset whose timestamp is >= it, ListOffsets; a partition with none starts at its end).
By default every partition is read up to the high watermark it had when we started, one
partition after the other, and the command exits; --follow keeps fetching all partitions
round-robin (long-poll fetches) until Ctrl-C or --max-records. Output formats: `value`, `key-
value` (KEY<sep>VALUE), `json` (one object per line: partition, offset, timestamp, key, value,
headers; bytes that are not UTF-8 come as base64 with a `*_encoding` field). A summary goes to
stderr so stdout stays data only. With --group G the command is a member of consumer group G
instead (tools/group_consume.py): it reads the partitions the group assigns it, from the
group's committed offsets, and commits what it printed.
"""

from __future__ import annotations

import base64
import contextlib
import json
import sys
from datetime import datetime

import click
import trio

from log.records.batch import DecodedRecord
from tools.admin_client import AdminClient
from tools.cli_support import (
    CommandError,
    bootstrap_option,
    command_config_option,
    run_client,
    run_guarded,
)
from tools.client_security import PLAINTEXT, ClientSecurity
from tools.group_consume import DEFAULT_ASSIGNMENT_TIMEOUT_MS, GroupOptions, consume_group

FORMATS = ("value", "key-value", "json")
FOLLOW_MAX_WAIT_MS = 500  # the long-poll of one fetch in --follow mode


def _text(data: bytes | None) -> tuple[str | None, str | None]:
    """(text, encoding): UTF-8 text as is, anything else base64."""
    if data is None:
        return None, None
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def format_record(partition: int, record: DecodedRecord, fmt: str, key_separator: str) -> str:
    if fmt == "json":
        out: dict = {"partition": partition, "offset": record.offset,
                     "timestamp": record.timestamp_ms}  # fmt: skip
        for name, data in (("key", record.key), ("value", record.value)):
            out[name], encoding = _text(data)
            if encoding:
                out[f"{name}_encoding"] = encoding
        out["headers"] = {h.key: _text(h.value)[0] for h in record.headers}
        return json.dumps(out)
    value = "" if record.value is None else record.value.decode("utf-8", "backslashreplace")
    if fmt == "value":
        return value
    key = "" if record.key is None else record.key.decode("utf-8", "backslashreplace")
    return f"{key}{key_separator}{value}"


def parse_timestamp_ms(text: str) -> int:
    """Milliseconds since the epoch, or an ISO-8601 date/time (local time if no zone)."""
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is neither epoch milliseconds nor an ISO-8601 time", param_hint="--timestamp"
        ) from None


class Printer:
    def __init__(self, fmt: str, key_separator: str, max_records: int | None) -> None:
        self.fmt = fmt
        self.key_separator = key_separator
        self.max_records = max_records
        self.count = 0

    @property
    def full(self) -> bool:
        return self.max_records is not None and self.count >= self.max_records

    def emit(self, partition: int, record: DecodedRecord) -> None:
        sys.stdout.write(format_record(partition, record, self.fmt, self.key_separator) + "\n")
        self.count += 1


async def _start_offset(admin: AdminClient, topic: str, partition: int, offset, timestamp_ms):  # noqa: ANN001
    client = admin.fetch_client
    if timestamp_ms is not None:
        found = await client.offset_for_time(topic, partition, timestamp_ms)
        return found if found >= 0 else await client.latest_offset(topic, partition)
    if offset == "earliest":
        return await client.earliest_offset(topic, partition)
    if offset == "latest":
        return await client.latest_offset(topic, partition)
    return max(int(offset), await client.earliest_offset(topic, partition))


async def consume(
    bootstrap: str,
    topic: str,
    partitions: tuple[int, ...],
    offset: str,
    timestamp_ms: int | None,
    printer: Printer,
    follow: bool,
    security: ClientSecurity = PLAINTEXT,
) -> None:
    async with AdminClient(bootstrap, connector=security.connector) as admin:
        description = await admin.describe_topic(topic)
        known = [p.partition for p in description.partitions]
        for p in partitions:
            if p not in known:
                raise CommandError(f"topic {topic!r} has no partition {p} (has {len(known)})")
        chosen = list(partitions) or known
        positions = {p: await _start_offset(admin, topic, p, offset, timestamp_ms) for p in chosen}
        client = admin.fetch_client
        if not follow:
            ends = {p: await client.latest_offset(topic, p) for p in chosen}
            for p in chosen:
                async for record in client.iter_records(topic, p, positions[p], ends[p]):
                    if printer.full:
                        return
                    printer.emit(p, record)
            return
        client.max_wait_ms = FOLLOW_MAX_WAIT_MS // max(1, len(chosen))
        while not printer.full:
            for p in chosen:
                records, next_offset, _high_watermark = await client.fetch(topic, p, positions[p])
                for record in records:
                    if printer.full:
                        return
                    printer.emit(p, record)
                positions[p] = max(positions[p], next_offset)
            sys.stdout.flush()
            await trio.sleep(0)


@click.command("consume")
@bootstrap_option
@command_config_option
@click.option("--topic", "-t", required=True)
@click.option("--partition", "-p", "partitions", type=click.IntRange(0), multiple=True,
              help="partition to read (repeatable; default all)")  # fmt: skip
@click.option("--offset", "-o",
              help="start at earliest, latest or an offset N (per partition) [earliest; with "
              "--group: where a partition without a committed offset starts, latest]")  # fmt: skip
@click.option("--from-beginning", is_flag=True, help="same as --offset earliest")
@click.option("--group", "-g", help="consume as a member of this consumer group, committing "
              "the offsets of printed records")  # fmt: skip
@click.option("--assignment-timeout-ms", type=click.IntRange(1),
              default=DEFAULT_ASSIGNMENT_TIMEOUT_MS, show_default=True,
              help="--group: fail if the group assigns nothing within this long")  # fmt: skip
@click.option("--timestamp", help="start at the first record at/after this time (ms or ISO-8601)")
@click.option("--max-records", "-n", type=click.IntRange(1), help="stop after this many records")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="value", show_default=True)
@click.option("--key-separator", default="\t", help="between key and value in key-value [TAB]")
@click.option("--json", "as_json", is_flag=True, help="same as --format json")
@click.option("--follow", "-F", is_flag=True, help="keep waiting for new records (Ctrl-C stops)")
def consume_command(
    bootstrap, security, topic, partitions, offset, from_beginning, group, assignment_timeout_ms,
    timestamp, max_records, fmt, key_separator, as_json, follow,
):  # fmt: skip
    """Print records of a topic, then exit at the end of the available data.

    \b
    Examples:
      quorumlog consume --topic events                      # everything, values only
      quorumlog consume -t events --format key-value -n 10
      quorumlog consume -t events --partition 2 --offset 100 --json
      quorumlog consume -t events --timestamp 2026-11-21T10:00:00 --follow
      quorumlog consume -t events --group billing --from-beginning   # resumes where it stopped
    """
    if from_beginning:
        offset = "earliest"
    printer = Printer("json" if as_json else fmt, key_separator, max_records)
    if group is not None:
        _consume_in_group(bootstrap, topic, partitions, offset, group, assignment_timeout_ms,
                          timestamp, printer, follow, security)  # fmt: skip
        return
    offset = offset or "earliest"
    if offset not in ("earliest", "latest") and not offset.isdigit():
        raise click.BadParameter(
            "expected earliest, latest or an offset >= 0", param_hint="--offset"
        )
    timestamp_ms = parse_timestamp_ms(timestamp) if timestamp is not None else None
    with _summary(printer):
        run_client(consume, bootstrap, topic, partitions, offset, timestamp_ms, printer, follow,
                   security)  # fmt: skip


@contextlib.contextmanager
def _summary(printer: Printer):  # noqa: ANN202
    """The record count on stderr, unless the command failed before printing any record
    (its error then stays the only line)."""
    try:
        yield
    except BaseException:
        sys.stdout.flush()
        if printer.count:
            click.echo(f"Processed a total of {printer.count} records", err=True)
        raise
    sys.stdout.flush()
    click.echo(f"Processed a total of {printer.count} records", err=True)


def _consume_in_group(
    bootstrap, topic, partitions, offset, group, assignment_timeout_ms, timestamp, printer, follow,
    security,
):  # fmt: skip
    if not group:
        raise click.BadParameter("must not be empty", param_hint="--group")
    if partitions or timestamp is not None or offset not in (None, "earliest", "latest"):
        raise click.UsageError(
            "--group reads the partitions the group assigns from its committed offsets; "
            "--partition, --timestamp and --offset N do not apply (use `quorumlog groups "
            "reset-offsets` to move a group)"
        )
    options = GroupOptions(group, offset or "latest", follow, assignment_timeout_ms)
    with _summary(printer):
        run_guarded(consume_group, bootstrap, topic, options, printer, security)
