"""The log cleaner over real UnifiedLogs in a LogManager: what a reader sees after cleaning
(property test against a model), the cleaner-offset-checkpoint, crashes at every step of the
swap, and appends concurrent with a clean in trio."""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from log.records.batch_header import iter_batches
from log.records.builder import Record, build_batch
from log.records.reader import iter_records
from log.storage.checkpoint_file import OffsetCheckpointFile
from log.storage.cleaner_manager import CLEANER_OFFSET_CHECKPOINT_FILE
from log.storage.cleaner_swap import commit_cleaned_file, finish_swap, recover_swap_files
from log.storage.config import LogConfig
from log.storage.log import UnifiedLog
from log.storage.log_cleaner import CleanerConfig, build_cleaned_segments
from log.storage.manager import LogManager

TOPIC = "compacted"
DELETE_RETENTION_MS = 1_000


def compacted_config(segment_bytes: int = 400) -> LogConfig:
    return LogConfig(
        segment_bytes=segment_bytes,
        cleanup_policy="compact",
        delete_retention_ms=DELETE_RETENTION_MS,
        min_cleanable_dirty_ratio=0.0,
        index_interval_bytes=64,
        retention_ms=-1,
    )


def open_manager(log_dir: Path, config: LogConfig) -> LogManager:
    return LogManager(log_dir, topic_configs={TOPIC: config}, cleaner_config=CleanerConfig())


def append(log: UnifiedLog, records: list[tuple[int, bytes | None, int]], now_ms: int = 0) -> None:
    """One batch of (key index, value or None, timestamp_ms); the HW follows the log end."""
    batch = build_batch([Record(v, key=b"k%d" % k, timestamp_ms=t) for k, v, t in records])
    log.append_as_leader(batch, leader_epoch=0, now_ms=now_ms)
    log.update_high_watermark(log.log_end_offset)


