"""The Raft log and Raft state files of one controller, replacing pysyncobj's FileJournal.

pysyncobj 0.3.17's FileJournal never syncs its mmap, stores term/vote/commit index in a pickle
renamed into place without fsync, and rewrites itself in place (not crash-atomically) after a
compaction. `RaftJournal` implements the same `pysyncobj.journal.Journal` interface with:

* an append-only file of CRC-checked records; appends become durable at `sync()`, which the
  binding calls before any Raft message leaves the node and before any entry is applied (so no
  ack, vote, AppendEntries or client reply ever reflects an unsynced entry: group commit);
* term, vote and commit index in a CRC-checked state file replaced with fsync + rename + dir
  fsync, synchronously on every term/vote change (Raft requires it before the vote is sent);
* compaction (`deleteEntriesTo`) as a whole-file rewrite through a synced temporary file and a
  rename, only after the checkpoint that covers the dropped entries has been made durable;
* a retained prefix: pysyncobj sees the log from the loaded (newest) checkpoint's `(prev,
  last)` entries on, exactly what its loader expects (so it never throws the journal away: the
  "crash between snapshot rename and journal rewrite" loss), but the FILE keeps every entry from
  the oldest kept checkpoint on (`retain_from_index`). The entries before pysyncobj's view live
  only in the file (their positions are remembered); at start-up the binding picks the checkpoint
  (`start_at`), and a damaged newest one is replaced by an older one plus these entries.

Journal file layout (little endian):

    file header   8 bytes  magic b"QLRJRNL1"
    record        4 bytes  body_bytes: size of everything after the crc field
                  4 bytes  crc32c over index, term and command
                  8 bytes  index (Raft log index)
                  8 bytes  term (Raft term)
                  n bytes  command (pysyncobj's encoded command; opaque here)

A record that is cut short or fails its CRC ends the log: it is a torn tail left by a crash
before `sync()`, which by construction was never acknowledged to anyone, so it is cut off.

State file layout: magic b"QLRSTAT1" (8) | crc32c (4) over the rest | current_term (8) |
commit_index (8) | voted_for_bytes (2) | voted_for (utf-8, pysyncobj node id "host:port").
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable

import crc32c
from pysyncobj.journal import Journal

from log.common.errors import KafkaStorageError
from quorum.raft_files import AppendOnlyFile, crash_point, write_file_durably

logger = logging.getLogger(__name__)

JOURNAL_MAGIC = b"QLRJRNL1"
STATE_MAGIC = b"QLRSTAT1"
_RECORD_HEAD = struct.Struct("<II")  # body_bytes, crc32c
_RECORD_KEYS = struct.Struct("<QQ")  # index, term
_STATE_HEAD = struct.Struct("<8sI")  # magic, crc32c
_STATE_BODY = struct.Struct("<QQH")  # current_term, commit_index, voted_for_bytes
MAX_COMMAND_BYTES = 64 * 1024 * 1024  # far above any metadata batch; a larger length is garbage
MAX_NODE_ID_BYTES = 1024


class RaftStorageError(KafkaStorageError):
    """The controller's Raft files are damaged beyond a torn tail: refuse to start."""


Entry = tuple[bytes, int, int]  # (command, index, term), pysyncobj's entry shape


def encode_record(command: bytes, index: int, term: int) -> bytes:
    keys = _RECORD_KEYS.pack(index, term)
    crc = crc32c.crc32c(command, crc32c.crc32c(keys))
    return _RECORD_HEAD.pack(len(keys) + len(command), crc) + keys + command


def decode_records(data: bytes, start_position: int) -> tuple[list[Entry], list[int], int]:
    """Entries, their positions, and the position where the valid log ends (torn tail cut)."""
    entries: list[Entry] = []
    positions: list[int] = []
    position = start_position
    view = memoryview(data)
    while position + _RECORD_HEAD.size <= len(data):
        body_bytes, crc = _RECORD_HEAD.unpack_from(view, position)
        body_start = position + _RECORD_HEAD.size
        if body_bytes < _RECORD_KEYS.size or body_bytes > MAX_COMMAND_BYTES:
            break
        if body_start + body_bytes > len(data):
            break
        body = view[body_start : body_start + body_bytes]
        if crc32c.crc32c(body) != crc:
            break
        index, term = _RECORD_KEYS.unpack_from(body, 0)
        if entries and index != entries[-1][1] + 1:
            raise RaftStorageError(f"journal index jumps from {entries[-1][1]} to {index}")
        entries.append((bytes(body[_RECORD_KEYS.size :]), index, term))
        positions.append(position)
        position = body_start + body_bytes
    return entries, positions, position


