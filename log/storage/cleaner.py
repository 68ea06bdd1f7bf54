"""Log compaction (cleanup.policy=compact): keep the latest value of every key.

Theory of operation (Kafka's LogCleaner, reduced to one pass):

1. `build_offset_map` scans the *dirty* section (batches up to the first uncleanable offset:
   the active segment's base offset) and records, per key, the offset of its latest record.
2. `clean_batches` rewrites a segment's bytes keeping a record iff it has a key, no later
   record of the same key exists in the map, and -- for a tombstone (null value) -- its
   timestamp is younger than `delete_retention_ms` (consumers that read the log from the
   start get that long to see the delete). Control batches are kept as they are. A batch
   keeps its producer fields; its base offset becomes its first kept record's offset and its
   last offset delta is that of its last kept record, so offsets never change, only gaps
   appear. A batch with nothing left is dropped (NOT kept for producer state, as Kafka does
   for the last batch of a producer: our cleaner does not preserve idempotence state).
3. `compact_segment_file` (driver) writes the result to `<segment>.log.cleaned`, fsyncs,
   renames it to `.log.swap` (the commit point), replaces the original by renaming the swap
   file over it and deletes the segment's now-stale index files, which recovery rebuilds.
   `recover_swap_files` finishes an interrupted swap at startup and discards `.cleaned`
   leftovers: a crash at any point leaves either the old or the new segment, never neither.

Not done: driving this from LogManager as a background task over live UnifiedLog segments
(the segment objects must be reopened after a swap), and the cleaner checkpoint
(cleaner-offset-checkpoint); see the module's tests for what is covered.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from pathlib import Path

import crc32c

from log.records.batch_header import HEADER_BYTES, iter_batches, read_header
from log.records.builder import assemble_batch, encode_record
from log.records.reader import iter_records

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
MAX_OFFSET_MAP_KEYS = 1_000_000  # Kafka bounds its map by log.cleaner.dedupe.buffer.size
_LAST_OFFSET_DELTA_POSITION = 23
_CRC_POSITION = 17
_ATTRIBUTES_POSITION = 21


def build_offset_map(segments: Iterable[bytes], end_offset: int) -> dict[bytes, int]:
    """key -> offset of its latest record below `end_offset`, over segment byte strings."""
    offset_map: dict[bytes, int] = {}
    for buf in segments:
        for position, header in iter_batches(buf):
            if header.is_control or header.base_offset >= end_offset:
                continue
            for record in iter_records(buf, position):
                if record.key is not None and record.offset < end_offset:
                    offset_map[bytes(record.key)] = record.offset
                    assert len(offset_map) <= MAX_OFFSET_MAP_KEYS, "offset map full"
    return offset_map


def clean_batches(
    buf: bytes, offset_map: dict[bytes, int], now_ms: int, delete_retention_ms: int
) -> bytes:
    """The segment bytes `buf` with superseded records and expired tombstones removed."""
    out = bytearray()
    for position, header in iter_batches(buf):
        if header.is_control:
            out += buf[position : position + header.size_bytes]
            continue
        kept = []
        for record in iter_records(buf, position):
            if record.key is None:
                continue
            latest = offset_map.get(bytes(record.key))
            if latest is not None and latest > record.offset:
                continue
            if record.value is None and record.timestamp_ms + delete_retention_ms <= now_ms:
                continue
            kept.append(record)
        if not kept:
            continue
        if len(kept) == header.record_count:
            out += buf[position : position + header.size_bytes]  # untouched: keep its bytes
            continue
        out += _rebuild(header, kept)
    return bytes(out)


def _rebuild(header, kept: list) -> bytes:  # noqa: ANN001
    base_offset = kept[0].offset
    base_timestamp_ms = min(r.timestamp_ms for r in kept)
    body = bytearray()
    for r in kept:
        encode_record(
            body, r.offset - base_offset, r.timestamp_ms - base_timestamp_ms, r.key, r.value,
            r.headers,
        )  # fmt: skip
    batch = bytearray(
        assemble_batch(
            bytes(body),
            record_count=len(kept),
            base_offset=base_offset,
            base_timestamp_ms=base_timestamp_ms,
            max_timestamp_ms=max(r.timestamp_ms for r in kept),
            compression_type=header.compression_type,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            partition_leader_epoch=header.partition_leader_epoch,
            is_transactional=header.is_transactional,
        )
    )
    # gaps: the last offset delta is the last kept record's, not record_count - 1
    struct.pack_into(">i", batch, _LAST_OFFSET_DELTA_POSITION, kept[-1].offset - base_offset)
    struct.pack_into(">I", batch, _CRC_POSITION, crc32c.crc32c(bytes(batch[_ATTRIBUTES_POSITION:])))
    assert read_header(batch, 0).size_bytes == len(batch) >= HEADER_BYTES
    return bytes(batch)


# -- files (driver) -------------------------------------------------------------------------------


def compact_segment_file(
    log_path: Path, offset_map: dict[bytes, int], now_ms: int, delete_retention_ms: int
) -> int:
    """Rewrite one inactive segment file crash-safely; returns the bytes saved."""
    original = log_path.read_bytes()
    cleaned = clean_batches(original, offset_map, now_ms, delete_retention_ms)
    cleaned_path = log_path.with_name(log_path.name + CLEANED_SUFFIX)
    swap_path = log_path.with_name(log_path.name + SWAP_SUFFIX)
    with open(cleaned_path, "wb") as f:
        f.write(cleaned)
        f.flush()
        os.fsync(f.fileno())
    os.replace(cleaned_path, swap_path)  # commit point
    _fsync_dir(log_path.parent)
    _finish_swap(swap_path)
    return len(original) - len(cleaned)


def _finish_swap(swap_path: Path) -> None:
    log_path = swap_path.with_name(swap_path.name[: -len(SWAP_SUFFIX)])
    for suffix in (".index", ".timeindex"):
        log_path.with_suffix(suffix).unlink(missing_ok=True)  # stale: recovery rebuilds them
    os.replace(swap_path, log_path)
    _fsync_dir(log_path.parent)


def recover_swap_files(partition_dir: Path) -> None:
    """At startup: complete committed swaps, drop uncommitted `.cleaned` files."""
    for path in sorted(partition_dir.iterdir()):
        if path.name.endswith(".log" + CLEANED_SUFFIX):
            path.unlink()
        elif path.name.endswith(".log" + SWAP_SUFFIX):
            _finish_swap(path)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
