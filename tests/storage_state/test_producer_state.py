"""ProducerStateManager: duplicate window, epoch/sequence rules, wraparound, snapshots, reload."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from log.common.errors import (
    ErrorCode,
    InvalidProducerEpochError,
    InvalidRecordError,
    KafkaStorageError,
    OutOfOrderSequenceError,
)
from log.records.batch_header import read_header
from log.records.builder import Record, build_batch
from log.records.control import ControlRecordType, EndTransactionMarker
from log.storage.producer_state import (
    MAX_SEQUENCE,
    BatchMetadata,
    CompletedTxn,
    CorruptSnapshotError,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
    snapshot_path,
)

NOW_MS = 1_700_000_000_000


def header(
    *,
    producer_id=1000,
    producer_epoch=0,
    base_sequence=0,
    count=1,
    base_offset=0,
    timestamp_ms=NOW_MS,
    is_transactional=False,
    is_control=False,
):
    batch = build_batch(
        [Record(b"v", timestamp_ms=timestamp_ms) for _ in range(count)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
        is_control=is_control,
    )
    return read_header(batch)


class Leader:
    """Drives the manager like UnifiedLog.append_as_leader does: check, assign offsets, record."""

    def __init__(self, manager: ProducerStateManager) -> None:
        self.manager = manager
        self.log_end_offset = manager.map_end_offset

    def append(self, **kwargs) -> BatchMetadata | tuple[int, int]:
        candidate = header(base_offset=self.log_end_offset, **kwargs)
        duplicate = self.manager.check_append(candidate, NOW_MS)
        if duplicate is not None:
            return duplicate
        self.manager.on_batch_appended(candidate)
        self.log_end_offset = candidate.next_offset
        return candidate.base_offset, candidate.last_offset


def test_sequences_in_order_are_accepted_and_recorded():
    leader = Leader(ProducerStateManager(None))
    assert leader.append(base_sequence=0, count=3) == (0, 2)
    assert leader.append(base_sequence=3, count=2) == (3, 4)
    entry = leader.manager.last_entry(1000)
    assert entry is not None and entry.last_seq == 4 and entry.producer_epoch == 0
    assert leader.manager.map_end_offset == 5


def test_duplicate_of_any_of_last_five_batches_returns_original_offsets():
    leader = Leader(ProducerStateManager(None))
    for i in range(7):
        leader.append(base_sequence=2 * i, count=2)
    assert leader.log_end_offset == 14
    # Batches 2..6 (sequences 4..13) are in the window; batches 0, 1 fell out.
    for i in range(2, 7):
        duplicate = leader.append(base_sequence=2 * i, count=2)
        assert duplicate == BatchMetadata(2 * i, 2 * i + 1, 2 * i, 2 * i + 1, NOW_MS)
    assert leader.log_end_offset == 14  # nothing appended
    with pytest.raises(OutOfOrderSequenceError):
        leader.append(base_sequence=2, count=2)  # too old to be recognised
    # A batch with a matching first but different last sequence is not a duplicate.
    with pytest.raises(OutOfOrderSequenceError):
        leader.append(base_sequence=12, count=1)


def test_gap_in_sequence_is_out_of_order_with_kafka_error_code():
    leader = Leader(ProducerStateManager(None))
    leader.append(base_sequence=0, count=2)
    with pytest.raises(OutOfOrderSequenceError) as info:
        leader.append(base_sequence=3)
    assert info.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert "expected sequence 2" in str(info.value)


def test_older_producer_epoch_is_fenced():
    leader = Leader(ProducerStateManager(None))
    leader.append(producer_epoch=3, base_sequence=0)
    with pytest.raises(InvalidProducerEpochError) as info:
        leader.append(producer_epoch=2, base_sequence=1)
    assert info.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_new_producer_epoch_must_start_at_zero_and_resets_window():
    leader = Leader(ProducerStateManager(None))
    leader.append(producer_epoch=0, base_sequence=0, count=5)
    with pytest.raises(OutOfOrderSequenceError, match="must start at sequence 0"):
        leader.append(producer_epoch=1, base_sequence=5)
    assert leader.append(producer_epoch=1, base_sequence=0) == (5, 5)
    entry = leader.manager.last_entry(1000)
    assert entry.producer_epoch == 1 and len(entry.batches) == 1
    # The old epoch's batch is no duplicate any more, it is fenced.
    with pytest.raises(InvalidProducerEpochError):
        leader.append(producer_epoch=0, base_sequence=0, count=5)


def test_unknown_producer_accepted_at_any_sequence_like_kafka_after_kip_360():
    leader = Leader(ProducerStateManager(None))
    assert leader.append(producer_id=7, base_sequence=42) == (0, 0)
    with pytest.raises(OutOfOrderSequenceError):
        leader.append(producer_id=7, base_sequence=44)


def test_batch_with_producer_id_but_no_sequence_is_invalid():
    with pytest.raises(InvalidRecordError):
        Leader(ProducerStateManager(None)).append(base_sequence=-1)


def test_batches_without_producer_id_are_not_tracked():
    manager = ProducerStateManager(None)
    plain = header(producer_id=-1, producer_epoch=-1, base_sequence=-1, count=3)
    assert manager.check_append(plain, NOW_MS) is None
    manager.on_batch_appended(plain)
    assert manager.active_producers == {} and manager.map_end_offset == 3


def test_sequence_wraps_from_int32_max_to_zero():
    leader = Leader(ProducerStateManager(None))
    leader.append(base_sequence=MAX_SEQUENCE - 1, count=2)
    assert leader.manager.last_entry(1000).last_seq == MAX_SEQUENCE
    assert leader.append(base_sequence=0, count=1) == (2, 2)
    # A batch that itself wraps: its last sequence is computed modulo 2**31.
    leader2 = Leader(ProducerStateManager(None))
    leader2.append(base_sequence=MAX_SEQUENCE - 1, count=4)
    assert leader2.manager.last_entry(1000).last_seq == 1
    assert leader2.append(base_sequence=MAX_SEQUENCE - 1, count=4) == BatchMetadata(
        MAX_SEQUENCE - 1, 1, 0, 3, NOW_MS
    )
    assert leader2.append(base_sequence=2) == (4, 4)


def test_follower_applies_without_validation():
    manager = ProducerStateManager(None)
    manager.on_batch_appended(header(producer_epoch=5, base_sequence=10, base_offset=0))
    manager.on_batch_appended(header(producer_epoch=4, base_sequence=99, base_offset=1))
    entry = manager.last_entry(1000)
    assert entry.producer_epoch == 4 and entry.last_seq == 99 and len(entry.batches) == 1


def test_transactions_track_first_unstable_offset():
    manager = ProducerStateManager(None)
    manager.on_batch_appended(header(base_offset=10, is_transactional=True))
    manager.on_batch_appended(header(base_offset=11, base_sequence=1, is_transactional=True))
    manager.on_batch_appended(header(producer_id=2, base_offset=12, is_transactional=True))
    assert manager.first_unstable_offset() == 10
    marker = header(base_offset=13, base_sequence=-1, is_transactional=True, is_control=True)
    assert manager.check_append(marker, NOW_MS) is None
    completed = manager.on_batch_appended(
        marker, EndTransactionMarker(ControlRecordType.COMMIT, coordinator_epoch=3)
    )
    assert completed == CompletedTxn(1000, 10, 13, is_aborted=False, last_stable_offset=12)
    assert manager.last_entry(1000).current_txn_first_offset is None
    assert manager.last_entry(1000).coordinator_epoch == 3
    # The completed transaction bounds the first unstable offset until its marker is below
    # the high watermark: before that a consumer could not know whether it was aborted.
    manager.on_high_watermark_updated(13)
    assert manager.first_unstable_offset() == 10
    manager.on_high_watermark_updated(14)
    assert manager.first_unstable_offset() == 12


def test_expired_producers_are_removed_and_forgotten():
    manager = ProducerStateManager(None, producer_id_expiration_ms=1000)
    manager.on_batch_appended(header(producer_id=1, timestamp_ms=0, base_offset=0))
    manager.on_batch_appended(header(producer_id=2, timestamp_ms=500, base_offset=1))
    manager.on_batch_appended(
        header(producer_id=3, timestamp_ms=0, base_offset=2, is_transactional=True)
    )
    # Checks never expire state by themselves (old client timestamps must not defeat dedup).
    with pytest.raises(OutOfOrderSequenceError):
        manager.check_append(header(producer_id=1, base_sequence=9), 10**9)
    assert manager.check_append(header(producer_id=1, base_sequence=0), 10**9) is not None
    assert manager.remove_expired_producers(999) == []
    assert manager.remove_expired_producers(1000) == [1]
    # Once removed, the producer is unknown: any sequence is accepted again.
    assert manager.check_append(header(producer_id=1, base_sequence=9), 1000) is None
    assert manager.remove_expired_producers(1499) == []
    assert manager.remove_expired_producers(1500) == [2]
    assert sorted(manager.active_producers) == [3]  # 3 has an open transaction


def test_snapshot_codec_round_trip_and_layout():
    manager = ProducerStateManager(None)
    manager.on_batch_appended(header(producer_id=5, producer_epoch=2, base_sequence=7, count=3))
    data = encode_snapshot(list(manager.active_producers.values()))
    assert len(data) == 2 + 4 + 4 + 46
    assert data[:2] == b"\x00\x01"  # version 1
    assert data[6:10] == b"\x00\x00\x00\x01"  # one entry
    assert data[10:18] == (5).to_bytes(8, "big")
    (entry,) = decode_snapshot(data)
    assert entry.producer_id == 5 and entry.producer_epoch == 2
    assert list(entry.batches) == [BatchMetadata(7, 9, 0, 2, NOW_MS)]
    assert entry.current_txn_first_offset is None


@pytest.mark.parametrize("cut", [0, 5, 9, 20, 55])
def test_truncated_snapshot_is_corrupt(cut):
    manager = ProducerStateManager(None)
    manager.on_batch_appended(header())
    data = encode_snapshot(list(manager.active_producers.values()))
    with pytest.raises(CorruptSnapshotError) as info:
        decode_snapshot(data[:cut])
    assert isinstance(info.value, KafkaStorageError)


def test_flipped_bit_or_bad_version_is_corrupt():
    manager = ProducerStateManager(None)
    manager.on_batch_appended(header())
    data = bytearray(encode_snapshot(list(manager.active_producers.values())))
    data[-3] ^= 0x10
    with pytest.raises(CorruptSnapshotError, match="CRC mismatch"):
        decode_snapshot(bytes(data))
    data[-3] ^= 0x10
    data[1] = 9
    with pytest.raises(CorruptSnapshotError, match="version 9"):
        decode_snapshot(bytes(data))
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(data[:1]) + b"\x01" + bytes(data[2:]) + b"extra")


def test_snapshot_round_trip_through_files_keeps_last_batch_per_producer(tmp_path):
    leader = Leader(ProducerStateManager(tmp_path))
    for i in range(4):
        leader.append(base_sequence=i)
    leader.append(producer_id=2000, producer_epoch=3, base_sequence=0, count=2)
    path = leader.manager.take_snapshot()
    assert path == snapshot_path(tmp_path, 6) and path.name == "00000000000000000006.snapshot"
    assert leader.manager.take_snapshot() is None  # nothing new since

    reloaded = ProducerStateManager(tmp_path)
    reloaded.load(log_start_offset=0, log_end_offset=6)
    assert reloaded.map_end_offset == 6
    assert sorted(reloaded.active_producers) == [1000, 2000]
    entry = reloaded.last_entry(1000)
    assert list(entry.batches) == [BatchMetadata(3, 3, 3, 3, NOW_MS)]
    follow = Leader(reloaded)
    assert follow.append(base_sequence=3) == BatchMetadata(3, 3, 3, 3, NOW_MS)  # still a dup
    assert follow.append(base_sequence=4) == (6, 6)
    with pytest.raises(InvalidProducerEpochError):
        follow.append(producer_id=2000, producer_epoch=2, base_sequence=0)


def test_load_skips_and_deletes_corrupt_snapshot_for_an_older_one(tmp_path):
    leader = Leader(ProducerStateManager(tmp_path))
    leader.append(base_sequence=0)
    leader.manager.take_snapshot()  # at 1
    leader.append(base_sequence=1)
    leader.manager.take_snapshot()  # at 2
    leader.append(base_sequence=2)
    leader.manager.take_snapshot()  # at 3
    newest = snapshot_path(tmp_path, 3)
    newest.write_bytes(newest.read_bytes()[:-4])

    manager = ProducerStateManager(tmp_path)
    manager.load(log_start_offset=0, log_end_offset=3)
    assert manager.map_end_offset == 2
    assert manager.last_entry(1000).last_seq == 1
    assert manager.snapshot_offsets() == [1, 2]


def test_load_deletes_snapshots_past_log_end_and_defaults_to_log_start(tmp_path):
    leader = Leader(ProducerStateManager(tmp_path))
    leader.append(base_sequence=0, count=5)
    leader.manager.take_snapshot()  # at 5
    manager = ProducerStateManager(tmp_path)
    manager.load(log_start_offset=2, log_end_offset=4)
    assert manager.snapshot_offsets() == []
    assert manager.active_producers == {} and manager.map_end_offset == 2


def test_load_drops_expired_producers(tmp_path):
    manager = ProducerStateManager(tmp_path, producer_id_expiration_ms=1000)
    manager.on_batch_appended(header(producer_id=1, timestamp_ms=0))
    manager.on_batch_appended(header(producer_id=2, timestamp_ms=900, base_offset=1))
    manager.take_snapshot()
    reloaded = ProducerStateManager(tmp_path, producer_id_expiration_ms=1000)
    reloaded.load(0, 2, now_ms=1500)
    assert sorted(reloaded.active_producers) == [2]


def test_truncate_and_reload_after_follower_truncation(tmp_path):
    leader = Leader(ProducerStateManager(tmp_path))
    for i in range(3):
        leader.append(base_sequence=i)
        leader.manager.take_snapshot()  # at 1, 2, 3
    leader.append(base_sequence=3)
    manager = leader.manager
    assert manager.snapshot_offsets() == [1, 2, 3] and manager.map_end_offset == 4

    manager.truncate_and_reload(log_start_offset=0, log_end_offset=2)
    assert manager.snapshot_offsets() == [1, 2]
    assert manager.map_end_offset == 2 and manager.last_entry(1000).last_seq == 1
    again = Leader(manager)
    assert again.append(base_sequence=2) == (2, 2)  # the truncated batch may be re-sent

    # Map end already equal to the log end: nothing reloaded; old snapshots trimmed.
    manager.truncate_and_reload(log_start_offset=1, log_end_offset=3)
    assert manager.snapshot_offsets() == [2] and manager.last_entry(1000).last_seq == 2


def test_truncate_fully_and_delete_before(tmp_path):
    leader = Leader(ProducerStateManager(tmp_path))
    for i in range(3):
        leader.append(base_sequence=i)
        leader.manager.take_snapshot()
    leader.manager.delete_snapshots_before(2)
    assert leader.manager.snapshot_offsets() == [2, 3]
    assert leader.manager.latest_snapshot_offset() == 3
    assert leader.manager.oldest_snapshot_offset() == 2
    leader.manager.truncate_fully_and_start_at(100)
    assert leader.manager.snapshot_offsets() == [] and leader.manager.active_producers == {}
    assert leader.manager.map_end_offset == 100
    assert leader.manager.latest_snapshot_offset() is None


def test_unrelated_files_are_not_snapshots(tmp_path):
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    (tmp_path / "123.snapshot").write_bytes(b"")
    (tmp_path / "00000000000000000009.snapshot.deleted").write_bytes(b"")
    assert ProducerStateManager(tmp_path).snapshot_offsets() == []


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 3), st.integers(0, 2), st.integers(0, 2**31 - 1)),
        min_size=1,
        max_size=20,
    )
)
def test_snapshot_codec_property(rows):
    manager = ProducerStateManager(None)
    offset = 0
    for producer_id, producer_epoch, base_sequence in rows:
        manager.on_batch_appended(
            header(
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=base_sequence,
                count=2,
                base_offset=offset,
            )
        )
        offset += 2
    entries = list(manager.active_producers.values())
    decoded = {e.producer_id: e for e in decode_snapshot(encode_snapshot(entries))}
    for entry in entries:
        got = decoded[entry.producer_id]
        assert got.producer_epoch == entry.producer_epoch
        assert list(got.batches) == [entry.batches[-1]]


def test_random_client_retries_never_append_twice():
    """A producer with up to 5 requests in flight retries at random; the log stays exact."""
    seed = 424242
    rng = random.Random(seed)
    leader = Leader(ProducerStateManager(None))
    sent: list[tuple[int, int]] = []  # (base_sequence, count) of acknowledged batches
    next_seq = 0
    for _ in range(300):
        if sent and rng.random() < 0.4:
            base_sequence, count = rng.choice(sent[-5:])
            result = leader.append(base_sequence=base_sequence, count=count)
            assert isinstance(result, BatchMetadata), f"seed {seed}"
            assert result.first_seq == base_sequence
        else:
            count = rng.randint(1, 4)
            result = leader.append(base_sequence=next_seq, count=count)
            assert result == (leader.log_end_offset - count, leader.log_end_offset - 1)
            sent.append((next_seq, count))
            next_seq += count
    assert leader.log_end_offset == next_seq


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_are_never_an_untyped_error(data):
    try:
        decode_snapshot(data)
    except CorruptSnapshotError:
        pass
