"""Log compaction core (Kafka's Cleaner): keep the latest value of every key. Sans-IO.

Theory of operation, for one log whose cleanable range is `[log start, first uncleanable)`
(picked by cleaner_manager.py; log_cleaner.py does the file work around these functions):

1. `build_offset_map` scans the *dirty* segments (`[first dirty offset, first uncleanable)`)
   and records, per key, the offset of its latest record (Kafka's SkimpyOffsetMap, exact here:
   a dict bounded by `max_keys`). It stops at a segment boundary when the next segment could
   overflow the map; the clean then ends there (`OffsetMap.end_offset`) and the rest stays
   dirty for the next round.
2. `clean_batches` rewrites one segment's bytes keeping a record iff it has a key, no later
   record of that key is in the map, and -- for a tombstone (null value) -- it is not expired.
   A tombstone expires when a previous clean already saw it (its offset is below this clean's
   first dirty offset, i.e. the cleaner-offset-checkpoint) AND its record timestamp is more
   than `delete_retention_ms` old. So a tombstone always survives the first clean that sees it
   and lives at least delete.retention.ms by its own timestamp (consumers reading from the
   start get that long to see the delete). Kafka 3.x instead stamps a delete horizon into the
   batch (attribute bit 6); we do not, so the batch bytes of untouched batches stay as written.
3. A batch that loses records is rebuilt with its original base offset, last offset delta,
   producer id / producer epoch / base sequence, leader epoch and attributes -- Kafka keeps the
   last offset so the producer's last sequence survives; offsets never change, only gaps
   appear. A batch that loses every record is dropped, except the last batch of an active
   producer, which is kept as an *empty* batch (61-byte header, recordCount 0), like Kafka, so
   idempotence state rebuilt from the log after a restart still knows the producer's last
   sequence.
   Transactions (Kafka's CleanedTransactionMetadata, `TransactionCleaning`): the cleanable range
   lies below the last stable offset, so every transaction in it has ended. The log hands the
   aborted transactions overlapping the range (from its `.txnindex`); their data batches are
   removed whole (and never enter the offset map, where an aborted value would supersede a
   committed one). A marker goes once nothing of its transaction is left before it: an ABORT
   whose data this pass saw stays (consumers still need it to skip that data), a COMMIT whose
   data this pass saw stays; otherwise the marker is *discardable*: the first clean that finds
   it so stamps a delete horizon into it (attribute bit 6, the horizon in baseTimestamp:
   now + delete.retention.ms, Kafka 3.x), and a clean after the horizon drops it, so a consumer
   reading from the start has delete.retention.ms to see the marker before it goes.
4. `group_cleaned_segments` groups consecutive cleaned outputs into one segment each, bounded
   by segment.bytes and the 32-bit relative offset range (seed 001 §1.2.4 step 4), so many
   small cleaned segments become few.

Batch layout written here (RecordBatch v2, declared in log/records/batch_header.py)::

    baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 |
    attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
    producerId i64 | producerEpoch i16 | baseSequence i32 | recordCount i32 | records...
    (the CRC-32C covers attributes .. end)
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import crc32c

from log.common.errors import CorruptRecordError
from log.records.batch_header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    DELETE_HORIZON_FLAG,
    HEADER_BYTES,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    iter_batches,
    pack_prefix,
    read_header,
)
from log.records.builder import encode_record
from log.records.compression import compress
from log.records.control import ControlRecordType, read_end_txn_marker
from log.records.reader import iter_records

# Kafka bounds its map by log.cleaner.dedupe.buffer.size (128 MiB, 24 bytes per entry).
MAX_OFFSET_MAP_KEYS = 1_000_000
MAX_RELATIVE_OFFSET = (1 << 31) - 1  # a segment's offsets fit its u32 index fields
# attributes .. recordCount, the part of the header after the CRC (see the layout above)
_HEADER_AFTER_CRC = struct.Struct(">hiqqqhii")
assert ATTRIBUTES_OFFSET + _HEADER_AFTER_CRC.size == HEADER_BYTES

# (position in the cleaned bytes, base offset, last offset, max timestamp, size in bytes):
# log.storage.segment.BatchSpan, what the new segment's indexes are built from.
BatchSpan = tuple[int, int, int, int, int]


@dataclass(slots=True)
class OffsetMap:
    """key -> offset of its latest record in `[start_offset, end_offset)`."""

    start_offset: int
    end_offset: int
    offsets: dict[bytes, int] = field(default_factory=dict)

    def latest_offset(self, key: bytes) -> int | None:
        return self.offsets.get(key)


@dataclass(slots=True)
class TransactionCleaning:
    """Where one pass over the cleanable range stands with transactions (Kafka's
    CleanedTransactionMetadata). `aborted` are (producer id, first offset) of the aborted
    transactions overlapping the range, any order; batches must be fed in log order."""

    aborted: list[tuple[int, int]] = field(default_factory=list)
    # producer id -> whether this pass saw data of its ongoing aborted transaction
    ongoing_aborted: dict[int, bool] = field(default_factory=dict)
    ongoing_committed: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.aborted = sorted(self.aborted, key=lambda t: (t[1], t[0]), reverse=True)

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self.aborted and self.aborted[-1][1] <= offset:
            producer_id, _ = self.aborted.pop()
            self.ongoing_aborted.setdefault(producer_id, False)

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch; True when it belongs to an aborted transaction (remove it)."""
        self._consume_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        if header.producer_id in self.ongoing_aborted:
            self.ongoing_aborted[header.producer_id] = True
            return True
        self.ongoing_committed.add(header.producer_id)
        return False

    def on_control_batch(self, buf: bytes, position: int, header: BatchHeader) -> bool:
        """A control batch; True when it may be discarded (nothing of its transaction is
        left before it)."""
        self._consume_aborted_up_to(header.last_offset)
        try:
            marker = read_end_txn_marker(buf, position)
        except CorruptRecordError:
            return False  # not ours to judge: keep it
        if header.record_count == 0:
            return True  # already emptied
        if marker is None:
            return False
        if marker.control_type == ControlRecordType.ABORT:
            saw_data = self.ongoing_aborted.pop(header.producer_id, False)
            return not saw_data
        if header.producer_id in self.ongoing_committed:
            self.ongoing_committed.discard(header.producer_id)
            return False
        return True


