"""`quorumlog dump-log`: print what is inside log segments, indexes and state files.

Like Kafka's kafka-dump-log, and with the same output vocabulary (one `baseOffset: ...` line per
batch, `| offset: ...` per record) so habits and greps carry over. The batch's timestamp type
is shown as Kafka shows it, as the label of its timestamp: `CreateTime: <maxTimestamp>` (the
producer's clock) or `LogAppendTime: <maxTimestamp>` (the broker's, which every record of the
batch then carries). Records are decoded by log/records/reader.py, the clients' decoder. The kind of file is decided
by its name:

    *.log                       batches (and records with --records), CRC checked
    *.index                     offset index: 8-byte entries (relative_offset u32, position u32)
    *.timeindex                 time index: 12-byte entries (timestamp i64, relative_offset u32)
    *.txnindex                  transaction index: the segment's aborted transactions (34-byte
                                entries: version, producerId, firstOffset, lastOffset,
                                lastStableOffset); control batches' markers show with --records
    *.snapshot                  producer state snapshot
    leader-epoch-checkpoint     leader epoch entries
    *-checkpoint                offset checkpoints (topic partition offset)

Indexes are preallocated and zero-filled, so an all-zero entry after the first one ends the
index. With --verify-index every index entry is checked against the sibling `.log` segment: an
offset index entry must point at a batch boundary whose batch contains the entry's offset (Kafka
writes the batch's last offset); a time index entry's offset must lie in a batch whose
maxTimestamp is the entry's timestamp.

A directory argument stands for the dumpable files directly inside it, in name order.
With --json every batch, record and entry is one JSON object on its own line (JSON lines):
{"file": ..., "type": "batch" | "record" | "offset_index_entry" | ..., fields in snake_case};
keys and values that are not UTF-8 come as base64 with a `*_encoding` field, as in consume.

Bad input (truncated or corrupt batches, CRC mismatches, malformed files, index mismatches)
is reported on stderr with the file name and the exit status is 1; never a traceback.
"""

from __future__ import annotations

import base64
import bisect
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from log.common.errors import CorruptRecordError, KafkaError
from log.records.batch import DecodedRecord
from log.records.batch_header import BatchHeader, is_valid_crc, read_header
from log.records.compression import CompressionType
from log.records.reader import iter_records
from log.storage.checkpoint_file import OffsetCheckpointFile
from log.storage.leader_epoch_cache import LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochCheckpointFile
from log.storage.producer_state import read_snapshot_file
from log.storage.transaction_index import ABORTED_TXN_VERSION, ENTRY_BYTES, decode_entries
from tools.cli_support import EXIT_ERROR

OFFSET_INDEX_ENTRY = struct.Struct(">II")  # relative_offset, position
TIME_INDEX_ENTRY = struct.Struct(">qI")  # timestamp_ms, relative_offset
_CONTROL_KEY = struct.Struct(">hh")  # version, type (0 = ABORT, 1 = COMMIT)
_CONTROL_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch
# A segment is at most segment.bytes (1 GiB default, Int32 max hard limit) — read no more.
MAX_FILE_BYTES = 2**31


class DumpError(Exception):
    """The file cannot be dumped (or failed verification); the message says why."""


def show_bytes(data: bytes | None) -> str:
    """Printable UTF-8 as is, anything else as 0x-prefixed hex."""
    if data is None:
        return "null"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + data.hex()
    return text if text.isprintable() else "0x" + data.hex()


def _bool(flag: bool) -> str:
    return "true" if flag else "false"


def _read_file(path: Path) -> bytes:
    size_bytes = path.stat().st_size
    if size_bytes > MAX_FILE_BYTES:
        raise DumpError(f"{path}: {size_bytes} bytes is larger than any segment can be")
    return path.read_bytes()


def base_offset_of(path: Path) -> int:
    """Segments, indexes and snapshots are named by their 20-digit base offset."""
    stem = path.name.split(".", 1)[0]
    if not stem.isdigit():
        raise DumpError(f"{path}: name does not start with a base offset")
    return int(stem)