class RaftState:
    """current_term, voted_for and commit_index, durable in one small file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.current_term = 0
        self.voted_for: str | None = None
        self.commit_index = 1  # pysyncobj's initial value: index 1 is its first no-op
        if os.path.exists(path):
            self._load()

    def _load(self) -> None:
        with open(self.path, "rb") as f:
            data = f.read()
        if len(data) < _STATE_HEAD.size + _STATE_BODY.size:
            raise RaftStorageError(f"{self.path}: state file too short ({len(data)} bytes)")
        magic, crc = _STATE_HEAD.unpack_from(data, 0)
        body = data[_STATE_HEAD.size :]
        if magic != STATE_MAGIC or crc32c.crc32c(body) != crc:
            raise RaftStorageError(f"{self.path}: bad magic or CRC in Raft state file")
        term, commit_index, voted_for_bytes = _STATE_BODY.unpack_from(body, 0)
        voted_for = body[_STATE_BODY.size : _STATE_BODY.size + voted_for_bytes]
        self.current_term = term
        self.commit_index = max(1, commit_index)
        self.voted_for = voted_for.decode() if voted_for_bytes else None

    def store(self) -> None:
        voted_for = (self.voted_for or "").encode()
        assert len(voted_for) <= MAX_NODE_ID_BYTES
        body = _STATE_BODY.pack(self.current_term, self.commit_index, len(voted_for)) + voted_for
        write_file_durably(self.path, _STATE_HEAD.pack(STATE_MAGIC, crc32c.crc32c(body)) + body)


class RaftJournal(Journal):
    """pysyncobj's Journal interface over our durable files (see module docstring)."""

    def __init__(
        self,
        journal_path: str,
        state_path: str,
        *,
        make_checkpoint_durable: Callable[[], None],
        retain_from_index: Callable[[], int | None] = lambda: None,
        last_applied_index: Callable[[], int] = lambda: 0,
    ) -> None:
        """Loads every entry of the file into pysyncobj's view; `start_at` narrows it.
        `make_checkpoint_durable`: called before entries covered by a checkpoint are dropped.
        `retain_from_index`: at compaction, the first index the file must still hold (the
        oldest kept checkpoint's prev entry; None: only pysyncobj's view is kept).
        `last_applied_index`: for the alarm when applied entries really are replaced."""
        self._path = journal_path
        self._make_checkpoint_durable = make_checkpoint_durable
        self._retain_from_index = retain_from_index
        self._last_applied_index = last_applied_index
        # Entries before pysyncobj's view that the file keeps for an older checkpoint: the
        # index of the first and the file position of each (contiguous indexes).
        self._retained_first_index = 0
        self._retained_positions: list[int] = []
        # Entries cut by deleteEntriesFrom but still in the file, with their positions. In
        # no-batch mode a pysyncobj leader re-sends entries a follower already has (its
        # nextIndex falls back when an older ack arrives); the follower cuts its log and adds
        # the same entries again. Identical re-adds take their ghost back without I/O; anything
        # else (or any sync) makes the cut real first, so the file matches memory whenever a
        # message leaves the node.
        self._ghosts: list[tuple[Entry, int]] = []
        self._state = RaftState(state_path)
        self._state_dirty = False
        self._entries: list[Entry] = []
        self._positions: list[int] = []
        self._remove_stale_tmp()
        self._load()

    # -- loading ---------------------------------------------------------------------------

    def _remove_stale_tmp(self) -> None:
        if os.path.exists(self._path + ".tmp"):
            os.unlink(self._path + ".tmp")  # an interrupted rewrite; the old journal is intact

    def _load(self) -> None:
        data = b""
        if os.path.exists(self._path):
            with open(self._path, "rb") as f:
                data = f.read()
        if len(data) < len(JOURNAL_MAGIC):
            self._rewrite([])  # new (or torn at creation): nothing in it was ever synced
            return
        if data[: len(JOURNAL_MAGIC)] != JOURNAL_MAGIC:
            raise RaftStorageError(f"{self._path}: not a quorumlog Raft journal")
        entries, positions, end = decode_records(data, len(JOURNAL_MAGIC))
        if end != len(data):
            logger.warning(
                "%s: cutting a torn tail of %d bytes after index %s",
                self._path,
                len(data) - end,
                entries[-1][1] if entries else None,
            )
        self._file = AppendOnlyFile(self._path)
        if end != len(data):
            self._file.truncate(end)
            self._file.sync()
        self._entries = entries
        self._positions = positions

    def entry(self, index: int) -> Entry | None:
        """The entry at Raft `index` in pysyncobj's view, if there."""
        if not self._entries or not self._entries[0][1] <= index <= self._entries[-1][1]:
            return None
        return self._entries[index - self._entries[0][1]]

    def start_at(self, first_index: int | None, retain_from_index: int | None) -> None:
        """Before pysyncobj sees the journal: its view starts at `first_index` (the loaded
        checkpoint's prev entry; None: everything), the file keeps entries from
        `retain_from_index` on (the oldest kept checkpoint's prev entry) and drops older ones."""
        assert not self._ghosts and not self._retained_positions
        if first_index is None or not self._entries or first_index <= self._entries[0][1]:
            return
        if first_index > self._entries[-1][1]:
            # The checkpoint is past the whole journal: pysyncobj restarts the log at it (and
            # would first add its index-1 no-op to an empty view, after these entries).
            self._rewrite([])
            return
        cut = first_index - self._entries[0][1]
        self._retained_first_index = self._entries[0][1]
        self._retained_positions = self._positions[:cut]
        del self._entries[:cut]
        del self._positions[:cut]
        self._drop_before(retain_from_index if retain_from_index is not None else first_index)

    def _drop_before(self, index: int) -> None:
        """Rewrite the file without the retained entries before `index`, crash-atomically."""
        drop = min(index - self._retained_first_index, len(self._retained_positions))
        if drop <= 0:
            return
        self.sync()
        position = (
            self._retained_positions[drop]
            if drop < len(self._retained_positions)
            else self._positions[0]
            if self._positions
            else self._file.size_bytes
        )
        kept = self._file.read_from(position)
        self._file.close()
        write_file_durably(self._path, JOURNAL_MAGIC + kept)
        self._file = AppendOnlyFile(self._path)
        shift = position - len(JOURNAL_MAGIC)
        self._retained_first_index += drop
        self._retained_positions = [p - shift for p in self._retained_positions[drop:]]
        self._positions = [p - shift for p in self._positions]

    def _rewrite(self, entries: list[Entry]) -> None:
        """Replace the journal file with `entries`, crash-atomically."""
        if getattr(self, "_file", None) is not None:
            self._file.close()
        chunks = [JOURNAL_MAGIC]
        positions = []
        position = len(JOURNAL_MAGIC)
        for command, index, term in entries:
            record = encode_record(command, index, term)
            positions.append(position)
            chunks.append(record)
            position += len(record)
        write_file_durably(self._path, b"".join(chunks))
        self._file = AppendOnlyFile(self._path)
        self._entries = list(entries)
        self._positions = positions

    # -- durability ------------------------------------------------------------------------

    def sync(self) -> None:
        """Make every appended entry durable (one fdatasync for all of them)."""
        self._materialize_cut()
        self._file.sync()

    @property
    def dirty(self) -> bool:
        return self._file.dirty or bool(self._ghosts)

    def _materialize_cut(self) -> None:
        if not self._ghosts:
            return
        first_index = self._ghosts[0][0][1]
        if first_index <= self._last_applied_index():
            logger.critical(
                "%s: replacing already-applied entries from index %d: this controller's state "
                "may have diverged from the quorum",
                self._path,
                first_index,
            )
        self._file.truncate(self._ghosts[0][1])
        self._ghosts = []

    # -- pysyncobj's Journal interface -----------------------------------------------------

    def add(self, command: bytes, idx: int, term: int) -> None:
        if self._entries:
            assert idx == self._entries[-1][1] + 1, (idx, self._entries[-1][1])
        command = bytes(command)
        if self._ghosts:
            ghost, position = self._ghosts[0]
            if ghost == (command, idx, term):
                del self._ghosts[0]
                self._entries.append(ghost)
                self._positions.append(position)
                return
            self._materialize_cut()
        self._positions.append(self._file.size_bytes)
        self._file.append(encode_record(command, idx, term))
        self._entries.append((command, idx, term))

    def clear(self) -> None:
        # pysyncobj clears the journal only right after loading a checkpoint (its own or one
        # installed from the leader); that checkpoint must be durable before the log goes.
        self._make_checkpoint_durable()
        self._ghosts = []
        self._file.truncate(len(JOURNAL_MAGIC))
        self._entries = []
        self._positions = []
        self._retained_positions = []

    def deleteEntriesFrom(self, entryFrom: int) -> None:  # noqa: N802 (pysyncobj's name)
        if entryFrom >= len(self._entries):
            return
        cut = list(zip(self._entries[entryFrom:], self._positions[entryFrom:], strict=True))
        self._ghosts = cut + self._ghosts  # they sit in the file before the older ghosts
        del self._entries[entryFrom:]
        del self._positions[entryFrom:]

    def deleteEntriesTo(self, entryTo: int) -> None:  # noqa: N802 (pysyncobj's name)
        # Called after a checkpoint covering these entries was renamed into place.
        # The entries leave pysyncobj's view; the file keeps those an older kept checkpoint
        # still needs (retain_from_index) and drops the rest.
        crash_point("after_checkpoint_rename")
        self._make_checkpoint_durable()
        self.sync()
        entryTo = min(entryTo, len(self._entries))  # noqa: N806
        if entryTo > 0:
            if not self._retained_positions:
                self._retained_first_index = self._entries[0][1]
            self._retained_positions.extend(self._positions[:entryTo])
            del self._entries[:entryTo]
            del self._positions[:entryTo]
        retain_from = self._retain_from_index()
        first_view_index = self._retained_first_index + len(self._retained_positions)
        self._drop_before(first_view_index if retain_from is None else retain_from)
        crash_point("after_journal_rewrite")

    def __getitem__(self, item):  # int or slice, like the list pysyncobj expects
        return self._entries[item]

    def __len__(self) -> int:
        return len(self._entries)

    def close(self) -> None:
        """Write out what is cut or dirty and release the file (the binding calls this when it
        gives up starting; pysyncobj calls `_destroy` when it stops)."""
        self._materialize_cut()
        self._file.close()
        if self._state_dirty:
            self.sync()  # never persist a commit index past the durable log
            self._state.store()
            self._state_dirty = False

    def _destroy(self) -> None:  # pysyncobj's Journal interface
        self.close()

    def setRaftCommitIndex(self, raftCommitIndex: int) -> None:  # noqa: N802, N803
        if raftCommitIndex != self._state.commit_index:
            self._state.commit_index = raftCommitIndex
            self._state_dirty = True

    def getRaftCommitIndex(self) -> int:  # noqa: N802
        return self._state.commit_index

    def setCurrentTerm(self, term: int, votedForNodeId: str | None) -> None:  # noqa: N802, N803
        self._state.current_term = term
        self._state.voted_for = votedForNodeId
        self._state.store()  # synchronous: the vote/request-vote is sent right after
        self._state_dirty = False
        if votedForNodeId is not None:
            crash_point("after_vote_stored")

    def getCurrentTerm(self) -> int:  # noqa: N802
        return self._state.current_term

    def getVotedForNodeId(self) -> str | None:  # noqa: N802
        return self._state.voted_for

    def onOneSecondTimer(self) -> None:  # noqa: N802
        # The commit index is a hint (Raft recomputes it); storing it lets a restarted node
        # replay its committed tail before it hears from a leader.
        if self._state_dirty:
            self.sync()  # never persist a commit index past the durable log
            self._state.store()
            self._state_dirty = False