def read_all(log: UnifiedLog) -> list[tuple[int, bytes, bytes | None]]:
    """Everything a consumer reading from the log start sees, batch by batch."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, max_bytes=300)
        assert info.records, f"stuck at {offset}"
        for position, _ in iter_batches(info.records):
            out.extend((r.offset, r.key, r.value) for r in iter_records(info.records, position))
        offset = info.next_fetch_offset
    offsets = [o for o, _, _ in out]
    assert offsets == sorted(set(offsets))
    return out


def model_clean(records, first_dirty, first_uncleanable, now_ms):
    """What a clean keeps of `records` [(offset, key, value, timestamp)]."""
    latest = {}
    for offset, key, _, _ in records:
        if first_dirty <= offset < first_uncleanable:
            latest[key] = offset
    kept = []
    for offset, key, value, timestamp in records:
        if offset < first_uncleanable:
            if latest.get(key, offset) > offset:
                continue
            expired = timestamp + DELETE_RETENTION_MS <= now_ms
            if value is None and offset < first_dirty and expired:
                continue
        kept.append((offset, key, value, timestamp))
    return kept


round_strategy = st.tuples(
    st.lists(  # batches of (key, value or tombstone, timestamp)
        st.lists(
            st.tuples(
                st.integers(0, 6),
                st.one_of(st.none(), st.binary(min_size=1, max_size=30)),
                st.integers(0, 3_000),
            ),  # fmt: skip
            min_size=1,
            max_size=5,
        ),
        min_size=1,
        max_size=12,
    ),
    st.integers(0, 5_000),  # now_ms of the clean after the appends
)


@settings(max_examples=60, deadline=None)
@given(st.lists(round_strategy, min_size=1, max_size=3))
def test_cleaned_log_keeps_exactly_the_latest_value_per_key_in_order(rounds):
    with tempfile.TemporaryDirectory() as tmp:
        manager = open_manager(Path(tmp), compacted_config())
        log = manager.get_or_create_log(TOPIC, 0)
        model: list[tuple[int, bytes, bytes | None, int]] = []
        checkpoint = 0
        for batches, now_ms in rounds:
            for batch in batches:
                base = log.log_end_offset
                append(log, batch)
                model += [(base + i, b"k%d" % k, v, t) for i, (k, v, t) in enumerate(batch)]
            first_uncleanable = log.active_segment.base_offset
            assert manager.cleaner.clean_once(now_ms) == (first_uncleanable > checkpoint)
            if first_uncleanable > checkpoint:
                model = model_clean(model, checkpoint, first_uncleanable, now_ms)
                checkpoint = first_uncleanable
            assert read_all(log) == [(o, k, v) for o, k, v, _ in model]
        manager.shutdown()
        reopened = open_manager(Path(tmp), compacted_config())
        assert read_all(reopened.get_log(TOPIC, 0)) == [(o, k, v) for o, k, v, _ in model]
        assert reopened.cleaner.manager.cleaner_checkpoints.get((TOPIC, 0), 0) == checkpoint
        reopened.shutdown()


def fill(log: UnifiedLog, rng: random.Random, count: int, keys: int = 5) -> None:
    for i in range(count):
        append(log, [(rng.randrange(keys), b"value-%d" % i, i)])


def latest_values(records) -> dict[bytes, bytes | None]:
    return {key: value for _, key, value in records}


def test_segments_shrink_group_and_the_checkpoint_is_written_and_pruned(tmp_path):
    manager = open_manager(tmp_path, compacted_config())
    log = manager.get_or_create_log(TOPIC, 0)
    fill(log, random.Random(1), 200)
    before = read_all(log)
    segment_count, size_bytes = len(log.segments), log.size_bytes
    assert manager.cleaner.clean_once(10)
    after = read_all(log)
    assert latest_values(after) == latest_values(before)
    assert len(after) <= 5 + len([o for o, _, _ in before if o >= log.active_segment.base_offset])
    assert len(log.segments) < segment_count and log.size_bytes < size_bytes
    checkpoint_path = tmp_path / CLEANER_OFFSET_CHECKPOINT_FILE
    checkpoints = OffsetCheckpointFile(checkpoint_path).read()
    assert checkpoints == {(TOPIC, 0): log.active_segment.base_offset}
    assert not manager.cleaner.clean_once(20)  # nothing dirty any more
    # a fetch at an offset the clean removed returns the next batch
    gone = next(o for o in range(log.log_end_offset) if o not in {r[0] for r in after})
    info = log.read(gone, max_bytes=1000)
    first = next(iter_batches(info.records))[1]
    assert first.last_offset >= gone
    assert manager.delete_log(TOPIC, 0)
    assert OffsetCheckpointFile(checkpoint_path).read() == {}
    manager.shutdown()


def test_compact_delete_policy_also_applies_retention(tmp_path):
    config = LogConfig(segment_bytes=400, cleanup_policy="compact,delete", retention_ms=100)
    manager = open_manager(tmp_path, config)
    log = manager.get_or_create_log(TOPIC, 0)
    fill(log, random.Random(2), 40)
    assert log.delete_old_segments(now_ms=10_000) > 0
    manager.shutdown()


def test_an_active_producers_last_batch_survives_as_an_empty_batch(tmp_path):
    manager = open_manager(tmp_path, compacted_config(segment_bytes=200))
    log = manager.get_or_create_log(TOPIC, 0)
    for sequence in range(3):
        batch = build_batch([Record(b"p%d" % sequence, key=b"k")], producer_id=9,
                            producer_epoch=0, base_sequence=sequence)  # fmt: skip
        log.append_as_leader(batch, leader_epoch=0, now_ms=0)
    for i in range(10):
        log.append_as_leader(build_batch([Record(b"x%d" % i, key=b"k")]), 0, 0)
    log.update_high_watermark(log.log_end_offset)
    assert manager.cleaner.clean_once(0)
    headers = [h for _, _, h in log.iter_batch_headers(0) if h.producer_id == 9]
    assert [(h.base_offset, h.record_count, h.base_sequence) for h in headers] == [(2, 0, 2)]
    manager.shutdown()
    reopened = open_manager(tmp_path, compacted_config(segment_bytes=200))
    entry = reopened.get_log(TOPIC, 0).producer_state_manager.last_entry(9)
    assert entry is not None and entry.last_seq == 2
    reopened.shutdown()


# -- crashes ------------------------------------------------------------------------------


def crash_copy(tmp_path: Path, name: str) -> Path:
    """The directory as a crash would leave it (files as they are, no clean shutdown)."""
    target = tmp_path / name
    shutil.copytree(tmp_path / "live", target)
    return target


@pytest.mark.parametrize("step", ["cleaned", "swap", "deleting", "one_group_swapped", "done"])
def test_a_crash_at_any_step_of_the_swap_leaves_a_correct_log(tmp_path, step):
    live = tmp_path / "live"
    manager = open_manager(live, compacted_config(segment_bytes=300))
    log = manager.get_or_create_log(TOPIC, 0)
    fill(log, random.Random(4), 120)
    original = read_all(log)
    plan = manager.cleaner.plan(now_ms=0)
    result = build_cleaned_segments(plan)
    groups = [g for g in result.groups if g.cleaned_path is not None]
    assert len(groups) >= 2 and len(groups[0].sources) >= 2
    if step != "cleaned":
        swaps = [commit_cleaned_file(g.cleaned_path) for g in groups]
        if step == "deleting":
            groups[0].sources[1].segment.delete()  # part of step 3 of the first group
        elif step == "one_group_swapped":
            log.replace_segments([s.segment for s in groups[0].sources], swaps[0], groups[0].spans)
        elif step == "done":
            for group, swap in zip(groups, swaps, strict=True):
                for source in group.sources:
                    source.segment.delete()
                finish_swap(swap)
    crashed = open_manager(crash_copy(tmp_path, "crashed"), compacted_config(segment_bytes=300))
    recovered = read_all(crashed.get_log(TOPIC, 0))
    names = os.listdir(tmp_path / "crashed" / f"{TOPIC}-0")
    assert not any(n.endswith((".cleaned", ".swap", ".deleted")) for n in names)
    assert set(recovered) <= set(original)
    assert latest_values(recovered) == latest_values(original)
    if step == "cleaned":
        assert recovered == original
    else:
        assert len(recovered) < len(original)
    crashed.shutdown()


# -- concurrency ----------------------------------------------------------------------------


async def test_appends_and_reads_during_background_cleans_lose_nothing(tmp_path):
    manager = open_manager(tmp_path, compacted_config(segment_bytes=500))
    log = manager.get_or_create_log(TOPIC, 0)
    rng = random.Random(5)
    expected: dict[bytes, bytes] = {}

    async def appender() -> None:
        for i in range(400):
            key = rng.randrange(8)
            append(log, [(key, b"v%d" % i, i)])
            expected[b"k%d" % key] = b"v%d" % i
            if i % 20 == 0:
                assert latest_values(read_all(log)) == expected
            await trio.sleep(0)

    rounds = 0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(appender)
        with trio.move_on_after(10):
            while len(expected) < 8 or log.log_end_offset < 400:
                rounds += await manager.cleaner.clean_filthiest_log(now_ms=0)
                await trio.sleep(0)
    assert rounds >= 2 and manager.cleaner.cleaned_count == rounds
    await manager.cleaner.clean_filthiest_log(now_ms=0)
    assert latest_values(read_all(log)) == expected
    manager.shutdown()
    reopened = open_manager(tmp_path, compacted_config(segment_bytes=500))
    assert latest_values(read_all(reopened.get_log(TOPIC, 0))) == expected
    reopened.shutdown()


def test_a_clean_aborts_when_the_log_is_truncated_meanwhile(tmp_path):
    manager = open_manager(tmp_path, compacted_config())
    log = manager.get_or_create_log(TOPIC, 0)
    fill(log, random.Random(6), 60)
    plan = manager.cleaner.plan(now_ms=0)
    result = build_cleaned_segments(plan)
    log.truncate_to(plan.sources[1].base_offset + 1)  # a follower diverged
    before = read_all(log)
    assert not manager.cleaner.finish(plan, result)
    assert read_all(log) == before
    assert not any(n.endswith(".cleaned") for n in os.listdir(log.dir_path))
    assert (TOPIC, 0) not in manager.cleaner.manager.in_progress
    # the truncated range is dirty again: the next clean starts at the truncation point
    assert manager.cleaner.clean_once(now_ms=0)
    fill(log, random.Random(7), 60)
    checkpoint = manager.cleaner.manager.cleaner_checkpoints[(TOPIC, 0)]
    log.truncate_to(checkpoint - 1)
    manager.cleaner.plan(now_ms=0)
    assert manager.cleaner.manager.cleaner_checkpoints[(TOPIC, 0)] == checkpoint - 1
    manager.shutdown()


def test_swap_recovery_deletes_only_the_swaps_offset_range_and_drops_strays(tmp_path):
    def batch(base_offset: int, count: int) -> bytes:
        return build_batch([Record(b"v", key=b"k")] * count, base_offset=base_offset)

    def name(base_offset: int, suffix: str) -> Path:
        return tmp_path / f"{base_offset:020d}{suffix}"

    name(0, ".log").write_bytes(batch(0, 10))
    name(0, ".index").write_bytes(b"")
    name(10, ".log").write_bytes(batch(10, 10))
    name(20, ".log").write_bytes(batch(20, 10))  # past the swap's last offset: kept
    name(0, ".log.swap").write_bytes(batch(9, 1) + batch(19, 1))  # covers [0, 20)
    name(20, ".index.swap").write_bytes(b"stray")
    name(30, ".log.swap").write_bytes(b"")  # never committed empty: a stray
    name(40, ".log.cleaned").write_bytes(b"partial")
    recover_swap_files(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000000.log",
        "00000000000000000020.log",
    ]
    assert name(0, ".log").read_bytes() == batch(9, 1) + batch(19, 1)


def test_a_compacted_topic_refuses_keyless_records(tmp_path):
    from log.common.errors import ErrorCode, InvalidRecordError

    manager = open_manager(tmp_path, compacted_config())
    log = manager.get_or_create_log(TOPIC, 0)
    keyless = build_batch([Record(b"a", key=b"k"), Record(b"b")])
    with pytest.raises(InvalidRecordError) as raised:
        log.append_as_leader(keyless, leader_epoch=0, now_ms=0)
    assert raised.value.error_code == ErrorCode.INVALID_RECORD
    assert log.log_end_offset == 0
    manager.shutdown()
