"""Roll and retention rules (pure) and retention applied to a real log."""

from __future__ import annotations

import pytest

from log.common.errors import OffsetOutOfRangeError
from log.storage.config import LogConfig
from log.storage.retention import SegmentSummary, deletable_segment_count, roll_reason

from .conftest import make_batch


def _roll(config: LogConfig, **overrides):
    arguments = dict(
        segment_base_offset=0,
        segment_size_bytes=100,
        segment_first_batch_timestamp_ms=1_000,
        segment_created_ms=0,
        index_full=False,
        records_size_bytes=100,
        records_max_timestamp_ms=1_000,
        records_last_offset=10,
        now_ms=1_000,
    )
    arguments.update(overrides)
    return roll_reason(config, **arguments)


def test_roll_rules():
    config = LogConfig(segment_bytes=1000, segment_ms=500)
    assert _roll(config) is None
    assert _roll(config, segment_size_bytes=901) == "segment.bytes"
    assert _roll(config, segment_size_bytes=900) is None
    assert _roll(config, records_max_timestamp_ms=1_501) == "segment.ms"
    assert _roll(config, segment_size_bytes=0, records_max_timestamp_ms=9_999) is None
    no_timestamp = dict(segment_first_batch_timestamp_ms=-1, records_max_timestamp_ms=-1)
    assert _roll(config, now_ms=501, **no_timestamp) == "segment.ms"
    assert _roll(config, index_full=True) == "segment.index.bytes"
    assert _roll(config, records_last_offset=1 << 31) == "relative offset overflow"


def _segments(*sizes_and_timestamps, log_end_offset=None):
    result = []
    base = 0
    for size, timestamp in sizes_and_timestamps:
        result.append([base, size, timestamp])
        base += 10
    summaries = []
    for i, (base, size, timestamp) in enumerate(result):
        upper = result[i + 1][0] if i + 1 < len(result) else (log_end_offset or base + 10)
        summaries.append(SegmentSummary(base, upper, size, timestamp))
    return summaries


def test_retention_by_time_stops_at_first_young_segment_and_high_watermark():
    segments = _segments((100, 10), (100, 20), (100, 900), (100, 30))
    count = deletable_segment_count(
        segments,
        high_watermark=40,
        log_start_offset=0,
        retention_ms=500,
        retention_bytes=-1,
        now_ms=1000,
    )
    assert count == (2, "retention.ms")
    count = deletable_segment_count(
        segments,
        high_watermark=15,
        log_start_offset=0,
        retention_ms=500,
        retention_bytes=-1,
        now_ms=1000,
    )
    assert count == (1, "retention.ms")


def test_retention_by_bytes_and_log_start_offset():
    segments = _segments((100, 0), (100, 0), (100, 0), (50, 0))
    kwargs = dict(high_watermark=40, retention_ms=-1, now_ms=0)
    assert deletable_segment_count(segments, log_start_offset=0, retention_bytes=250, **kwargs) == (
        1,
        "retention.bytes",
    )
    assert (
        deletable_segment_count(segments, log_start_offset=0, retention_bytes=150, **kwargs)[0] == 2
    )
    assert deletable_segment_count(segments, log_start_offset=25, retention_bytes=-1, **kwargs) == (
        2,
        "log start offset",
    )
    empty_active = _segments((100, 0), (0, 0), log_end_offset=10)
    assert deletable_segment_count(
        empty_active,
        high_watermark=10,
        log_start_offset=0,
        retention_ms=0,
        retention_bytes=-1,
        now_ms=10**9,
    ) == (1, "retention.ms")


def _filled_log(log_factory, config, batch_count=20):
    log = log_factory(config)
    for i in range(batch_count):
        log.append_as_leader(make_batch(2, value_bytes=100, timestamp_ms=1000 * i), 0, 1000 * i)
    return log


def test_log_retention_by_time_respects_high_watermark(log_factory):
    log = _filled_log(log_factory, LogConfig(segment_bytes=800, retention_ms=5_000))
    segment_count = len(log.segments)
    assert segment_count > 4
    assert log.delete_old_segments(now_ms=100_000) == 0  # high watermark still 0
    log.update_high_watermark(log.log_end_offset)
    deleted = log.delete_old_segments(now_ms=19_000 + 5_000 + 1)
    assert deleted > 0
    remaining = log.segments
    assert log.log_start_offset == remaining[0].base_offset
    assert all(19_000 + 5_001 - s.largest_timestamp <= 5_000 for s in remaining[:1])
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    # Everything expired and below the high watermark: a new empty active segment remains.
    assert log.delete_old_segments(now_ms=10**9) > 0
    assert log.log_start_offset == log.log_end_offset == 40
    assert log.read(40, 100).records == b""
    log.append_as_leader(make_batch(1), 0, 10**9)
    assert log.log_end_offset == 41


def test_log_retention_by_bytes_and_delete_records(log_factory):
    log = _filled_log(
        log_factory, LogConfig(segment_bytes=800, retention_ms=-1, retention_bytes=1000)
    )
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments(now_ms=0)
    assert log.size_bytes <= 1000 + 800
    assert log.size_bytes > 1000 - 800
    start = log.log_start_offset
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(log.log_end_offset + 1)
    assert log.delete_records_before(start + 5) == start + 5
    assert log.segments[0].base_offset <= start + 5 < log.segments[0].next_offset
    batches = log.read(start + 5, 1 << 20).records
    assert batches  # the batch holding the new start offset is still readable
