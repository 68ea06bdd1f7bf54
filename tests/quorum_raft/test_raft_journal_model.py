"""RaftJournal against a plain list model: random adds, cuts, compactions (keeping a random number
of the compacted entries in the file, as for older kept checkpoints), syncs, clean reopens and
crashes (QUORUM_RAFT_LOSE_UNSYNCED=1, so a crash loses everything not synced)."""

from __future__ import annotations

import os
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from quorum.raft_journal import RaftJournal

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 2), st.integers(0, 3)),
        st.tuples(st.just("cut"), st.integers(0, 12)),
        st.tuples(st.just("compact"), st.integers(0, 12), st.integers(0, 6)),
        st.tuples(st.just("sync")),
        st.tuples(st.just("reopen")),
        st.tuples(st.just("crash")),
    ),
    max_size=40,
)


def common_prefix(a: list, b: list) -> list:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_journal_matches_model_and_keeps_what_was_synced(ops):
    os.environ["QUORUM_RAFT_LOSE_UNSYNCED"] = "1"
    try:
        with tempfile.TemporaryDirectory() as d:
            run(ops, d)
    finally:
        del os.environ["QUORUM_RAFT_LOSE_UNSYNCED"]


def run(ops, d: str) -> None:
    retain = {"from": None}

    def open_journal() -> RaftJournal:
        return RaftJournal(
            f"{d}/j",
            f"{d}/s",
            make_checkpoint_durable=lambda: None,
            retain_from_index=lambda: retain["from"],
        )

    def reopen() -> RaftJournal:
        journal = open_journal()
        loaded = list(journal)
        assert loaded[: len(retained)] == retained, (loaded, retained)
        view_first = retained[-1][1] + 1 if retained else None
        journal.start_at(view_first, retained[0][1] if retained else None)
        return journal

    journal = open_journal()
    model: list[tuple[bytes, int, int]] = []  # pysyncobj's view
    retained: list[tuple[bytes, int, int]] = []  # in the file only, before the view
    synced: list[tuple[bytes, int, int]] = []  # what is certainly on disk (of the view)
    next_index = 1
    for op in ops:
        if op[0] == "add":
            _, term_bump, command = op
            term = (model[-1][2] if model else 1) + term_bump
            entry = (b"c%d" % command, next_index, term)
            journal.add(*entry)
            model.append(entry)
        elif op[0] == "cut" and model:
            k = min(op[1], len(model) - 1)
            if retained:  # pysyncobj never cuts its checkpoint's own entries
                k = max(k, 1)
            journal.deleteEntriesFrom(k)
            del model[k:]
        elif op[0] == "compact" and model:
            k = min(op[1], len(model) - 1)
            keep = (retained + model[:k])[-op[2] :] if op[2] else []
            retain["from"] = keep[0][1] if keep else model[k][1]
            journal.deleteEntriesTo(k)  # syncs, then rewrites crash-atomically
            retained = [e for e in retained + model[:k] if e[1] >= retain["from"]]
            assert retained == keep
            del model[:k]
            synced = list(model)
        elif op[0] == "sync":
            journal.sync()
            synced = list(model)
        elif op[0] == "reopen":
            journal._destroy()
            journal = reopen()
            synced = list(model)
        elif op[0] == "crash":
            os.close(journal._file._fd)  # dropped without flushing: the unsynced bytes are lost
            journal = reopen()
            loaded = list(journal)
            kept = common_prefix(synced, model)
            assert loaded[: len(kept)] == kept, (loaded, kept)
            assert all(b[1] == a[1] + 1 for a, b in zip(loaded, loaded[1:], strict=False))
            model = loaded
            synced = list(loaded)
        assert list(journal) == model
        if model or retained:  # a cut of the whole view continues after the retained entries
            next_index = (model or retained)[-1][1] + 1
    journal._destroy()
    assert list(reopen()) == model
