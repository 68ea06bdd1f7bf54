"""The broker's hot-path view of a RecordBatch v2 header (struct + memoryview, no record decoding).

Kafka's magic-2 batch header is 61 bytes, big-endian::

    offset  size  field
         0     8  baseOffset            \\ LOG_OVERHEAD (12 bytes): not covered by the CRC,
         8     4  batchLength            / so the broker can patch baseOffset without re-CRC
        12     4  partitionLeaderEpoch  also outside the CRC, patched by the leader on append
        16     1  magic (= 2)
        17     4  crc (CRC-32C of bytes 21 .. end of batch)
        21     2  attributes            compression:3 timestampType:1 transactional:1 control:1
        23     4  lastOffsetDelta
        27     8  baseTimestamp
        35     8  maxTimestamp
        43     8  producerId
        51     2  producerEpoch
        53     4  baseSequence
        57     4  recordCount
        61        records...

batchLength counts everything after itself, so a batch occupies `batchLength + 12` bytes. The
construct definition in `batch.py` is the specification; tests prove this view agrees with it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

from log.common.errors import CorruptRecordError

MAGIC_V2 = 2
LOG_OVERHEAD = 12  # baseOffset (8) + batchLength (4)
HEADER_BYTES = 61
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC covers from here to the end of the batch
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
# Smallest legal batchLength: the header after LOG_OVERHEAD, with zero records.
MIN_BATCH_LENGTH = HEADER_BYTES - LOG_OVERHEAD

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
# The 17 bytes before the CRC (baseOffset, batchLength, partitionLeaderEpoch, magic): what the
# leader rewrites on every append, leaving the CRC-covered rest of the batch untouched.
_PREFIX = struct.Struct(">qiib")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
assert _HEADER.size == HEADER_BYTES
assert _PREFIX.size == CRC_OFFSET


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression_type(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap at 2**31 like Kafka's."""
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def read_header(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Parse the 61-byte header at `position`; raise CorruptRecordError if it cannot be a batch."""
    if len(buf) - position < HEADER_BYTES:
        raise CorruptRecordError(
            f"batch header at position {position} truncated: {len(buf) - position} bytes"
        )
    header = BatchHeader(*_HEADER.unpack_from(buf, position))
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(f"unsupported magic {header.magic} at position {position}")
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch length {header.batch_length} below minimum at position {position}"
        )
    if header.last_offset_delta < 0 or header.record_count < 0:
        raise CorruptRecordError(f"negative offset delta or record count at position {position}")
    return header


def compute_crc(buf: bytes | bytearray | memoryview, position: int, size_bytes: int) -> int:
    view = memoryview(buf)[position + ATTRIBUTES_OFFSET : position + size_bytes]
    return crc32c.crc32c(view)


def is_valid_crc(buf: bytes | bytearray | memoryview, position: int, header: BatchHeader) -> bool:
    return compute_crc(buf, position, header.size_bytes) == header.crc


def validate_batch(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Header checks plus bounds and CRC; the batch must lie entirely within `buf`."""
    header = read_header(buf, position)
    if position + header.size_bytes > len(buf):
        raise CorruptRecordError(
            f"batch at position {position} claims {header.size_bytes} bytes, "
            f"only {len(buf) - position} present"
        )
    if not is_valid_crc(buf, position, header):
        raise CorruptRecordError(f"CRC mismatch in batch at position {position}")
    return header


def validate_batch_fields(buf: bytes | bytearray | memoryview) -> tuple[int, ...]:
    """`validate_batch` of the batch at the start of `buf`, returning the header's fields as a
    plain tuple in BatchHeader's field order (`BatchHeader(*fields)` is the header).

    The leader's per-append path: one struct unpack and one CRC-32C, no dataclass. Any check
    that fails is re-run by `validate_batch`, which raises the same CorruptRecordError.
    """
    if len(buf) >= HEADER_BYTES:
        fields = _HEADER.unpack_from(buf)
        size_bytes = fields[1] + LOG_OVERHEAD
        if (
            fields[3] == MAGIC_V2
            and fields[1] >= MIN_BATCH_LENGTH
            and fields[6] >= 0  # last_offset_delta
            and fields[12] >= 0  # record_count
            and size_bytes <= len(buf)
            and crc32c.crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:size_bytes]) == fields[4]
        ):
            return fields
    validate_batch(buf)
    raise AssertionError("validate_batch accepted a batch validate_batch_fields rejected")


def iter_batches(
    buf: bytes | bytearray | memoryview, *, check_crc: bool = True
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each whole batch; raise CorruptRecordError on anything else."""
    position = 0
    end = len(buf)
    while position < end:
        header = validate_batch(buf, position) if check_crc else read_header(buf, position)
        if not check_crc and position + header.size_bytes > end:
            raise CorruptRecordError(f"batch at position {position} truncated")
        yield position, header
        position += header.size_bytes


def set_base_offset(buf: bytearray | memoryview, position: int, base_offset: int) -> None:
    """Patch baseOffset in place (outside the CRC, so the CRC stays valid)."""
    _INT64.pack_into(buf, position, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, position: int, epoch: int) -> None:
    """Patch partitionLeaderEpoch in place (outside the CRC)."""
    _INT32.pack_into(buf, position + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def pack_prefix(base_offset: int, batch_length: int, partition_leader_epoch: int) -> bytes:
    """The 17 bytes before the CRC of a v2 batch with these fields (magic 2): the leader writes
    them followed by the received batch from CRC_OFFSET on."""
    return _PREFIX.pack(base_offset, batch_length, partition_leader_epoch, MAGIC_V2)


def set_max_timestamp_log_append(
    buf: bytearray | memoryview, position: int, header: BatchHeader, timestamp_ms: int
) -> None:
    """LogAppendTime: set the timestamp type bit and maxTimestamp, then recompute the CRC."""
    struct.pack_into(
        ">h", buf, position + ATTRIBUTES_OFFSET, header.attributes | TIMESTAMP_TYPE_MASK
    )
    _INT64.pack_into(buf, position + 35, timestamp_ms)
    _UINT32.pack_into(buf, position + CRC_OFFSET, compute_crc(buf, position, header.size_bytes))
