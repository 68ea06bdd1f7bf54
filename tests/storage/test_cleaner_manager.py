"""LogCleanerManager: cleanable range (first dirty / first uncleanable offsets) and the choice
of the dirtiest log."""

from __future__ import annotations

from log.storage.cleaner_manager import (
    CleanableLog,
    LogCleanerManager,
    cleanable_offsets,
    log_to_clean,
)
from log.storage.retention import SegmentSummary

# four segments of 100 bytes: [0,10) [10,20) [20,30) and the active [30,35)
SEGMENTS = (
    SegmentSummary(0, 10, 100, 1_000),
    SegmentSummary(10, 20, 100, 2_000),
    SegmentSummary(20, 30, 100, 3_000),
    SegmentSummary(30, 35, 50, 4_000),
)


def offsets(**overrides):
    kwargs = dict(
        log_start_offset=0,
        log_end_offset=35,
        high_watermark=35,
        last_stable_offset=None,
        checkpoint_offset=None,
        min_compaction_lag_ms=0,
        now_ms=10_000,
    )
    kwargs.update(overrides)
    return cleanable_offsets(SEGMENTS, **kwargs)


def test_first_uncleanable_is_the_active_segment_high_watermark_or_compaction_lag():
    assert offsets() == (0, 30)
    assert offsets(high_watermark=25) == (0, 20)  # the segment holding the HW is uncleanable
    assert offsets(high_watermark=20) == (0, 20)
    assert offsets(last_stable_offset=12) == (0, 10)
    assert offsets(min_compaction_lag_ms=8_500) == (0, 10)  # segment 10 is 8000 ms old
    assert offsets(high_watermark=5) == (0, 0)


def test_first_dirty_comes_from_the_checkpoint_clamped_to_the_log():
    assert offsets(checkpoint_offset=20) == (20, 30)
    assert offsets(checkpoint_offset=5, log_start_offset=10) == (10, 30)
    assert offsets(checkpoint_offset=99) == (0, 30)  # past the log end: truncated, start over
    assert offsets(checkpoint_offset=30) == (30, 30)  # nothing dirty
    assert offsets(checkpoint_offset=20, high_watermark=15) == (20, 20)


def test_dirty_ratio_counts_whole_segments():
    assert log_to_clean(("t", 0), SEGMENTS, 10, 30).cleanable_ratio == 2 / 3
    assert log_to_clean(("t", 0), SEGMENTS, 0, 30).cleanable_ratio == 1.0
    assert log_to_clean(("t", 0), SEGMENTS, 30, 30).dirty_bytes == 0


def cleanable(ratio: float = 0.5, compact: bool = True) -> CleanableLog:
    return CleanableLog(SEGMENTS, 0, 35, 35, None, compact, ratio, 0)


def test_grab_filthiest_log_picks_the_dirtiest_eligible_log_and_marks_it():
    manager = LogCleanerManager({("a", 0): 20, ("b", 0): 10})
    logs = {
        ("a", 0): cleanable(),  # 1/3 dirty: below 0.5
        ("b", 0): cleanable(),  # 2/3 dirty
        ("c", 0): cleanable(compact=False),  # delete policy: never
        ("d", 0): cleanable(ratio=0.9),  # all dirty (no checkpoint) but 1.0 >= 0.9
    }
    first = manager.grab_filthiest_log(logs, 0)
    assert first is not None and first.topic_partition == ("d", 0)
    second = manager.grab_filthiest_log(logs, 0)  # d is in progress
    assert second is not None and second.topic_partition == ("b", 0)
    assert second.first_dirty_offset == 10 and second.first_uncleanable_offset == 30
    assert manager.grab_filthiest_log(logs, 0) is None
    manager.done_cleaning(("b", 0), 30)
    manager.abort_cleaning(("d", 0))
    assert manager.cleaner_checkpoints[("b", 0)] == 30
    assert manager.grab_filthiest_log(logs, 0).topic_partition == ("d", 0)
    assert manager.grab_filthiest_log({("a", 0): cleanable(ratio=0.3)}, 0).first_dirty_offset == 20


def test_deleted_and_vanished_logs_lose_their_checkpoints():
    manager = LogCleanerManager({("a", 0): 20, ("b", 0): 10, ("c", 0): 5})
    manager.remove_log(("a", 0))
    manager.retain_logs({("b", 0)})
    assert manager.cleaner_checkpoints == {("b", 0): 10}


def test_a_log_past_max_compaction_lag_is_cleaned_whatever_its_ratio():
    manager = LogCleanerManager({("a", 0): 20})  # 1/3 dirty, below the 0.9 ratio
    timestamps = (500, 1_500, 2_500, 3_500)  # the first dirty segment [20, 30) began at 2500

    def log(max_compaction_lag_ms: int) -> CleanableLog:
        return CleanableLog(SEGMENTS, 0, 35, 35, None, True, 0.9, 0, max_compaction_lag_ms,
                            timestamps)  # fmt: skip

    assert manager.grab_filthiest_log({("a", 0): log(8_000)}, 10_000) is None
    overdue = manager.grab_filthiest_log({("a", 0): log(7_000)}, 10_000)
    assert overdue is not None and overdue.first_dirty_offset == 20
