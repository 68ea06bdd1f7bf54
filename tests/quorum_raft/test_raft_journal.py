"""RaftJournal, RaftState and the checkpoint codec, on real files (no cluster)."""

from __future__ import annotations

import random

import pytest

from quorum.raft_checkpoint import (
    CorruptCheckpointFileError,
    RaftCheckpoint,
    decode_checkpoint,
    encode_checkpoint,
)
from quorum.raft_journal import JOURNAL_MAGIC, RaftJournal, RaftState, RaftStorageError


def open_journal(tmp_path, calls=None, retain_from=None):
    def durable():
        if calls is not None:
            calls.append("checkpoint durable")

    return RaftJournal(
        str(tmp_path / "raft.journal"),
        str(tmp_path / "raft.state"),
        make_checkpoint_durable=durable,
        retain_from_index=lambda: retain_from,
    )


def fill(journal, first, last, term=1):
    for i in range(first, last + 1):
        journal.add(b"cmd%d" % i, i, term)
    journal.sync()


def test_reload_returns_the_synced_entries(tmp_path):
    j = open_journal(tmp_path)
    fill(j, 1, 10)
    j._destroy()
    j = open_journal(tmp_path)
    assert [e[1] for e in j] == list(range(1, 11))
    assert j[3] == (b"cmd4", 4, 1) and j[-1][1] == 10 and len(j[2:5]) == 3


def test_torn_tail_is_cut(tmp_path):
    j = open_journal(tmp_path)
    fill(j, 1, 5)
    j._destroy()
    path = tmp_path / "raft.journal"
    data = path.read_bytes()
    path.write_bytes(data[:-3])  # the last record lost its end
    j = open_journal(tmp_path)
    assert [e[1] for e in j] == [1, 2, 3, 4]
    fill(j, 5, 6)  # appends continue right after the cut
    j._destroy()
    assert [e[1] for e in open_journal(tmp_path)] == [1, 2, 3, 4, 5, 6]


def test_unsynced_appends_are_lost_in_lose_unsynced_mode(tmp_path, monkeypatch):
    monkeypatch.setenv("QUORUM_RAFT_LOSE_UNSYNCED", "1")
    j = open_journal(tmp_path)
    fill(j, 1, 3)
    j.add(b"unsynced", 4, 1)  # no sync: a crash now loses it
    # "crash": drop the object without closing (the fd is reclaimed by the test process)
    j2 = open_journal(tmp_path)
    assert [e[1] for e in j2] == [1, 2, 3]


def test_delete_entries_from_and_to(tmp_path):
    calls = []
    j = open_journal(tmp_path, calls=calls)
    fill(j, 1, 10)
    j.deleteEntriesFrom(7)  # keep the first 7 (indexes 1..7)
    assert j[-1][1] == 7
    j.add(b"new8", 8, 2)
    j.deleteEntriesTo(3)  # compaction: drop the first 3 (indexes 1..3)
    assert calls == ["checkpoint durable"]
    assert [e[1] for e in j] == [4, 5, 6, 7, 8]
    j._destroy()
    j = open_journal(tmp_path)
    assert [e[1] for e in j] == [4, 5, 6, 7, 8] and j[-1] == (b"new8", 8, 2)


def test_load_trims_to_the_checkpoint(tmp_path):
    j = open_journal(tmp_path)
    fill(j, 1, 20)
    j._destroy()
    j = open_journal(tmp_path)
    j.start_at(12, 12)  # a checkpoint at 13, prev entry 12
    assert [e[1] for e in j] == list(range(12, 21))
    j._destroy()
    assert [e[1] for e in open_journal(tmp_path)] == list(range(12, 21))


def test_index_gap_is_refused(tmp_path):
    j = open_journal(tmp_path)
    fill(j, 1, 3)
    j._destroy()
    from quorum.raft_journal import encode_record

    with open(tmp_path / "raft.journal", "ab") as f:
        f.write(encode_record(b"x", 9, 1))
    with pytest.raises(RaftStorageError):
        open_journal(tmp_path)


def test_foreign_journal_is_refused(tmp_path):
    (tmp_path / "raft.journal").write_bytes(b"PYSYNCOBJ" + bytes(40))
    with pytest.raises(RaftStorageError):
        open_journal(tmp_path)
    assert len(JOURNAL_MAGIC) == 8


