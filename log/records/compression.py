"""Batch compression codecs, as Kafka's attributes bits 0-2 name them.

The broker stores compressed batches exactly as received; only clients (our producer and fetch
client) and tools (dump-log) compress or decompress. Snappy follows the Java client: xerial
framing (magic header then length-prefixed blocks) on write; on read both framed and raw snappy
are accepted because librdkafka and others may send either.
"""

from __future__ import annotations

import enum
import gzip
import struct

import lz4.frame
import snappy
import zstandard

from log.protocol.errors import CorruptRecordError, UnsupportedCompressionTypeError


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


def compress(compression_type: int, data: bytes) -> bytes:
    match compression_type:
        case CompressionType.NONE:
            return data
        case CompressionType.GZIP:
            return gzip.compress(data, compresslevel=6)
        case CompressionType.SNAPPY:
            return _snappy_xerial_compress(data)
        case CompressionType.LZ4:
            return lz4.frame.compress(data)
        case CompressionType.ZSTD:
            return zstandard.ZstdCompressor(level=3).compress(data)
    raise UnsupportedCompressionTypeError(f"compression type {compression_type}")


def decompress(compression_type: int, data: bytes | memoryview) -> bytes:
    try:
        match compression_type:
            case CompressionType.NONE:
                return bytes(data)
            case CompressionType.GZIP:
                return _bounded_gzip(bytes(data))
            case CompressionType.SNAPPY:
                return _snappy_decompress(bytes(data))
            case CompressionType.LZ4:
                return lz4.frame.decompress(bytes(data))
            case CompressionType.ZSTD:
                return _bounded_zstd(bytes(data))
    except CorruptRecordError:
        raise
    except Exception as exc:  # every codec has its own error types; all mean corrupt input
        raise CorruptRecordError(f"cannot decompress {compression_type}: {exc}") from exc
    raise UnsupportedCompressionTypeError(f"compression type {compression_type}")


def _bounded_gzip(data: bytes) -> bytes:
    import zlib

    decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    out = decompressor.decompress(data, MAX_DECOMPRESSED_BYTES)
    if decompressor.unconsumed_tail:
        raise CorruptRecordError("gzip data expands beyond the decompression limit")
    return out


def _bounded_zstd(data: bytes) -> bytes:
    reader = zstandard.ZstdDecompressor().decompressobj()
    out = reader.decompress(data)
    if len(out) > MAX_DECOMPRESSED_BYTES:
        raise CorruptRecordError("zstd data expands beyond the decompression limit")
    return out


def _snappy_xerial_compress(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1)]
    for start in range(0, len(data), _XERIAL_BLOCK_BYTES):
        block = snappy.compress(data[start : start + _XERIAL_BLOCK_BYTES])
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return snappy.decompress(data)
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
        block = snappy.decompress(data[position : position + length])
        total += len(block)
        if total > MAX_DECOMPRESSED_BYTES:
            raise CorruptRecordError("snappy data expands beyond the decompression limit")
        out.append(block)
        position += length
    return b"".join(out)