def build_offset_map(
    segments: Iterable[tuple[int, bytes]],
    start_offset: int,
    end_offset: int,
    max_keys: int = MAX_OFFSET_MAP_KEYS,
    aborted_txns: Sequence[tuple[int, int]] = (),
) -> OffsetMap:
    """The map over `(base_offset, bytes)` dirty segments, in offset order, below `end_offset`,
    skipping the records of the aborted transactions `aborted_txns` (producer id, first
    offset).

    Stops before a segment whose records could push the map past `max_keys` (the first
    segment always goes in): the map's `end_offset` is then that segment's base offset.
    """
    assert max_keys > 0
    txns = TransactionCleaning(list(aborted_txns))
    offset_map = OffsetMap(start_offset, end_offset)
    for index, (base_offset, buf) in enumerate(segments):
        if base_offset >= end_offset:
            break
        headers = list(iter_batches(buf))
        record_count = sum(h.record_count for _, h in headers if not h.is_control)
        if index > 0 and len(offset_map.offsets) + record_count > max_keys:
            offset_map.end_offset = base_offset
            break
        for position, header in headers:
            if header.base_offset >= end_offset:
                continue
            if header.is_control:
                txns.on_control_batch(buf, position, header)
                continue
            if txns.on_batch(header):
                continue  # an aborted transaction's records supersede nothing
            for record in iter_records(buf, position, check_crc=False):
                if record.key is not None and start_offset <= record.offset < end_offset:
                    offset_map.offsets[bytes(record.key)] = record.offset
    return offset_map


@dataclass(frozen=True, slots=True)
class CleanedSegment:
    """One source segment's surviving bytes and their batch spans (positions from 0)."""

    base_offset: int
    next_offset: int  # the source's next offset: the cleaned range this segment covers
    records: bytes
    spans: tuple[BatchSpan, ...]


def clean_batches(
    buf: bytes,
    offset_map: OffsetMap,
    *,
    now_ms: int,
    delete_retention_ms: int,
    retained_batch_last_offsets: frozenset[int] = frozenset(),
    txns: TransactionCleaning | None = None,
) -> tuple[bytes, list[BatchSpan]]:
    """The segment bytes `buf` without superseded records, expired tombstones, aborted
    transactions' data and markers past their delete horizon.

    `retained_batch_last_offsets`: last offsets of the active producers' last batches, kept
    (possibly empty) for idempotence state. Offsets of kept records never change. `txns`
    carries the pass's transaction state from segment to segment (None: no transactions).
    """
    if txns is None:
        txns = TransactionCleaning()
    out = bytearray()
    spans: list[BatchSpan] = []
    for position, header in iter_batches(buf):
        batch: bytes | None
        if header.is_control:
            batch = _clean_control_batch(buf, position, header, txns, now_ms, delete_retention_ms)
        elif txns.on_batch(header):
            batch = None  # aborted data
        else:
            batch = _clean_batch(buf, position, header, offset_map, now_ms, delete_retention_ms)
        if batch is None and header.has_producer_id:
            if header.last_offset in retained_batch_last_offsets:
                batch = _pack_batch(header, b"", 0, header.max_timestamp, header.max_timestamp)
        if batch is None:
            continue
        spans.append(
            (len(out), header.base_offset, header.last_offset, _max_timestamp(batch), len(batch))
        )
        out += batch
    return bytes(out), spans


