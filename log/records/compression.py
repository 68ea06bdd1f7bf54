"""Batch compression codecs, as Kafka's attributes bits 0-2 name them.

The broker stores compressed batches exactly as received; only clients (our producer and fetch
client) and tools (dump-log) compress or decompress. What each codec looks like on the wire:

    codec   id  wire format
    none     0  the records section as is
    gzip     1  one gzip member (RFC 1952)
    snappy   2  xerial framing, as the Java client's snappy-java writes it:
                magic b"\\x82SNAPPY\\x00", int32 version (1), int32 min compatible version (1),
                then [int32 block length, raw snappy block]... (32 KiB input blocks);
                raw (unframed) snappy is accepted on read, librdkafka may send it
    lz4      3  one LZ4 *frame* (not the raw block format); written with independent 64 KiB
                blocks and no content size, because Kafka's Java reader decompresses each block
                on its own (linked blocks would break it)
    zstd     4  one zstd frame; librdkafka's frames may lack the content size, so reading is
                streaming and never trusts a size field

Decoding is strict: a truncated stream, a stream with trailing garbage and a stream expanding past
`MAX_DECOMPRESSED_BYTES` all raise CorruptRecordError, so a hostile batch can neither slip
through partially nor exhaust memory.
"""

from __future__ import annotations

import enum
import gzip
import struct
import zlib

import lz4.frame
import snappy
import zstandard

from log.common.errors import CorruptRecordError, UnsupportedCompressionTypeError
from log.records.varint import MAX_VARINT_BYTES


class CompressionType(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise ValueError(
                f"unknown compression.type {name!r}: expected none, gzip, snappy, lz4 or zstd"
            ) from None


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version, min compatible version
_XERIAL_BLOCK_BYTES = 32 * 1024  # snappy-java's default block size
_INT32 = struct.Struct(">i")
# Decompressed data larger than this is refused: a hostile batch could otherwise expand without
# bound. Kafka batches are at most max.message.bytes (1 MiB default); leave generous room.
MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024
# zstd input is fed in pieces of this size so the output limit is checked as we go.
_ZSTD_INPUT_PIECE_BYTES = 4096


def compress(compression_type: int, data: bytes | bytearray | memoryview) -> bytes:
    match compression_type:
        case CompressionType.NONE:
            return bytes(data)
        case CompressionType.GZIP:
            return gzip.compress(data, compresslevel=6)
        case CompressionType.SNAPPY:
            return _snappy_xerial_compress(bytes(data))
        case CompressionType.LZ4:
            return lz4.frame.compress(
                data,
                block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                block_linked=False,
                content_checksum=False,
                store_size=False,
            )
        case CompressionType.ZSTD:
            return zstandard.ZstdCompressor(level=3).compress(data)
    raise UnsupportedCompressionTypeError(f"compression type {compression_type}")


def decompress(compression_type: int, data: bytes | bytearray | memoryview) -> bytes:
    """Decompress a records section; CorruptRecordError on anything but one complete stream."""
    try:
        match compression_type:
            case CompressionType.NONE:
                return bytes(data)
            case CompressionType.GZIP:
                return _bounded_gzip(bytes(data))
            case CompressionType.SNAPPY:
                return _snappy_decompress(bytes(data))
            case CompressionType.LZ4:
                return _bounded_lz4(bytes(data))
            case CompressionType.ZSTD:
                return _bounded_zstd(bytes(data))
    except CorruptRecordError:
        raise
    except Exception as exc:  # every codec has its own error types; all mean corrupt input
        raise CorruptRecordError(f"cannot decompress {compression_type}: {exc}") from exc
    raise UnsupportedCompressionTypeError(f"compression type {compression_type}")


def _check_complete(name: str, eof: bool, unused: bytes) -> None:
    if not eof:
        raise CorruptRecordError(f"{name} stream truncated")
    if unused:
        raise CorruptRecordError(f"{len(unused)} bytes of trailing garbage after the {name} stream")


def _bounded_gzip(data: bytes) -> bytes:
    decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    out = decompressor.decompress(data, MAX_DECOMPRESSED_BYTES)
    if decompressor.unconsumed_tail:
        raise CorruptRecordError("gzip data expands beyond the decompression limit")
    _check_complete("gzip", decompressor.eof, decompressor.unused_data)
    return out


def _bounded_lz4(data: bytes) -> bytes:
    decompressor = lz4.frame.LZ4FrameDecompressor()
    out = decompressor.decompress(data, max_length=MAX_DECOMPRESSED_BYTES)
    if not decompressor.eof and not decompressor.needs_input:
        raise CorruptRecordError("lz4 data expands beyond the decompression limit")
    _check_complete("lz4", decompressor.eof, decompressor.unused_data)
    return out


def _bounded_zstd(data: bytes) -> bytes:
    # decompressobj streams (no content size needed) but has no output cap, so feed it small
    # input pieces and check the total after each: one piece expands to at most ~32x its size
    # per 128 KiB block header, which keeps the overshoot bounded.
    decompressor = zstandard.ZstdDecompressor().decompressobj()
    parts = []
    total = 0
    view = memoryview(data)
    for start in range(0, len(data), _ZSTD_INPUT_PIECE_BYTES):
        if decompressor.eof:
            break
        piece = decompressor.decompress(view[start : start + _ZSTD_INPUT_PIECE_BYTES])
        total += len(piece)
        if total > MAX_DECOMPRESSED_BYTES:
            raise CorruptRecordError("zstd data expands beyond the decompression limit")
        parts.append(piece)
        if decompressor.eof:
            consumed = min(start + _ZSTD_INPUT_PIECE_BYTES, len(data))
            unused = decompressor.unused_data + data[consumed:]
            _check_complete("zstd", True, unused)
            return b"".join(parts)
    _check_complete("zstd", decompressor.eof, b"")
    return b"".join(parts)


def _snappy_xerial_compress(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1)]
    for start in range(0, len(data), _XERIAL_BLOCK_BYTES):
        block = snappy.compress(data[start : start + _XERIAL_BLOCK_BYTES])
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_uncompressed_length(block: bytes) -> int:
    """A raw snappy block starts with its uncompressed length as an unsigned varint."""
    result = 0
    for i in range(min(MAX_VARINT_BYTES, len(block))):
        result |= (block[i] & 0x7F) << (7 * i)
        if not block[i] & 0x80:
            return result
    raise CorruptRecordError("snappy block has no valid length preamble")


def _snappy_block(block: bytes, budget_bytes: int) -> bytes:
    if _snappy_uncompressed_length(block) > budget_bytes:
        raise CorruptRecordError("snappy data expands beyond the decompression limit")
    return snappy.decompress(block)


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return _snappy_block(data, MAX_DECOMPRESSED_BYTES)
    if len(data) < _XERIAL_HEADER.size:
        raise CorruptRecordError("truncated xerial snappy header")
    position = _XERIAL_HEADER.size
    out = []
    total = 0
    while position < len(data):
        if position + 4 > len(data):
            raise CorruptRecordError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(data, position)
        position += 4
        if length < 0 or position + length > len(data):
            raise CorruptRecordError("truncated xerial snappy block")
        block = _snappy_block(data[position : position + length], MAX_DECOMPRESSED_BYTES - total)
        total += len(block)
        out.append(block)
        position += length
    return b"".join(out)
