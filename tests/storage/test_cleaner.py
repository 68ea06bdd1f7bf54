"""The compaction core: kept records are exactly the latest per key (and live tombstones),
offsets unchanged, batches valid; producers' last batches survive empty; grouping bounds."""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from log.records.batch_header import iter_batches, read_header
from log.records.builder import Record, build_batch
from log.records.compression import CompressionType
from log.records.reader import iter_records
from log.storage.cleaner import (
    CleanedSegment,
    OffsetMap,
    build_offset_map,
    clean_batches,
    concatenate_group,
    group_cleaned_segments,
)

DELETE_RETENTION_MS = 1_000

# (key index or None, value or None for a tombstone, timestamp_ms)
record_strategy = st.tuples(
    st.one_of(st.none(), st.integers(0, 5)),
    st.one_of(st.none(), st.binary(max_size=4)),
    st.integers(0, 3_000),
)


def segment(batches: list[list[tuple]], compression_type: int = CompressionType.NONE) -> bytes:
    out = b""
    offset = 0
    for records in batches:
        out += build_batch(
            [
                Record(v, key=None if k is None else b"k%d" % k, timestamp_ms=t)
                for k, v, t in records
            ],
            base_offset=offset,
            compression_type=compression_type,
        )
        offset += len(records)
    return out


def records_of(buf: bytes) -> list[tuple]:
    return [
        (r.offset, r.key, r.value)
        for position, _ in iter_batches(buf)
        for r in iter_records(buf, position)
    ]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(record_strategy, min_size=1, max_size=6), min_size=1, max_size=6),
    st.integers(0, 4_000),
    st.integers(0, 36),
    st.sampled_from([CompressionType.NONE, CompressionType.LZ4]),
)
def test_compaction_keeps_latest_per_key_and_live_tombstones(
    batches, now_ms, first_dirty_offset, compression_type
):
    buf = segment(batches, compression_type)
    flat = [r for b in batches for r in b]
    first_dirty_offset = min(first_dirty_offset, len(flat))
    offset_map = build_offset_map([(0, buf)], 0, len(flat))
    offset_map.start_offset = first_dirty_offset  # tombstones below were seen by a clean
    cleaned, spans = clean_batches(
        buf, offset_map, now_ms=now_ms, delete_retention_ms=DELETE_RETENTION_MS
    )
    expected = []
    for offset, (k, v, t) in enumerate(flat):
        if k is None:
            continue
        key = b"k%d" % k
        if offset_map.offsets[key] != offset:
            continue
        if v is None and offset < first_dirty_offset and t + DELETE_RETENTION_MS <= now_ms:
            continue
        expected.append((offset, key, v))
    assert records_of(cleaned) == expected
    # offsets never move: every kept batch keeps its original base and last offset
    originals = {h.base_offset: h for _, h in iter_batches(buf)}
    for position, header in iter_batches(cleaned):
        original = originals[header.base_offset]
        assert header.last_offset == original.last_offset
        assert header.compression_type == original.compression_type
        assert (position, header.base_offset, header.last_offset) == spans.pop(0)[:3]
    assert not spans
    # cleaning is idempotent
    again, _ = clean_batches(
        cleaned, offset_map, now_ms=now_ms, delete_retention_ms=DELETE_RETENTION_MS
    )
    assert again == cleaned


def test_tombstone_survives_the_first_clean_that_sees_it():
    buf = segment([[(1, b"a", 0), (1, None, 0)]])
    first = build_offset_map([(0, buf)], 0, 2)  # first clean: nothing below start_offset
    cleaned, _ = clean_batches(buf, first, now_ms=10**9, delete_retention_ms=DELETE_RETENTION_MS)
    assert records_of(cleaned) == [(1, b"k1", None)]
    second = OffsetMap(2, 2, {})  # a later clean: the tombstone is below its first dirty offset
    cleaned2, _ = clean_batches(cleaned, second, now_ms=999, delete_retention_ms=1_000)
    assert records_of(cleaned2) == [(1, b"k1", None)]  # not yet delete.retention.ms old
    cleaned3, _ = clean_batches(cleaned, second, now_ms=1_000, delete_retention_ms=1_000)
    assert cleaned3 == b""