def scan_batches(buf: bytes) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch; DumpError at the first unreadable one."""
    position = 0
    while position < len(buf):
        try:
            header = read_header(buf, position)
        except CorruptRecordError as exc:
            raise DumpError(str(exc)) from None
        if position + header.size_bytes > len(buf):
            raise DumpError(
                f"batch at position {position} claims {header.size_bytes} bytes, "
                f"only {len(buf) - position} remain (truncated segment)"
            )
        yield position, header
        position += header.size_bytes


class Output:
    """Kafka-style text lines, or with --json one JSON object per line: the file, the type of
    entry (batch, record, offset_index_entry, time_index_entry, producer_state_entry,
    leader_epoch_entry, checkpoint_entry) and its fields in snake_case."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.path: Path | None = None

    def text(self, line: str) -> None:
        """A line only the text format has (file banners)."""
        if not self.as_json:
            click.echo(line)

    def entry(self, line: str, kind: str, fields: dict[str, Any]) -> None:
        if self.as_json:
            click.echo(json.dumps({"file": str(self.path), "type": kind, **fields}))
        else:
            click.echo(line)


def _json_bytes(fields: dict[str, Any], name: str, data: bytes | None) -> None:
    """UTF-8 text as is; other bytes base64 with a `<name>_encoding` field (as consume)."""
    if data is None:
        fields[name] = None
        return
    try:
        fields[name] = data.decode("utf-8")
    except UnicodeDecodeError:
        fields[name] = base64.b64encode(data).decode("ascii")
        fields[f"{name}_encoding"] = "base64"


def dump_segment(path: Path, print_records: bool, out: Output) -> None:
    """Print every batch; DumpError afterwards if any failed its CRC."""
    buf = _read_file(path)
    out.text(f"Log starting offset: {base_offset_of(path)}")
    invalid_count = 0
    for position, header in scan_batches(buf):
        crc_valid = is_valid_crc(buf, position, header)
        invalid_count += not crc_valid
        timestamp_kind = timestamp_type_name(header.timestamp_type)
        try:
            codec = CompressionType(header.compression_type).name.lower()
        except ValueError:
            codec = f"unknown({header.compression_type})"
        fields = {
            "base_offset": header.base_offset, "last_offset": header.last_offset,
            "count": header.record_count, "base_sequence": header.base_sequence,
            "last_sequence": header.last_sequence, "producer_id": header.producer_id,
            "producer_epoch": header.producer_epoch,
            "partition_leader_epoch": header.partition_leader_epoch,
            "is_transactional": header.is_transactional, "is_control": header.is_control,
            "position": position, "timestamp_type": timestamp_kind,
            "max_timestamp": header.max_timestamp, "base_timestamp": header.base_timestamp,
            "size_bytes": header.size_bytes, "magic": header.magic, "compression": codec,
            "crc": header.crc, "is_valid": crc_valid,
        }  # fmt: skip
        out.entry(
            f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
            f"count: {header.record_count} baseSequence: {header.base_sequence} "
            f"lastSequence: {header.last_sequence} producerId: {header.producer_id} "
            f"producerEpoch: {header.producer_epoch} "
            f"partitionLeaderEpoch: {header.partition_leader_epoch} "
            f"isTransactional: {_bool(header.is_transactional)} "
            f"isControl: {_bool(header.is_control)} position: {position} "
            f"{timestamp_kind}: {header.max_timestamp} baseTimestamp: {header.base_timestamp} "
            f"size: {header.size_bytes} magic: {header.magic} compresscodec: {codec} "
            f"crc: {header.crc} isvalid: {_bool(crc_valid)}",
            "batch",
            fields,
        )
        if print_records and crc_valid:
            for line, record_fields in _record_lines(buf, position, header):
                out.entry(line, "record", record_fields)
    if invalid_count:
        raise DumpError(f"{invalid_count} batch(es) failed the CRC check")


