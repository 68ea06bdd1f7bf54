"""The leader's tuple fast path (validate_batch_fields, pack_prefix) agrees with validate_batch."""

import dataclasses
import random

import pytest

from log.common.errors import CorruptRecordError
from log.records.batch import parse_header
from log.records.batch_header import (
    CRC_OFFSET,
    BatchHeader,
    pack_prefix,
    set_base_offset,
    set_partition_leader_epoch,
    validate_batch,
    validate_batch_fields,
)
from log.records.builder import Record, build_batch

SEED = 20261121


def _outcome(check, buf):
    try:
        result = check(buf)
    except CorruptRecordError as exc:
        return ("error", str(exc))
    return ("ok", dataclasses.astuple(result) if isinstance(result, BatchHeader) else result)


def _batches(rng):
    for count in (1, 3):
        value = rng.randbytes(rng.choice((0, 7, 200)))
        yield build_batch([Record(value, timestamp_ms=1_700_000_000_000)] * count)
    yield build_batch(
        [Record(b"v", key=b"k", timestamp_ms=5)],
        producer_id=42,
        producer_epoch=3,
        base_sequence=9,
        partition_leader_epoch=7,
    )


def test_fields_equal_validate_batch_on_valid_and_corrupted_batches():
    rng = random.Random(SEED)
    for batch in _batches(rng):
        assert validate_batch_fields(batch) == dataclasses.astuple(validate_batch(batch))
        assert BatchHeader(*validate_batch_fields(memoryview(batch))) == parse_header(batch)
        for trial in range(300):
            buf = bytearray(batch)
            kind = trial % 3
            if kind == 0:  # flip one byte anywhere: header checks, bounds or CRC fail
                buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
            elif kind == 1:  # cut the tail
                del buf[rng.randrange(len(buf)) :]
            else:  # trailing bytes: the first batch still validates on its own
                buf += rng.randbytes(rng.randrange(1, 80))
            expected = _outcome(validate_batch, bytes(buf))
            assert _outcome(validate_batch_fields, bytes(buf)) == expected, (SEED, trial)


@pytest.mark.parametrize("buf", [b"", b"\x00" * 10, b"\x00" * 61])
def test_fields_raise_like_validate_batch_on_garbage(buf):
    with pytest.raises(CorruptRecordError) as fast:
        validate_batch_fields(buf)
    with pytest.raises(CorruptRecordError) as slow:
        validate_batch(buf)
    assert str(fast.value) == str(slow.value)


def test_pack_prefix_equals_patching_the_received_prefix():
    batch = build_batch([Record(b"x" * 50, timestamp_ms=1)], partition_leader_epoch=2)
    header = validate_batch(batch)
    for base_offset, leader_epoch in ((0, 0), (1 << 40, 17), ((1 << 63) - 1, -1)):
        patched = bytearray(batch)
        set_base_offset(patched, 0, base_offset)
        set_partition_leader_epoch(patched, 0, leader_epoch)
        prefix = pack_prefix(base_offset, header.batch_length, leader_epoch)
        assert prefix == bytes(patched[:CRC_OFFSET])
        validate_batch(prefix + batch[CRC_OFFSET:])  # the CRC is untouched by the prefix
