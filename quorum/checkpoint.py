"""Metadata checkpoints: the image at a metadata offset, as one self-checking blob or file.

Layout (big-endian)::

    offset  size  field
         0     4  magic  b"QLMC"
         4     1  version (= 1)
         5     8  metadata_offset        last offset the image reflects (-1: empty image)
        13     4  body_length            <= MAX_CHECKPOINT_BYTES
        17     4  crc                    CRC-32C of bytes 4..16 (version, offset, length) + body
        21     n  body                   count-prefixed record frames (records.encode_records):
                                         the records that rebuild the image from empty

The CRC covers every byte but the magic and itself, so a flipped offset is caught too. The body
is the image as records (`MetadataImage.to_records()`), so the checkpoint reuses the one
record definition and the loader reuses replay (with all its invariant checks). The CRC is always
verified; a bad checkpoint raises `CorruptCheckpointError` and is never half-loaded.

Files: `<dir>/metadata-<offset, 20 digits>.checkpoint`, written to a `.tmp` file, fsynced, renamed,
then the directory is fsynced; only the newest KEEP_CHECKPOINTS are kept. Loading tries the newest
first and falls back to older ones when a file is corrupt.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

import construct as c
import crc32c

from log.protocol.errors import ErrorCode, KafkaError
from quorum.image import MetadataImage, MetadataReplayError, replay_checkpoint_records
from quorum.records import MetadataRecordError, decode_records, encode_records

if TYPE_CHECKING:
    from quorum.state_machine import MetadataStateMachine

MAGIC = b"QLMC"
CHECKPOINT_VERSION = 1
HEADER_BYTES = 21
MAX_CHECKPOINT_BYTES = 512 * 1024 * 1024  # metadata for ~1M partitions; refuse anything larger
KEEP_CHECKPOINTS = 3
_FILE_NAME = re.compile(r"^metadata-(\d{20})\.checkpoint$")

_Header = c.Struct(
    "magic" / c.Const(MAGIC),
    "version" / c.Int8ub,
    "metadata_offset" / c.Int64sb,
    "body_length" / c.Int32ub,
    "crc" / c.Int32ub,
)
assert _Header.sizeof() == HEADER_BYTES


class CorruptCheckpointError(KafkaError):
    error_code = ErrorCode.CORRUPT_MESSAGE


def encode_checkpoint(image: MetadataImage) -> bytes:
    body = encode_records(image.to_records())
    if len(body) > MAX_CHECKPOINT_BYTES:
        raise CorruptCheckpointError(f"checkpoint body of {len(body)} bytes is too large")
    fields = {
        "version": CHECKPOINT_VERSION,
        "metadata_offset": image.last_offset,
        "body_length": len(body),
        "crc": 0,
    }
    header = _Header.build(fields)
    fields["crc"] = crc32c.crc32c(header[4:17] + body)
    return _Header.build(fields) + body


def decode_checkpoint(data: bytes) -> MetadataImage:
    """The image in a checkpoint blob; raises CorruptCheckpointError on any defect."""
    try:
        header = _Header.parse(bytes(data[:HEADER_BYTES]))
    except Exception as e:
        raise CorruptCheckpointError(f"bad checkpoint header: {e}") from e
    if header.version != CHECKPOINT_VERSION:
        raise CorruptCheckpointError(f"unknown checkpoint version {header.version}")
    body = bytes(data[HEADER_BYTES:])
    if len(body) != header.body_length:
        raise CorruptCheckpointError(f"body is {len(body)} bytes, header says {header.body_length}")
    if crc32c.crc32c(bytes(data[4:17]) + body) != header.crc:
        raise CorruptCheckpointError("checkpoint CRC mismatch")
    try:
        return replay_checkpoint_records(decode_records(body), header.metadata_offset)
    except (MetadataRecordError, MetadataReplayError) as e:
        raise CorruptCheckpointError(f"checkpoint content is invalid: {e}") from e


def checkpoint_file_name(metadata_offset: int) -> str:
    return f"metadata-{metadata_offset:020d}.checkpoint"


def list_checkpoints(directory: str) -> list[tuple[int, str]]:
    """(offset, path) of every checkpoint file, newest first."""
    found = []
    for name in os.listdir(directory):
        match = _FILE_NAME.match(name)
        if match:
            found.append((int(match.group(1)), os.path.join(directory, name)))
    return sorted(found, reverse=True)


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(
    directory: str, state_machine: MetadataStateMachine, keep: int = KEEP_CHECKPOINTS
) -> str:
    """Durably write the state machine's checkpoint; returns its path. Keeps the newest `keep`."""
    assert keep >= 1
    offset = state_machine.last_applied_offset
    if offset < 0:
        raise ValueError("nothing applied yet: no checkpoint to write")
    data = state_machine.to_checkpoint()
    path = os.path.join(directory, checkpoint_file_name(offset))
    tmp_path = path + ".tmp"
    with open(tmp_path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp_path, path)
    _fsync_dir(directory)
    for _, old_path in list_checkpoints(directory)[keep:]:
        os.remove(old_path)
    return path


def load_newest_checkpoint(directory: str) -> MetadataStateMachine | None:
    """The newest checkpoint that verifies, or None. Corrupt files are skipped (not deleted)."""
    from quorum.state_machine import MetadataStateMachine

    if not os.path.isdir(directory):
        return None
    for _, path in list_checkpoints(directory):
        with open(path, "rb") as f:
            data = f.read(MAX_CHECKPOINT_BYTES + HEADER_BYTES + 1)
        try:
            return MetadataStateMachine.from_checkpoint(data)
        except CorruptCheckpointError:
            continue
    return None