def test_state_roundtrip_and_corruption(tmp_path):
    path = str(tmp_path / "raft.state")
    state = RaftState(path)
    assert (state.current_term, state.voted_for, state.commit_index) == (0, None, 1)
    state.current_term, state.voted_for, state.commit_index = 7, "127.0.0.1:9000", 42
    state.store()
    again = RaftState(path)
    assert (again.current_term, again.voted_for, again.commit_index) == (7, "127.0.0.1:9000", 42)
    data = bytearray(open(path, "rb").read())
    data[-1] ^= 1
    open(path, "wb").write(bytes(data))
    with pytest.raises(RaftStorageError):
        RaftState(path)


def test_checkpoint_roundtrip_and_every_flipped_byte_is_caught():
    checkpoint = RaftCheckpoint(
        last_index=11,
        last_term=3,
        prev_index=10,
        prev_term=2,
        last_command=b"\x00last",
        prev_command=b"\x01prev",
        state=b"state machine bytes",
    )
    data = encode_checkpoint(checkpoint)
    assert decode_checkpoint(data) == checkpoint
    rng = random.Random(1234)
    for position in range(len(data)):
        damaged = bytearray(data)
        damaged[position] ^= rng.randrange(1, 256)
        with pytest.raises(CorruptCheckpointFileError):
            decode_checkpoint(bytes(damaged))
    for cut in (0, 10, len(data) - 1):
        with pytest.raises(CorruptCheckpointFileError):
            decode_checkpoint(data[:cut])


def test_identical_resent_entries_cost_no_io_and_a_real_conflict_is_cut(tmp_path):
    j = open_journal(tmp_path)
    fill(j, 1, 10)
    size = (tmp_path / "raft.journal").stat().st_size
    j.deleteEntriesFrom(5)  # the leader re-sends 6..10 (identical)
    assert j[-1][1] == 5
    for i in range(6, 11):
        j.add(b"cmd%d" % i, i, 1)
    assert not j.dirty  # all five taken back, nothing written
    assert (tmp_path / "raft.journal").stat().st_size == size
    j.deleteEntriesFrom(8)  # now a new leader's entry conflicts at 9
    j.add(b"other", 9, 2)  # a different entry at 9: the cut becomes real
    j.sync()
    j._destroy()
    j = open_journal(tmp_path)
    assert [e[1] for e in j] == list(range(1, 10)) and j[-1] == (b"other", 9, 2)


def test_a_cut_not_followed_by_adds_is_real_after_sync(tmp_path):
    j = open_journal(tmp_path)
    fill(j, 1, 10)
    j.deleteEntriesFrom(7)
    assert j.dirty
    j.sync()
    j._destroy()
    assert [e[1] for e in open_journal(tmp_path)] == list(range(1, 8))


def test_start_at_keeps_older_entries_in_the_file_only(tmp_path):
    j = open_journal(tmp_path, retain_from=6)
    fill(j, 1, 20)
    j._destroy()
    j = open_journal(tmp_path, retain_from=6)
    assert j.entry(3) == (b"cmd3", 3, 1) and j.entry(21) is None
    j.start_at(12, 4)  # pysyncobj's view from 12; the file keeps 4.. for an older checkpoint
    assert [e[1] for e in j] == list(range(12, 21)) and j.entry(11) is None
    j.deleteEntriesTo(3)  # a new checkpoint: the view starts at 15, the file keeps 6..
    assert [e[1] for e in j] == list(range(15, 21))
    fill(j, 21, 22)
    j._destroy()
    j = open_journal(tmp_path)
    assert [e[1] for e in j] == list(range(6, 23))  # the file: from the oldest kept checkpoint


def test_start_at_past_the_journal_empties_it(tmp_path):
    j = open_journal(tmp_path)
    fill(j, 1, 5)
    j._destroy()
    j = open_journal(tmp_path)
    j.start_at(9, 3)  # a snapshot installed at 10 (prev 9) before the crash
    assert len(j) == 0
    j.add(b"noop", 1, 1)  # what pysyncobj does to an empty journal: no index jump on disk
    j._destroy()
    assert [e[1] for e in open_journal(tmp_path)] == [1]