def _clean_control_batch(
    buf: bytes,
    position: int,
    header: BatchHeader,
    txns: TransactionCleaning,
    now_ms: int,
    delete_retention_ms: int,
) -> bytes | None:
    """A control batch kept as is, stamped with its delete horizon, or dropped past it."""
    whole = buf[position : position + header.size_bytes]
    if not txns.on_control_batch(buf, position, header):
        return whole
    if header.attributes & DELETE_HORIZON_FLAG:
        return None if header.base_timestamp <= now_ms else whole
    horizon_ms = now_ms + delete_retention_ms
    body = bytearray()
    for r in iter_records(buf, position, check_crc=False):
        encode_record(
            body, r.offset - header.base_offset, r.timestamp_ms - horizon_ms, r.key, r.value,
            r.headers,
        )  # fmt: skip
    return _pack_batch(
        header,
        bytes(body),
        header.record_count,
        horizon_ms,
        header.max_timestamp,
        attributes=header.attributes | DELETE_HORIZON_FLAG,
    )


def _clean_batch(
    buf: bytes,
    position: int,
    header: BatchHeader,
    offset_map: OffsetMap,
    now_ms: int,
    delete_retention_ms: int,
) -> bytes | None:
    """The batch's bytes with only the records to keep; None when none is kept."""
    whole = buf[position : position + header.size_bytes]
    if header.is_control:
        return whole
    kept = []
    for record in iter_records(buf, position, check_crc=False):
        if record.key is None:
            continue  # Kafka refuses keyless records on compacted topics
        latest = offset_map.latest_offset(bytes(record.key))
        if latest is not None and latest > record.offset:
            continue
        if (
            record.value is None
            and record.offset < offset_map.start_offset  # a previous clean saw it
            and record.timestamp_ms + delete_retention_ms <= now_ms
        ):
            continue
        kept.append(record)
    if not kept:
        return None
    if len(kept) == header.record_count:
        return whole  # untouched: keep its bytes
    if header.attributes & TIMESTAMP_TYPE_MASK:
        base_timestamp_ms = header.base_timestamp  # LogAppendTime: records carry maxTimestamp
    else:
        base_timestamp_ms = min(r.timestamp_ms for r in kept)
    body = bytearray()
    for r in kept:
        delta_ms = (
            0 if header.attributes & TIMESTAMP_TYPE_MASK else r.timestamp_ms - base_timestamp_ms
        )
        encode_record(body, r.offset - header.base_offset, delta_ms, r.key, r.value, r.headers)
    max_timestamp_ms = (
        header.max_timestamp
        if header.attributes & TIMESTAMP_TYPE_MASK
        else max(r.timestamp_ms for r in kept)
    )
    return _pack_batch(header, bytes(body), len(kept), base_timestamp_ms, max_timestamp_ms)


def _pack_batch(
    header: BatchHeader,
    records_bytes: bytes,
    record_count: int,
    base_timestamp_ms: int,
    max_timestamp_ms: int,
    *,
    attributes: int | None = None,
) -> bytes:
    """A batch with `header`'s offsets and producer fields around new records (and its
    attributes unless `attributes` is given)."""
    if attributes is None:
        attributes = header.attributes
    if record_count:
        payload = compress(header.compression_type, records_bytes)
    else:  # Kafka's empty batch header: no records, no compression
        payload = b""
        attributes &= ~COMPRESSION_MASK
    after_crc = (
        _HEADER_AFTER_CRC.pack(
            attributes,
            header.last_offset_delta,  # kept: the producer's last sequence survives
            base_timestamp_ms,
            max_timestamp_ms,
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            record_count,
        )
        + payload
    )
    batch_length = HEADER_BYTES - LOG_OVERHEAD + len(payload)
    batch = (
        pack_prefix(header.base_offset, batch_length, header.partition_leader_epoch)
        + struct.pack(">I", crc32c.crc32c(after_crc))
        + after_crc
    )
    assert read_header(batch).size_bytes == len(batch)
    return batch


def _max_timestamp(batch: bytes) -> int:
    return read_header(batch).max_timestamp


def group_cleaned_segments(
    cleaned: Sequence[CleanedSegment], max_segment_bytes: int
) -> list[list[CleanedSegment]]:
    """Consecutive cleaned segments grouped so each group fits one segment: total bytes within
    `max_segment_bytes` and offsets within one segment's relative range. Never empty groups."""
    groups: list[list[CleanedSegment]] = []
    for segment in cleaned:
        if groups and fits_group(groups[-1], segment, max_segment_bytes):
            groups[-1].append(segment)
        else:
            groups.append([segment])
    return groups


def fits_group(
    group: Sequence[CleanedSegment], segment: CleanedSegment, max_segment_bytes: int
) -> bool:
    """`segment` may join `group` (its successor): the whole still fits one segment."""
    assert group
    group_bytes = sum(len(s.records) for s in group)
    fits_bytes = group_bytes + len(segment.records) <= max_segment_bytes
    return fits_bytes and segment.next_offset - 1 - group[0].base_offset <= MAX_RELATIVE_OFFSET


def concatenate_group(group: Sequence[CleanedSegment]) -> tuple[bytes, list[BatchSpan]]:
    """One group's bytes and spans, positions rebased onto the concatenation."""
    out = bytearray()
    spans: list[BatchSpan] = []
    for segment in group:
        shift = len(out)
        spans.extend((p + shift, b, last, ts, size) for p, b, last, ts, size in segment.spans)
        out += segment.records
    return bytes(out), spans
