"""Zigzag varints (protobuf style), as Kafka's records use for lengths, deltas and counts.

Kafka has two widths: a varint holds an int32 (at most 5 bytes), a varlong an int64 (at most 10
bytes). Decoding is strict: a longer encoding, or one whose value does not fit the width, is
CorruptRecordError (Java would silently wrap; we refuse instead).
"""

from __future__ import annotations

from log.common.errors import CorruptRecordError

MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10
_UNSIGNED_LIMIT = {MAX_VARINT_BYTES: 1 << 32, MAX_VARLONG_BYTES: 1 << 64}


def encode_varint(value: int, out: bytearray) -> None:
    """Append the zigzag varint of a signed 64-bit `value` to `out`."""
    zigzag = (value << 1) ^ (value >> 63)
    zigzag &= 0xFFFFFFFFFFFFFFFF
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)


def decode_varint(
    buf: bytes | bytearray | memoryview, position: int, max_bytes: int = MAX_VARLONG_BYTES
) -> tuple[int, int]:
    """Decode a zigzag varint at `position`; return (value, next position).

    `max_bytes` is MAX_VARINT_BYTES for an int32 field, MAX_VARLONG_BYTES for an int64 field.
    """
    result = 0
    shift = 0
    end = len(buf)
    for _ in range(max_bytes):
        if position >= end:
            raise CorruptRecordError("varint runs past the end of the buffer")
        byte = buf[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if result >= _UNSIGNED_LIMIT.get(max_bytes, 1 << 64):
                raise CorruptRecordError(f"varint value overflows {max_bytes} bytes' width")
            return (result >> 1) ^ -(result & 1), position
        shift += 7
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes")


def varint_size(value: int) -> int:
    zigzag = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while zigzag > 0x7F:
        zigzag >>= 7
        size += 1
    return size