def timestamp_type_name(timestamp_type: int) -> str:
    """Kafka's TimestampType names: the batch attribute bit 3 (0 CreateTime, 1 LogAppendTime)."""
    return "LogAppendTime" if timestamp_type else "CreateTime"


def _record_lines(
    buf: bytes, position: int, header: BatchHeader
) -> list[tuple[str, dict[str, Any]]]:
    try:  # the CRC was checked by the caller; the reader checks everything else
        records = list(iter_records(buf, position, check_crc=False))
    except KafkaError as exc:
        raise DumpError(f"batch at position {position}: cannot decode records: {exc}") from None
    lines = []
    for index, record in enumerate(records):
        sequence = (header.base_sequence + index) % (1 << 31) if header.base_sequence >= 0 else -1
        line = (
            f"| offset: {record.offset} {timestamp_type_name(record.timestamp_type)}: "
            f"{record.timestamp_ms} "
            f"keySize: {-1 if record.key is None else len(record.key)} "
            f"valueSize: {-1 if record.value is None else len(record.value)} "
            f"sequence: {sequence} headerKeys: [{','.join(h.key for h in record.headers)}]"
        )
        fields: dict[str, Any] = {
            "offset": record.offset,
            "timestamp_type": timestamp_type_name(record.timestamp_type),
            "timestamp": record.timestamp_ms,
            "key_size": -1 if record.key is None else len(record.key),
            "value_size": -1 if record.value is None else len(record.value),
            "sequence": sequence,
        }
        if header.is_control:
            line += " " + _control_description(record)
            fields["control"] = _control_description(record)
        else:
            line += f" key: {show_bytes(record.key)} payload: {show_bytes(record.value)}"
            if record.headers:
                shown = ",".join(f"{h.key}={show_bytes(h.value)}" for h in record.headers)
                line += f" headers: [{shown}]"
            _json_bytes(fields, "key", record.key)
            _json_bytes(fields, "value", record.value)
            fields["headers"] = []
            for h in record.headers:
                fields["headers"].append({"key": h.key})
                _json_bytes(fields["headers"][-1], "value", h.value)
        lines.append((line, fields))
    return lines


def _control_description(record: DecodedRecord) -> str:
    if record.key is None or len(record.key) < _CONTROL_KEY.size:
        return "controlType: UNKNOWN"
    _, control_type = _CONTROL_KEY.unpack_from(record.key)
    if control_type in (0, 1) and record.value and len(record.value) >= _CONTROL_VALUE.size:
        _, coordinator_epoch = _CONTROL_VALUE.unpack_from(record.value)
        marker = "COMMIT" if control_type == 1 else "ABORT"
        return f"endTxnMarker: {marker} coordinatorEpoch: {coordinator_epoch}"
    return f"controlType: {control_type}"


def read_index_entries(buf: bytes, entry: struct.Struct, path: Path) -> list[tuple[int, ...]]:
    """Entries up to the zero-filled preallocated tail (an all-zero entry after the first)."""
    if len(buf) % entry.size:
        raise DumpError(f"{path}: size {len(buf)} is not a multiple of {entry.size}-byte entries")
    entries = []
    zero = bytes(entry.size)
    for position in range(0, len(buf), entry.size):
        if position > 0 and buf[position : position + entry.size] == zero:
            break
        entries.append(entry.unpack_from(buf, position))
    return entries


def _segment_batches(index_path: Path) -> list[tuple[int, BatchHeader]]:
    log_path = index_path.with_name(index_path.name.split(".", 1)[0] + ".log")
    if not log_path.is_file():
        raise DumpError(f"{index_path}: no sibling segment {log_path.name} to verify against")
    try:
        return list(scan_batches(_read_file(log_path)))
    except DumpError as exc:
        raise DumpError(f"{log_path}: {exc}") from None


