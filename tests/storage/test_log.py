"""UnifiedLog append/read/truncate/roll invariants, producer state, epochs, timestamps."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from log.common.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
)
from log.records.batch_header import iter_batches, read_header
from log.storage.config import LogConfig
from log.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, UnexpectedAppendOffsetError

from .conftest import make_batch


def read_all(log, max_bytes=1 << 20, upper_bound=None):
    """Every batch from log start to the end via repeated reads, as (header, bytes)."""
    out = []
    offset = log.log_start_offset
    end = log.log_end_offset if upper_bound is None else upper_bound
    while offset < end:
        fetched = log.read(offset, max_bytes, upper_bound)
        data = fetched.records
        assert data, f"no progress at {offset}"
        for position, header in iter_batches(data):
            out.append((header, bytes(data[position : position + header.size_bytes])))
        offset = out[-1][0].next_offset
        assert fetched.next_fetch_offset == offset
    return out


def linear_translate(segment, offset):
    position = 0
    data = segment.read_all()
    for position, header in iter_batches(data):
        if header.last_offset >= offset:
            return position, header
    return None


operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 6), st.integers(1, 400)),
        st.tuples(st.just("truncate"), st.integers(0, 100), st.just(0)),
        st.tuples(st.just("roll"), st.just(0), st.just(0)),
    ),
    min_size=1,
    max_size=40,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=operations, read_size=st.integers(1, 5000))
def test_append_read_truncate_roll_invariants(tmp_path_factory, ops, read_size):
    from log.storage.log_loader import load_log

    config = LogConfig(segment_bytes=3000, index_interval_bytes=300, segment_index_bytes=64)
    log = load_log(str(tmp_path_factory.mktemp("log") / "t-0"), config)
    expected: list[bytes] = []
    now_ms = 0
    for kind, a, b in ops:
        now_ms += 1
        if kind == "append":
            epoch = now_ms // 10
            info = log.append_as_leader(
                make_batch(a, value_bytes=b, timestamp_ms=now_ms, tag=now_ms), epoch, now_ms
            )
            assert info.first_offset == (read_header(expected[-1]).next_offset if expected else 0)
            assert info.last_offset == info.first_offset + a - 1
            expected.append(
                make_batch(
                    a,
                    value_bytes=b,
                    timestamp_ms=now_ms,
                    tag=now_ms,
                    base_offset=info.first_offset,
                    partition_leader_epoch=epoch,
                )
            )
        elif kind == "truncate":
            target = min(a, log.log_end_offset)
            log.truncate_to(target)
            expected = [e for e in expected if read_header(e).last_offset < target]
        else:
            log.roll(now_ms)
        next_offset = read_header(expected[-1]).next_offset if expected else 0
        assert log.log_end_offset == next_offset
    batches = read_all(log, read_size)
    assert [data for _, data in batches] == expected
    offsets = [h.base_offset for h, _ in batches]
    assert offsets == sorted(offsets)
    for previous, current in zip(batches, batches[1:], strict=False):
        assert current[0].base_offset == previous[0].next_offset  # contiguous
    for segment in log.segments:
        for offset in range(segment.base_offset, segment.next_offset + 1):
            assert segment.translate_offset(offset) == linear_translate(segment, offset)
        assert segment.size_bytes <= config.segment_bytes
    log.close()


def test_translate_offset_near_the_tail_matches_a_scan_across_trims_and_truncations(log_factory):
    """The segment's memory of recent batch starts (more batches than it keeps, leader and
    follower appends, truncations in and before it) answers as a scan of the file does."""
    log = log_factory(LogConfig(index_interval_bytes=1 << 20))  # no index entries: scans only
    offset = 0
    for round_, appends in enumerate([300, 20, 3]):  # 300 > 2 * TAIL_BATCHES
        for i in range(appends):
            log.append_as_leader(make_batch(1, tag=i), round_, i)
        chunk = b"".join(
            make_batch(
                2, tag=i, base_offset=log.log_end_offset + 2 * i, partition_leader_epoch=round_
            )
            for i in range(50)
        )
        log.append_as_follower(chunk)  # one multi-batch append
        segment = log.segments[-1]
        for offset in range(segment.base_offset, segment.next_offset + 2):
            assert segment.translate_offset(offset) == linear_translate(segment, offset), offset
        log.truncate_to(log.log_end_offset - 40 - 50 * round_)
    segment = log.segments[-1]
    for offset in range(segment.base_offset, segment.next_offset + 2):
        assert segment.translate_offset(offset) == linear_translate(segment, offset), offset
    log.close()


def test_read_bounds_and_min_one_batch(log_factory):
    log = log_factory()
    for i in range(5):
        log.append_as_leader(make_batch(2, value_bytes=500, tag=i), 0, i)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, 100)
    assert log.read(10, 100).records == b""
    one = log.read(3, 1)  # smaller than a batch: still one whole batch
    assert [h.base_offset for _, h in iter_batches(one.records)] == [2]
    assert log.read(0, 100, upper_bound_offset=0).records == b""
    bounded = log.read(0, 1 << 20, upper_bound_offset=6)
    assert [h.base_offset for _, h in iter_batches(bounded.records)] == [0, 2, 4]
    assert log.read(4, 1, min_one_batch=False).records == b""


def test_leader_validation_errors(log_factory):
    log = log_factory(LogConfig(max_message_bytes=300))
    with pytest.raises(MessageTooLargeError):
        log.append_as_leader(make_batch(1, value_bytes=400), 0, 0)
    good = bytearray(make_batch(1))
    good[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bytes(good), 0, 0)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(make_batch(1) + b"\x00\x01", 0, 0)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(make_batch(1) + make_batch(1), 0, 0)
    assert log.log_end_offset == 0
    assert log.append_as_leader(b"", 0, 0).first_offset == -1


def test_log_append_time_rewrites_max_timestamp(log_factory):
    log = log_factory(LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append_as_leader(make_batch(3, timestamp_ms=5), 0, 777)
    assert info.log_append_time_ms == 777 and info.max_timestamp == 777
    header = next(iter_batches(log.read(0, 1 << 20).records))[1]  # CRC re-validated here
    assert header.max_timestamp == 777 and header.timestamp_type == 1


def test_idempotent_duplicate_returns_original_offsets(log_factory):
    log = log_factory()
    log.append_as_leader(make_batch(2), 0, 0)
    first = make_batch(3, producer_id=42, producer_epoch=1, base_sequence=0)
    info = log.append_as_leader(first, 0, 1)
    log.append_as_leader(make_batch(1, producer_id=42, producer_epoch=1, base_sequence=3), 0, 2)
    end = log.log_end_offset
    retry = log.append_as_leader(first, 0, 3)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (2, 4)
    assert (info.first_offset, info.last_offset) == (2, 4)
    assert log.log_end_offset == end
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(make_batch(1, producer_id=42, producer_epoch=1, base_sequence=9), 0, 4)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(make_batch(1, producer_id=42, producer_epoch=0, base_sequence=4), 0, 4)
    assert log.log_end_offset == end
    # After a restart the snapshot + replay still knows the last batch.
    log.close()
    again = log_factory()
    retry = again.append_as_leader(
        make_batch(1, producer_id=42, producer_epoch=1, base_sequence=3), 0, 5
    )
    assert retry.duplicate and retry.first_offset == 5


def test_end_offset_for_epoch_and_follower_append(log_factory):
    leader = log_factory(name="leader-0")
    for epoch, count in ((0, 3), (0, 2), (2, 4), (5, 1)):
        leader.append_as_leader(make_batch(count), epoch, 0)
    assert leader.end_offset_for_epoch(0) == (0, 5)
    assert leader.end_offset_for_epoch(1) == (0, 5)
    assert leader.end_offset_for_epoch(2) == (2, 9)
    assert leader.end_offset_for_epoch(5) == (5, 10)
    assert leader.end_offset_for_epoch(6) == (-1, -1)
    follower = log_factory(name="follower-0")
    data = leader.read(0, 1 << 20).records
    follower.append_as_follower(data)
    assert follower.log_end_offset == 10
    assert follower.end_offset_for_epoch(2) == (2, 9)
    assert follower.read(0, 1 << 20).records == data
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(data)
    # Divergence: truncate to the end of epoch 2 and append a different epoch-3 history.
    follower.truncate_to(9)
    assert follower.end_offset_for_epoch(5) == (-1, -1)
    follower.append_as_follower(make_batch(2, base_offset=9, partition_leader_epoch=3))
    assert follower.end_offset_for_epoch(3) == (3, 11)


def test_fetch_offset_by_timestamp(log_factory):
    log = log_factory(LogConfig(segment_bytes=600, index_interval_bytes=50))
    rng = random.Random(3)
    timestamps = []
    for i in range(30):
        base = 1000 + 10 * i
        log.append_as_leader(make_batch(3, timestamp_ms=base), 0, 0)
        timestamps.extend([base, base + 1, base + 2])
    assert len(log.segments) > 3
    for _ in range(40):
        target = rng.randint(990, 1300)
        result = log.fetch_offset_by_timestamp(target)
        expected = next((i for i, t in enumerate(timestamps) if t >= target), None)
        if expected is None:
            assert result is None
        else:
            assert result.offset == expected and result.timestamp_ms == timestamps[expected]
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP).offset == 0
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP).offset == 90


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 300)), min_size=1, max_size=25),
    high_watermark=st.integers(0, 100),
    read_size=st.integers(1, 3000),
)
def test_reads_below_high_watermark_return_whole_batches_below_it(
    tmp_path_factory, sizes, high_watermark, read_size
):
    from log.storage.log_loader import load_log

    config = LogConfig(segment_bytes=2000, index_interval_bytes=100)
    log = load_log(str(tmp_path_factory.mktemp("hw") / "t-0"), config)
    for i, (count, value_bytes) in enumerate(sizes):
        log.append_as_leader(make_batch(count, value_bytes=value_bytes, tag=i), 0, i)
    log.update_high_watermark(high_watermark)
    assert log.high_watermark == min(high_watermark, log.log_end_offset)
    batch_ends = []
    offset = 0
    while offset < log.high_watermark:
        fetched = log.read(offset, read_size, upper_bound_offset=log.high_watermark)
        if not fetched.records:  # the high watermark sits inside the next batch
            break
        for _, header in iter_batches(fetched.records):
            assert header.last_offset < log.high_watermark
            batch_ends.append(header.next_offset)
        offset = fetched.next_fetch_offset
    everything = [h.next_offset for h, _ in read_all(log)]
    assert batch_ends == [end for end in everything if end <= log.high_watermark]
    log.close()


def test_flush_messages_and_segment_ms_roll(log_factory):
    log = log_factory(LogConfig(flush_messages=3, segment_ms=1_000))
    log.append_as_leader(make_batch(2, timestamp_ms=0), 0, 0)
    assert log.recovery_point == 0
    log.append_as_leader(make_batch(1, timestamp_ms=500), 0, 0)
    assert log.recovery_point == 3  # flushed: 3 unflushed messages
    log.append_as_leader(make_batch(1, timestamp_ms=1_000), 0, 0)
    assert len(log.segments) == 1
    log.append_as_leader(make_batch(1, timestamp_ms=1_002), 0, 0)  # > 1000 ms past max ts 1
    assert [s.base_offset for s in log.segments] == [0, 4]
    log.flush(up_to_offset=4)
    assert log.recovery_point == 4
    log.flush()
    assert log.recovery_point == log.log_end_offset == 5


def test_follower_keeps_offsets_with_gaps_and_snapshots_at_roll(log_factory):
    follower = log_factory(LogConfig(segment_bytes=500))
    offsets = [0, 5, 9, 30, 32, 60]
    for base in offsets:
        follower.append_as_follower(
            make_batch(2, value_bytes=150, base_offset=base, partition_leader_epoch=1)
        )
    assert follower.log_end_offset == 62
    headers = [h for _, h in iter_batches(follower.read(0, 1 << 20).records)]
    assert [h.base_offset for h in headers][:1] == [0]
    seen = [h.base_offset for h, _ in read_all(follower)]
    assert seen == offsets
    for offset in (1, 2, 6, 29):  # offsets in gaps read from the next batch
        first = next(iter_batches(follower.read(offset, 10).records))[1]
        assert first.last_offset >= offset
    assert len(follower.segments) > 1
    snapshots = follower.producer_state_manager.snapshot_offsets()
    assert snapshots == [s.base_offset for s in follower.segments[1:]]
    with pytest.raises(CorruptRecordError):
        follower.append_as_follower(make_batch(2, base_offset=70) + make_batch(2, base_offset=71))
    assert follower.log_end_offset == 62


def test_high_watermark_is_clamped_and_only_truncation_lowers_it(log_factory):
    log = log_factory()
    for _ in range(5):
        log.append_as_leader(make_batch(2), 0, 0)
    assert log.update_high_watermark(100) == 10
    assert log.update_high_watermark(4) == 10
    assert not log.maybe_increment_high_watermark(7)
    log.truncate_to(6)
    assert log.high_watermark == 6 and log.log_end_offset == 6
    assert log.maybe_increment_high_watermark(6) is False
    log.append_as_leader(make_batch(2), 0, 0)
    assert log.maybe_increment_high_watermark(8) and log.high_watermark == 8


def test_disk_write_failure_is_a_typed_storage_error(log_factory):
    import os

    from log.common.errors import KafkaStorageError

    log = log_factory()
    log.append_as_leader(make_batch(1), 0, 0)
    segment = log.active_segment
    read_only = os.open("/dev/null", os.O_RDONLY)
    saved = os.dup(segment._fd)
    try:
        os.dup2(read_only, segment._fd)  # the segment's descriptor now refuses writes
        with pytest.raises(KafkaStorageError):
            log.append_as_leader(make_batch(1), 0, 0)
    finally:
        os.dup2(saved, segment._fd)
        os.close(saved)
        os.close(read_only)
    assert log.log_end_offset == 1
    assert log.append_as_leader(make_batch(1), 0, 0).first_offset == 1


def test_truncate_at_or_past_the_end_still_cuts_a_dangling_epoch_entry(log_factory):
    # A leader that started epoch 7 at its log end offset but appended nothing, then became a
    # follower: the entry must go, or the new leader's epoch history would conflict with it.
    log = log_factory(name="dangling-0")
    log.append_as_leader(make_batch(3), 4, 0)
    log.leader_epoch_cache.assign(7, log.log_end_offset)
    assert log.latest_epoch == 7
    assert log.truncate_to(log.log_end_offset) is False
    assert log.latest_epoch == 4
    assert log.end_offset_for_epoch(4) == (4, 3)
