"""Metadata checkpoints: the image at a metadata offset, as one self-checking blob.

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
verified; a bad checkpoint raises `CorruptImageError` and is never half-loaded.

These bytes are what `MetadataStateMachine.to_checkpoint()` returns: the state inside a controller's
checkpoint file (quorum.raft_checkpoint, which owns the files: naming, durable writes, keeping the
newest few, skipping damaged ones) and what MetadataFetch sends a broker that is too far behind.
"""

from __future__ import annotations

import construct as c
import crc32c

from log.common.errors import ErrorCode, KafkaError
from quorum.image import MetadataImage, MetadataReplayError, replay_checkpoint_records
from quorum.records import MetadataRecordError, decode_records, encode_records

MAGIC = b"QLMC"
CHECKPOINT_VERSION = 1
HEADER_BYTES = 21
MAX_CHECKPOINT_BYTES = 512 * 1024 * 1024  # metadata for ~1M partitions; refuse anything larger

_Header = c.Struct(
    "magic" / c.Const(MAGIC),
    "version" / c.Int8ub,
    "metadata_offset" / c.Int64sb,
    "body_length" / c.Int32ub,
    "crc" / c.Int32ub,
)
assert _Header.sizeof() == HEADER_BYTES


class CorruptImageError(KafkaError):
    error_code = ErrorCode.CORRUPT_MESSAGE


def encode_checkpoint(image: MetadataImage) -> bytes:
    body = encode_records(image.to_records())
    if len(body) > MAX_CHECKPOINT_BYTES:
        raise CorruptImageError(f"checkpoint body of {len(body)} bytes is too large")
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
    """The image in a checkpoint blob; raises CorruptImageError on any defect."""
    try:
        header = _Header.parse(bytes(data[:HEADER_BYTES]))
    except Exception as e:
        raise CorruptImageError(f"bad checkpoint header: {e}") from e
    if header.version != CHECKPOINT_VERSION:
        raise CorruptImageError(f"unknown checkpoint version {header.version}")
    body = bytes(data[HEADER_BYTES:])
    if len(body) != header.body_length:
        raise CorruptImageError(f"body is {len(body)} bytes, header says {header.body_length}")
    if crc32c.crc32c(bytes(data[4:17]) + body) != header.crc:
        raise CorruptImageError("checkpoint CRC mismatch")
    try:
        return replay_checkpoint_records(decode_records(body), header.metadata_offset)
    except (MetadataRecordError, MetadataReplayError) as e:
        raise CorruptImageError(f"checkpoint content is invalid: {e}") from e