def dump_offset_index(path: Path, verify: bool, out: Output) -> None:
    base_offset = base_offset_of(path)
    entries = read_index_entries(_read_file(path), OFFSET_INDEX_ENTRY, path)
    batches = dict(_segment_batches(path)) if verify else {}
    problems = []
    previous = (-1, -1)
    for relative_offset, position in entries:
        offset = base_offset + relative_offset
        out.entry(
            f"offset: {offset} position: {position}",
            "offset_index_entry",
            {"offset": offset, "position": position},
        )
        if offset <= previous[0] or position <= previous[1]:
            problems.append(f"entry offset {offset} position {position} is not increasing")
        previous = (offset, position)
        if verify:
            batch = batches.get(position)
            if batch is None:
                problems.append(f"offset {offset}: position {position} is not a batch boundary")
            elif not batch.base_offset <= offset <= batch.last_offset:
                problems.append(
                    f"offset {offset}: batch at position {position} holds offsets "
                    f"{batch.base_offset}..{batch.last_offset}"
                )
    _report(path, problems)


def dump_time_index(path: Path, verify: bool, out: Output) -> None:
    base_offset = base_offset_of(path)
    entries = read_index_entries(_read_file(path), TIME_INDEX_ENTRY, path)
    batches = [header for _, header in _segment_batches(path)] if verify else []
    base_offsets = [b.base_offset for b in batches]
    problems = []
    previous = (-(2**63), -1)
    for timestamp_ms, relative_offset in entries:
        offset = base_offset + relative_offset
        out.entry(
            f"timestamp: {timestamp_ms} offset: {offset}",
            "time_index_entry",
            {"timestamp": timestamp_ms, "offset": offset},
        )
        if timestamp_ms < previous[0] or offset < previous[1]:
            problems.append(f"entry timestamp {timestamp_ms} offset {offset} goes backwards")
        previous = (timestamp_ms, offset)
        if verify:
            index = bisect.bisect_right(base_offsets, offset) - 1
            holder = batches[index] if index >= 0 else None
            if holder is None or holder.last_offset < offset:
                problems.append(f"timestamp {timestamp_ms}: offset {offset} is not in the segment")
            elif holder.max_timestamp != timestamp_ms:
                problems.append(
                    f"timestamp {timestamp_ms}: the batch holding offset {offset} has "
                    f"maxTimestamp {holder.max_timestamp}"
                )
    _report(path, problems)


def _report(path: Path, problems: list[str]) -> None:
    for problem in problems:
        click.echo(f"{path}: {problem}", err=True)
    if problems:
        raise DumpError(f"{len(problems)} index problem(s)")


def dump_txn_index(path: Path, out: Output) -> None:
    """Kafka's dumpTxnIndex lines; a torn tail or an unknown entry version is an error."""
    data = _read_file(path)
    problems = []
    for entry in decode_entries(data):
        out.entry(
            f"version: {entry.version} producerId: {entry.producer_id} "
            f"firstOffset: {entry.first_offset} lastOffset: {entry.last_offset} "
            f"lastStableOffset: {entry.last_stable_offset}",
            "txn_index_entry",
            {"version": entry.version, "producer_id": entry.producer_id,
             "first_offset": entry.first_offset, "last_offset": entry.last_offset,
             "last_stable_offset": entry.last_stable_offset},
        )  # fmt: skip
        if entry.version != ABORTED_TXN_VERSION:
            problems.append(f"entry of producer {entry.producer_id}: version {entry.version}")
    if len(data) % ENTRY_BYTES:
        problems.append(f"{len(data) % ENTRY_BYTES} trailing bytes (a torn entry)")
    _report(path, problems)


