"""Controller checkpoint files: the state machine's checkpoint plus Raft's position, newest few kept.

pysyncobj's log compaction calls our serializer with `(last_entry, prev_entry, cluster)`; it must
get the same entries back from the deserializer, and it compares them with the journal's first two
entries. We store them next to `MetadataStateMachine.to_checkpoint()` bytes under one CRC, so a
checkpoint is never half-trusted: any damage fails the whole file (see `decode_checkpoint`). The
same bytes are what pysyncobj streams to a follower that is too far behind (snapshot install).

Layout (`_CHECKPOINT`, the one definition; little endian):

    offset  size  field
    0       8     magic b"QLRCKPT2"
    8       4     crc32c over every byte from offset 12 to the end
    12      8     last_index       Raft index of the last entry the state includes (= the
                                   metadata offset the checkpoint is taken at)
    20      8     last_term
    28      8     prev_index       the entry before it (pysyncobj keeps both in the journal)
    36      8     prev_term
    44      4     last_command_bytes
    48      4     prev_command_bytes
    52      4     state_bytes
    56      ...   last_command, prev_command, state (the state machine's checkpoint)
    then    4     voters_bytes     (QLRCKPT3 only)
            ...   voters           the Raft voter set at last_index: "host:port" joined by ","
                                   (quorum.raft's dynamic membership; QLRCKPT2 files have none
                                   and mean "the configured voters")

The commands are pysyncobj's encoded entries, stored opaque (never decoded by us).

Files (`CheckpointFiles`): `<metadata dir>/metadata-<last_index, 20 digits>.checkpoint`, each
published durably (fsynced bytes, hard link to a `.tmp` name, rename, directory fsync); only the
newest `keep` are kept. The Raft binding keeps its journal from the OLDEST kept checkpoint on, so
when the newest file is damaged an older one plus a longer journal replay rebuilds the same state
(quorum.raft). A file found damaged at start-up is renamed `*.corrupt` (kept for the operator,
never read again).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

import construct as c
import crc32c

from log.common.errors import KafkaStorageError
from log.common.files import fsync_directory

logger = logging.getLogger(__name__)

CHECKPOINT_MAGIC = b"QLRCKPT3"  # written; QLRCKPT2 (no voters) is still read
CHECKPOINT_MAGIC_V2 = b"QLRCKPT2"
CRC_START = 12  # the CRC covers every byte from here on
MAX_CHECKPOINT_BYTES = 1024 * 1024 * 1024  # a metadata image is MBs; above 1 GiB it is garbage
KEEP_CHECKPOINTS = 3
_FILE_NAME = re.compile(r"^metadata-(\d{20})\.checkpoint$")

_CHECKPOINT_V2 = c.Struct(
    "magic" / c.Const(CHECKPOINT_MAGIC_V2),
    "crc" / c.Int32ul,
    "last_index" / c.Int64ul,
    "last_term" / c.Int64ul,
    "prev_index" / c.Int64ul,
    "prev_term" / c.Int64ul,
    "last_command_bytes" / c.Int32ul,
    "prev_command_bytes" / c.Int32ul,
    "state_bytes" / c.Int32ul,
    "last_command" / c.Bytes(c.this.last_command_bytes),
    "prev_command" / c.Bytes(c.this.prev_command_bytes),
    "state" / c.Bytes(c.this.state_bytes),
    c.Terminated,
)
_CHECKPOINT = c.Struct(
    "magic" / c.Const(CHECKPOINT_MAGIC),
    *_CHECKPOINT_V2.subcons[1:-1],
    "voters_bytes" / c.Int32ul,
    "voters" / c.Bytes(c.this.voters_bytes),
    c.Terminated,
)
HEADER_BYTES = 56  # every fixed field; the three byte strings follow
assert _CHECKPOINT_V2.build(
    dict(
        crc=0,
        last_index=0,
        last_term=0,
        prev_index=0,
        prev_term=0,
        last_command_bytes=0,
        prev_command_bytes=0,
        state_bytes=0,
        last_command=b"",
        prev_command=b"",
        state=b"",
    )
) == CHECKPOINT_MAGIC_V2 + bytes(HEADER_BYTES - len(CHECKPOINT_MAGIC))


class CorruptCheckpointFileError(KafkaStorageError):
    """A checkpoint failed validation (or none is usable); a bad checkpoint is never loaded."""


@dataclass(frozen=True)
class RaftCheckpoint:
    last_index: int
    last_term: int
    prev_index: int
    prev_term: int
    last_command: bytes
    prev_command: bytes
    state: bytes
    voters: tuple[str, ...] | None = None  # Raft addresses at last_index; None: configured

    @property
    def last_entry(self) -> tuple[bytes, int, int]:
        return (self.last_command, self.last_index, self.last_term)

    @property
    def prev_entry(self) -> tuple[bytes, int, int]:
        return (self.prev_command, self.prev_index, self.prev_term)


def encode_checkpoint(checkpoint: RaftCheckpoint) -> bytes:
    assert checkpoint.prev_index + 1 == checkpoint.last_index
    ch = checkpoint
    fields = dict(
        crc=0,
        last_index=ch.last_index,
        last_term=ch.last_term,
        prev_index=ch.prev_index,
        prev_term=ch.prev_term,
        last_command_bytes=len(ch.last_command),
        prev_command_bytes=len(ch.prev_command),
        state_bytes=len(ch.state),
        last_command=ch.last_command,
        prev_command=ch.prev_command,
        state=ch.state,
    )
    layout = _CHECKPOINT_V2
    if ch.voters is not None:
        assert all(v and "," not in v for v in ch.voters), ch.voters
        voters = ",".join(ch.voters).encode()
        fields.update(voters_bytes=len(voters), voters=voters)
        layout = _CHECKPOINT
    data = bytearray(layout.build(fields))
    data[8:CRC_START] = crc32c.crc32c(memoryview(data)[CRC_START:]).to_bytes(4, "little")
    return bytes(data)


def decode_checkpoint(data: bytes) -> RaftCheckpoint:
    """Raises CorruptCheckpointFileError for any defect (bounds, magic, CRC, lengths, indexes)."""
    if len(data) < HEADER_BYTES or len(data) > MAX_CHECKPOINT_BYTES:
        raise CorruptCheckpointFileError(f"checkpoint of {len(data)} bytes is out of bounds")
    if data[:8] not in (CHECKPOINT_MAGIC, CHECKPOINT_MAGIC_V2):
        raise CorruptCheckpointFileError("not a quorumlog checkpoint (bad magic)")
    if crc32c.crc32c(memoryview(data)[CRC_START:]) != int.from_bytes(data[8:CRC_START], "little"):
        raise CorruptCheckpointFileError("checkpoint CRC mismatch")
    try:
        parsed = (_CHECKPOINT if data[:8] == CHECKPOINT_MAGIC else _CHECKPOINT_V2).parse(data)
        voters = None
        if "voters" in parsed:
            text = bytes(parsed.voters).decode()
            voters = tuple(text.split(",")) if text else ()
    except (c.ConstructError, UnicodeDecodeError) as e:
        raise CorruptCheckpointFileError(f"checkpoint lengths are inconsistent: {e}") from e
    if parsed.prev_index + 1 != parsed.last_index:
        raise CorruptCheckpointFileError("checkpoint indexes are inconsistent")
    return RaftCheckpoint(
        last_index=parsed.last_index,
        last_term=parsed.last_term,
        prev_index=parsed.prev_index,
        prev_term=parsed.prev_term,
        last_command=bytes(parsed.last_command),
        prev_command=bytes(parsed.prev_command),
        state=bytes(parsed.state),
        voters=voters,
    )


def checkpoint_file_name(last_index: int) -> str:
    return f"metadata-{last_index:020d}.checkpoint"


class CheckpointFiles:
    """The checkpoint files in one directory, newest (highest last_index) first."""

    def __init__(self, directory: str, keep: int = KEEP_CHECKPOINTS) -> None:
        assert keep >= 1
        self.directory = directory
        self.keep = keep

    def list(self) -> list[tuple[int, str]]:
        """`(last_index, path)` of every checkpoint file, newest first (names, not contents)."""
        found = []
        for name in os.listdir(self.directory):
            match = _FILE_NAME.match(name)
            if match:
                found.append((int(match.group(1)), os.path.join(self.directory, name)))
        return sorted(found, reverse=True)

    def read_all(self) -> Iterator[tuple[int, str, RaftCheckpoint | CorruptCheckpointFileError]]:
        """Newest first: each file's checkpoint, or the error that makes it untrustworthy."""
        for named_index, path in self.list():
            try:
                with open(path, "rb") as f:
                    data = f.read(MAX_CHECKPOINT_BYTES + 1)
                checkpoint = decode_checkpoint(data)
                if checkpoint.last_index != named_index:
                    raise CorruptCheckpointFileError(f"holds index {checkpoint.last_index}")
            except CorruptCheckpointFileError as e:
                yield named_index, path, e
                continue
            yield named_index, path, checkpoint

    def remove_stale_tmp(self) -> None:
        for name in os.listdir(self.directory):
            if name.endswith(".checkpoint.tmp") and name.startswith("metadata-"):
                os.unlink(os.path.join(self.directory, name))

    def publish(self, last_index: int, source_path: str) -> str:
        """Make the (already fsynced) file at `source_path` checkpoint `last_index`, durably,
        then drop all but the newest `keep`. A hard link: no byte is copied."""
        path = os.path.join(self.directory, checkpoint_file_name(last_index))
        tmp_path = path + ".tmp"
        if os.path.lexists(tmp_path):
            os.unlink(tmp_path)
        os.link(source_path, tmp_path)
        os.replace(tmp_path, path)
        fsync_directory(self.directory)
        for _, old_path in self.list()[self.keep :]:
            os.unlink(old_path)  # if a crash comes first, start-up prunes it (prune)
        return path

    def prune(self, protect: int | None = None) -> None:
        """Drop all but the newest `keep` (a crash can leave one more); never `protect`."""
        for index, old_path in self.list()[self.keep :]:
            if index != protect:
                os.unlink(old_path)

    def remove_all_but(self, last_index: int) -> None:
        """After a snapshot install the journal restarts there: older files are unusable."""
        for index, path in self.list():
            if index != last_index:
                os.unlink(path)

    def quarantine(self, path: str) -> None:
        """Set a damaged file aside (never read again, kept for the operator)."""
        os.replace(path, path + ".corrupt")
        logger.critical("checkpoint %s is damaged: renamed to %s.corrupt", path, path)

    def retain_from_index(self) -> int | None:
        """The first journal index the files need: the oldest kept checkpoint's prev entry."""
        files = self.list()[: self.keep]
        return files[-1][0] - 1 if files else None
