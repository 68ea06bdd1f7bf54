"""LeaderEpochFileCache: Kafka's assign/end_offset_for/truncate rules and the checkpoint file."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from log.common.errors import KafkaStorageError
from log.storage.leader_epoch_cache import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    EpochEntry,
    LeaderEpochFileCache,
)


def cache_with(*pairs: tuple[int, int]) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(None)
    for leader_epoch, start_offset in pairs:
        cache.assign(leader_epoch, start_offset)
    return cache


def pairs(cache: LeaderEpochFileCache) -> list[tuple[int, int]]:
    return [(e.leader_epoch, e.start_offset) for e in cache.entries]


def test_empty_cache():
    cache = LeaderEpochFileCache(None)
    assert cache.latest_epoch is None and cache.entries == [] and cache.is_empty()
    assert cache.epoch_for_offset(0) is None
    assert cache.end_offset_for(0, 100) == (-1, -1)


def test_assign_appends_new_epochs_and_ignores_same_epoch_later_offset():
    cache = cache_with((0, 0), (0, 5), (1, 10), (1, 12))
    assert pairs(cache) == [(0, 0), (1, 10)]
    assert cache.latest_epoch == 1


def test_same_epoch_with_lower_start_offset_replaces():
    assert pairs(cache_with((0, 0), (1, 10), (1, 7))) == [(0, 0), (1, 7)]


def test_new_epoch_with_lower_start_offset_removes_conflicting_entries():
    assert pairs(cache_with((0, 0), (1, 10), (2, 20), (3, 15))) == [(0, 0), (1, 10), (3, 15)]
    assert pairs(cache_with((0, 0), (1, 10), (2, 20), (3, 10))) == [(0, 0), (3, 10)]


def test_lower_epoch_truncates_newer_entries_like_kafka():
    assert pairs(cache_with((0, 0), (2, 10), (4, 20), (3, 25))) == [(0, 0), (2, 10), (3, 25)]


def test_negative_values_rejected():
    with pytest.raises(ValueError):
        cache_with((-1, 0))
    with pytest.raises(ValueError):
        cache_with((0, -1))


def test_epoch_for_offset():
    cache = cache_with((1, 5), (3, 10), (4, 20))
    assert [cache.epoch_for_offset(o) for o in (0, 4, 5, 9, 10, 19, 20, 999)] == [
        None, None, 1, 1, 3, 3, 4, 4,
    ]  # fmt: skip


def test_end_offset_for_every_case():
    cache = cache_with((1, 5), (3, 10), (6, 20))
    assert cache.end_offset_for(6, 42) == (6, 42)  # latest: log end offset
    assert cache.end_offset_for(3, 42) == (3, 20)  # known: next epoch's start
    assert cache.end_offset_for(1, 42) == (1, 10)
    assert cache.end_offset_for(4, 42) == (3, 20)  # unknown in between: floor epoch
    assert cache.end_offset_for(5, 42) == (3, 20)
    assert cache.end_offset_for(2, 42) == (1, 10)
    assert cache.end_offset_for(0, 42) == (0, 5)  # below earliest: requested, first start
    assert cache.end_offset_for(7, 42) == (-1, -1)  # above latest: undefined
    assert cache.end_offset_for(-1, 42) == (-1, -1)  # undefined request


def test_previous_and_next_epoch():
    cache = cache_with((1, 5), (3, 10), (6, 20))
    assert cache.previous_epoch(3) == 1 and cache.previous_epoch(1) is None
    assert cache.previous_epoch(5) == 3
    assert cache.next_epoch(3) == 6 and cache.next_epoch(6) is None and cache.next_epoch(0) == 1


def test_truncate_from_end():
    cache = cache_with((1, 5), (3, 10), (6, 20))
    cache.truncate_from_end(21)
    assert pairs(cache) == [(1, 5), (3, 10), (6, 20)]
    cache.truncate_from_end(20)
    assert pairs(cache) == [(1, 5), (3, 10)]
    cache.truncate_from_end(6)
    assert pairs(cache) == [(1, 5)]
    cache.truncate_from_end(-1)  # undefined offset: no-op
    assert pairs(cache) == [(1, 5)]
    cache.truncate_from_end(0)
    assert pairs(cache) == []


def test_truncate_from_start():
    cache = cache_with((1, 5), (3, 10), (6, 20))
    cache.truncate_from_start(4)
    assert pairs(cache) == [(1, 5), (3, 10), (6, 20)]
    cache.truncate_from_start(12)
    assert pairs(cache) == [(3, 12), (6, 20)]
    cache.truncate_from_start(20)  # exclusive: the entry at 20 is kept
    assert pairs(cache) == [(6, 20)]
    cache.truncate_from_start(25)
    assert pairs(cache) == [(6, 25)]


def test_persisted_on_every_change_and_reloaded(tmp_path):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILE
    cache = LeaderEpochFileCache(path)
    assert not path.exists()  # nothing written until something changes
    cache.assign(0, 0)
    cache.assign(2, 7)
    assert path.read_text() == "0\n2\n0 0\n2 7\n"
    cache.truncate_from_end(7)
    assert LeaderEpochFileCache(path).entries == [EpochEntry(0, 0)]
    cache.clear()
    assert path.read_text() == "0\n0\n"
    assert LeaderEpochFileCache(path).entries == []


def test_malformed_checkpoint_raises(tmp_path):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILE
    path.write_text("0\n1\n3\n")
    with pytest.raises(KafkaStorageError, match=r"leader-epoch-checkpoint:3"):
        LeaderEpochFileCache(path)
    path.write_text("0\n1\n-3 4\n")
    with pytest.raises(KafkaStorageError, match="negative"):
        LeaderEpochFileCache(path)


def test_non_monotonic_file_is_repaired_on_load(tmp_path):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILE
    path.write_text("0\n3\n0 0\n2 10\n1 12\n")
    assert pairs(LeaderEpochFileCache(path)) == [(0, 0), (1, 12)]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 200)), max_size=40))
def test_entries_stay_strictly_increasing_and_latest_assignment_wins(assignments):
    cache = LeaderEpochFileCache(None)
    for leader_epoch, start_offset in assignments:
        before = cache.latest_entry
        cache.assign(leader_epoch, start_offset)
        entries = cache.entries
        assert all(
            a.leader_epoch < b.leader_epoch for a, b in zip(entries, entries[1:], strict=False)
        )
        assert all(
            a.start_offset < b.start_offset for a, b in zip(entries, entries[1:], strict=False)
        )
        if before is not None and before.leader_epoch == leader_epoch:
            assert cache.latest_entry == EpochEntry(
                leader_epoch, min(before.start_offset, start_offset)
            )
        else:
            assert cache.latest_entry == EpochEntry(leader_epoch, start_offset)


def test_end_offset_for_matches_a_reference_model():
    rng = random.Random(20261121)
    for _ in range(200):
        epochs = sorted(rng.sample(range(0, 30), rng.randint(1, 8)))
        starts = sorted(rng.sample(range(0, 500), len(epochs)))
        cache = cache_with(*zip(epochs, starts, strict=True))
        log_end_offset = starts[-1] + rng.randint(0, 50)
        requested = rng.randint(-1, 32)
        got = cache.end_offset_for(requested, log_end_offset)
        if requested == -1 or requested > epochs[-1]:
            want = (-1, -1)
        elif requested == epochs[-1]:
            want = (requested, log_end_offset)
        elif requested < epochs[0]:
            want = (requested, starts[0])
        else:
            floor = max(e for e in epochs if e <= requested)
            higher = min(i for i, e in enumerate(epochs) if e > requested)
            want = (floor, starts[higher])
        assert got == want, (epochs, starts, requested)
