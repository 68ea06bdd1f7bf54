import random

from hypothesis import given, settings
from hypothesis import strategies as st

from log.storage.offset_index import OffsetIndex, parse_entries
from log.storage.time_index import TimeIndex


def _linear_lookup(entries, base_offset, target):
    best = (base_offset, 0)
    for offset, position in entries:
        if offset <= target:
            best = (offset, position)
    return best


@settings(max_examples=100, deadline=None)
@given(
    gaps=st.lists(st.tuples(st.integers(1, 50), st.integers(1, 5000)), max_size=60),
    targets=st.lists(st.integers(0, 4000), max_size=20),
)
def test_offset_index_lookup_agrees_with_linear_scan(tmp_path_factory, gaps, targets):
    path = tmp_path_factory.mktemp("idx") / "00000000000000000100.index"
    index = OffsetIndex(str(path), 100, 10 * 1024)
    index.reset()
    entries = []
    offset, position = 100, 0
    for offset_gap, position_gap in gaps:
        offset += offset_gap
        position += position_gap
        index.append(offset, position)
        entries.append((offset, position))
    for target in targets:
        assert index.lookup(100 + target) == _linear_lookup(entries, 100, 100 + target)
    # The file holds exactly the entries, and reloads to the same arrays.
    index.close()
    again = OffsetIndex(str(path), 100, 10 * 1024)
    again.load()
    assert list(again.relative_offsets) == [o - 100 for o, _ in entries]
    assert list(again.positions) == [p for _, p in entries]


def test_offset_index_truncate_and_full(tmp_path):
    index = OffsetIndex(str(tmp_path / "0.index"), 0, 8 * 4)
    index.reset()
    for i in range(4):
        index.append(10 * (i + 1), 100 * (i + 1))
    assert index.is_full
    index.truncate_to(25)
    assert [index.base_offset + r for r in index.relative_offsets] == [10, 20]
    assert (tmp_path / "0.index").stat().st_size == 16
    index.truncate_to(0)
    assert index.entry_count == 0


def test_torn_or_disordered_index_is_rejected(tmp_path):
    import pytest

    from log.storage.offset_index import CorruptIndexError

    path = tmp_path / "0.index"
    path.write_bytes(b"\x00" * 12)
    with pytest.raises(CorruptIndexError):
        OffsetIndex(str(path), 0, 1024).load()
    path.write_bytes(bytes.fromhex("00000005 00000010 00000003 00000020".replace(" ", "")))
    with pytest.raises(CorruptIndexError):
        OffsetIndex(str(path), 0, 1024).load()
    with pytest.raises(CorruptIndexError):
        OffsetIndex(str(tmp_path / "missing.index"), 0, 1024).load()
    assert parse_entries(b"")[0].tolist() == []


def test_time_index_lookup_before_is_strict(tmp_path):
    rng = random.Random(7)
    index = TimeIndex(str(tmp_path / "0.timeindex"), 0, 1200)
    index.reset()
    timestamp, offset = 0, 0
    entries = []
    for _ in range(50):
        timestamp += rng.randint(0, 3)
        offset += rng.randint(0, 4)
        if index.maybe_append(timestamp, offset):
            entries.append((timestamp, offset))
    assert [t for t, _ in entries] == sorted({t for t, _ in entries})
    for target in range(0, timestamp + 2):
        below = [e for e in entries if e[0] < target]
        assert index.lookup_before(target) == (below[-1] if below else None)
    index.close()
    again = TimeIndex(str(tmp_path / "0.timeindex"), 0, 1200)
    again.load()
    assert again.last_entry == index.last_entry
    again.truncate_to(entries[len(entries) // 2][1])
    assert all(o < entries[len(entries) // 2][1] for o in again.relative_offsets)
