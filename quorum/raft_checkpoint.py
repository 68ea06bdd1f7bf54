"""The controller checkpoint file: the state machine's own checkpoint plus Raft's position.

pysyncobj's log compaction calls our serializer with `(last_entry, prev_entry, cluster)`; it must
get the same entries back from the deserializer, and it compares them with the journal's first two
entries. We store them next to `MetadataStateMachine.to_checkpoint()` bytes under one CRC, so a
checkpoint is never half-trusted: any damage fails the whole file (see `decode_checkpoint`). The
same bytes are what pysyncobj streams to a follower that is too far behind (snapshot install).

Layout (little endian):

    offset  size  field
    0       8     magic b"QLRCKPT1"
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

The commands are pysyncobj's encoded entries, stored opaque (never decoded by us).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

from log.protocol.errors import KafkaStorageError

CHECKPOINT_MAGIC = b"QLRCKPT1"
_HEAD = struct.Struct("<8sI")
_BODY = struct.Struct("<QQQQIII")
MAX_CHECKPOINT_BYTES = 1024 * 1024 * 1024  # a metadata image is MBs; above 1 GiB it is garbage


class CheckpointCorruptError(KafkaStorageError):
    """A checkpoint failed validation; it is never loaded (see quorum.raft for why not older)."""


@dataclass(frozen=True)
class RaftCheckpoint:
    last_index: int
    last_term: int
    prev_index: int
    prev_term: int
    last_command: bytes
    prev_command: bytes
    state: bytes

    @property
    def last_entry(self) -> tuple[bytes, int, int]:
        return (self.last_command, self.last_index, self.last_term)

    @property
    def prev_entry(self) -> tuple[bytes, int, int]:
        return (self.prev_command, self.prev_index, self.prev_term)


def encode_checkpoint(checkpoint: RaftCheckpoint) -> bytes:
    assert checkpoint.prev_index + 1 == checkpoint.last_index
    c = checkpoint
    body = (
        _BODY.pack(
            c.last_index,
            c.last_term,
            c.prev_index,
            c.prev_term,
            len(c.last_command),
            len(c.prev_command),
            len(c.state),
        )
        + c.last_command
        + c.prev_command
        + c.state
    )
    return _HEAD.pack(CHECKPOINT_MAGIC, crc32c.crc32c(body)) + body


def decode_checkpoint(data: bytes) -> RaftCheckpoint:
    if len(data) < _HEAD.size + _BODY.size or len(data) > MAX_CHECKPOINT_BYTES:
        raise CheckpointCorruptError(f"checkpoint of {len(data)} bytes is out of bounds")
    magic, crc = _HEAD.unpack_from(data, 0)
    if magic != CHECKPOINT_MAGIC:
        raise CheckpointCorruptError("not a quorumlog checkpoint (bad magic)")
    body = memoryview(data)[_HEAD.size :]
    if crc32c.crc32c(body) != crc:
        raise CheckpointCorruptError("checkpoint CRC mismatch")
    last_index, last_term, prev_index, prev_term, last_n, prev_n, state_n = _BODY.unpack_from(
        body, 0
    )
    if _BODY.size + last_n + prev_n + state_n != len(body) or prev_index + 1 != last_index:
        raise CheckpointCorruptError("checkpoint lengths or indexes are inconsistent")
    position = _BODY.size
    last_command = bytes(body[position : position + last_n])
    position += last_n
    prev_command = bytes(body[position : position + prev_n])
    position += prev_n
    return RaftCheckpoint(
        last_index=last_index,
        last_term=last_term,
        prev_index=prev_index,
        prev_term=prev_term,
        last_command=last_command,
        prev_command=prev_command,
        state=bytes(body[position:]),
    )