def dump_snapshot(path: Path, out: Output) -> None:
    for entry in read_snapshot_file(path):
        last = entry.batches[-1] if entry.batches else None
        txn = -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset
        fields = {
            "producer_id": entry.producer_id, "producer_epoch": entry.producer_epoch,
            "coordinator_epoch": entry.coordinator_epoch, "current_txn_first_offset": txn,
            "last_timestamp": entry.last_timestamp_ms,
            "first_sequence": last.first_seq if last else -1,
            "last_sequence": last.last_seq if last else -1,
            "last_offset": last.last_offset if last else -1,
            "offset_delta": last.offset_delta if last else 0,
        }  # fmt: skip
        out.entry(
            f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
            f"coordinatorEpoch: {entry.coordinator_epoch} currentTxnFirstOffset: {txn} "
            f"lastTimestamp: {entry.last_timestamp_ms} "
            f"firstSequence: {last.first_seq if last else -1} "
            f"lastSequence: {last.last_seq if last else -1} "
            f"lastOffset: {last.last_offset if last else -1} "
            f"offsetDelta: {last.offset_delta if last else 0}",
            "producer_state_entry",
            fields,
        )


def dump_path(path: Path, print_records: bool, verify_index: bool, out: Output) -> None:
    out.path = path
    out.text(f"Dumping {path}")
    name = path.name
    if not path.is_file():
        raise DumpError("no such file")
    if name.endswith(".log"):
        dump_segment(path, print_records, out)
    elif name.endswith(".index"):
        dump_offset_index(path, verify_index, out)
    elif name.endswith(".timeindex"):
        dump_time_index(path, verify_index, out)
    elif name.endswith(".txnindex"):
        dump_txn_index(path, out)
    elif name.endswith(".snapshot"):
        dump_snapshot(path, out)
    elif name == LEADER_EPOCH_CHECKPOINT_FILE:
        for entry in LeaderEpochCheckpointFile(path).read():
            out.entry(
                f"leaderEpoch: {entry.leader_epoch} startOffset: {entry.start_offset}",
                "leader_epoch_entry",
                {"leader_epoch": entry.leader_epoch, "start_offset": entry.start_offset},
            )
    elif name.endswith("-checkpoint"):
        for (topic, partition), offset in OffsetCheckpointFile(path).read().items():
            out.entry(
                f"topic: {topic} partition: {partition} offset: {offset}",
                "checkpoint_entry",
                {"topic": topic, "partition": partition, "offset": offset},
            )
    else:
        raise DumpError(
            "unknown file type (expected .log, .index, .timeindex, .txnindex, .snapshot or a "
            "checkpoint)"
        )


def _is_dumpable(path: Path) -> bool:
    name = path.name
    return name.endswith((".log", ".index", ".timeindex", ".txnindex", ".snapshot", "-checkpoint"))


def _expand(paths: tuple[Path, ...]) -> list[Path]:
    """A directory (a partition or a log dir) stands for the dumpable files directly in it."""
    expanded: list[Path] = []
    for path in paths:
        if path.is_dir():
            expanded.extend(p for p in sorted(path.iterdir()) if p.is_file() and _is_dumpable(p))
        else:
            expanded.append(path)
    return expanded


@click.command("dump-log")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--records", "print_records", is_flag=True, help="Also print every record.")
@click.option(
    "--verify-index", is_flag=True, help="Check index entries against the sibling .log segment."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per batch/record/entry.")
def dump_log(
    paths: tuple[Path, ...], print_records: bool, verify_index: bool, as_json: bool
) -> None:
    """Print the batches of log segments, or the entries of indexes and state files.

    PATHS are files, or directories (a partition directory dumps every segment, index,
    snapshot and checkpoint in it).

    \b
    Examples:
      quorumlog dump-log data/node-1/kafka-logs/events-0/00000000000000000000.log --records
      quorumlog dump-log data/node-1/kafka-logs/events-0 --verify-index
      quorumlog dump-log data/node-1/kafka-logs/replication-offset-checkpoint
      quorumlog dump-log data/node-1/kafka-logs/events-0 --records --json | jq .value
    """
    failed = 0
    out = Output(as_json)
    for path in _expand(paths):
        try:
            dump_path(path, print_records, verify_index, out)
        except (DumpError, KafkaError, OSError, UnicodeDecodeError) as exc:
            failed += 1
            click.echo(f"Error: {path}: {exc}", err=True)
    if failed:
        raise SystemExit(EXIT_ERROR)