def test_a_producers_last_batch_is_kept_empty_with_its_sequence():
    records = [Record(b"v", key=b"k", timestamp_ms=5)] * 3
    older = build_batch(records, base_offset=0, producer_id=7, producer_epoch=1, base_sequence=0)
    last = build_batch(records, base_offset=3, producer_id=7, producer_epoch=1, base_sequence=3)
    newer = build_batch([Record(b"w", key=b"k", timestamp_ms=6)], base_offset=6)
    buf = older + last + newer
    offset_map = build_offset_map([(0, buf)], 0, 7)
    cleaned, spans = clean_batches(
        buf, offset_map, now_ms=0, delete_retention_ms=0, retained_batch_last_offsets=frozenset({5})
    )
    headers = [h for _, h in iter_batches(cleaned)]
    assert [(h.base_offset, h.last_offset, h.record_count) for h in headers] == [
        (3, 5, 0),
        (6, 6, 1),
    ]
    empty = headers[0]
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence) == (7, 1, 3)
    assert empty.last_sequence == 5 and empty.size_bytes == 61
    assert list(iter_records(cleaned, 0)) == []
    assert [s[1:3] for s in spans] == [(3, 5), (6, 6)]


def test_a_partly_cleaned_batch_keeps_its_producer_fields_and_last_offset():
    batch = build_batch(
        [Record(b"1", key=b"a"), Record(b"2", key=b"b"), Record(b"3", key=b"a")],
        base_offset=10, producer_id=3, producer_epoch=2, base_sequence=40,
        partition_leader_epoch=4,
    )  # fmt: skip
    tail = build_batch([Record(b"4", key=b"b")], base_offset=13)
    buf = batch + tail
    cleaned, _ = clean_batches(
        buf, build_offset_map([(10, buf)], 10, 14), now_ms=0, delete_retention_ms=0
    )
    header = read_header(cleaned)
    assert (header.base_offset, header.last_offset, header.record_count) == (10, 12, 1)
    assert (header.producer_id, header.base_sequence, header.last_sequence) == (3, 40, 42)
    assert header.partition_leader_epoch == 4
    assert records_of(cleaned) == [(12, b"a", b"3"), (13, b"b", b"4")]


def test_offset_map_stops_at_a_segment_boundary_when_full():
    first = segment([[(k, b"v", 0) for k in range(4)]])
    second = build_batch([Record(b"v", key=b"x%d" % i) for i in range(3)], base_offset=4)
    offset_map = build_offset_map([(0, first), (4, second)], 0, 7, max_keys=5)
    assert offset_map.end_offset == 4 and len(offset_map.offsets) == 4
    whole = build_offset_map([(0, first), (4, second)], 0, 7, max_keys=7)
    assert whole.end_offset == 7 and len(whole.offsets) == 7


def test_grouping_respects_segment_bytes_and_rebases_positions():
    def cleaned(base: int, size: int) -> CleanedSegment:
        return CleanedSegment(base, base + 10, b"x" * size, ((0, base, base + 9, 0, size),))

    segments = [cleaned(0, 40), cleaned(10, 50), cleaned(20, 20), cleaned(30, 0), cleaned(40, 90)]
    groups = group_cleaned_segments(segments, max_segment_bytes=100)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 10], [20, 30], [40]]
    data, spans = concatenate_group(groups[0])
    assert len(data) == 90 and [s[0] for s in spans] == [0, 40]


def test_the_cleaner_cores_import_no_io():
    root = Path(__file__).resolve().parents[2]
    for name in ("cleaner.py", "cleaner_manager.py"):
        tree = ast.parse((root / "log" / "storage" / name).read_text())
        roots = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                 for a in n.names}  # fmt: skip
        roots |= {n.module.split(".")[0] for n in ast.walk(tree)
                  if isinstance(n, ast.ImportFrom) and n.module}  # fmt: skip
        assert not roots & {"os", "trio", "time", "threading", "socket"}, name
