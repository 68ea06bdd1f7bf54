"""Codecs: round trips, the wire shapes other clients need, strict and bounded decoding."""

import random
import struct

import pytest
import snappy
import zstandard
from kafka import codec as kafka_codec

from log.common.errors import CorruptRecordError, UnsupportedCompressionTypeError
from log.records import compression
from log.records.compression import CompressionType, compress, decompress

CODECS = list(CompressionType)
_RNG = random.Random(7)
# Over several lz4 (64 KiB) and snappy (32 KiB) blocks, half compressible, half not.
PAYLOAD = (b"quorumlog " * 15000) + _RNG.randbytes(100_000)


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
@pytest.mark.parametrize("data", [b"", b"x", PAYLOAD], ids=["empty", "one", "big"])
def test_round_trip(codec, data):
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS[1:], ids=[c.name for c in CODECS[1:]])
def test_truncated_or_trailing_garbage_is_corrupt(codec):
    packed = compress(codec, PAYLOAD)
    for bad in (packed[:-1], packed[: len(packed) // 2], packed[:5], packed + b"\x00junk"):
        with pytest.raises(CorruptRecordError):
            decompress(codec, bad)


def test_unknown_codec_is_a_typed_error():
    with pytest.raises(UnsupportedCompressionTypeError):
        decompress(5, b"")
    with pytest.raises(UnsupportedCompressionTypeError):
        compress(7, b"")


def test_lz4_frames_are_what_the_java_client_can_read():
    packed = compress(CompressionType.LZ4, PAYLOAD)
    assert packed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flg, bd = packed[4], packed[5]
    assert flg >> 6 == 1  # frame version 01
    assert flg & 0x20  # independent blocks: Java decompresses each block on its own
    assert not flg & 0x08  # no content size
    assert (bd >> 4) & 0x7 == 4  # 64 KiB maximum block size


def test_snappy_is_xerial_framed_and_raw_snappy_is_accepted():
    packed = compress(CompressionType.SNAPPY, PAYLOAD)
    magic, version, compatible = struct.unpack_from(">8sii", packed)
    assert (magic, version, compatible) == (b"\x82SNAPPY\x00", 1, 1)
    assert decompress(CompressionType.SNAPPY, snappy.compress(PAYLOAD)) == PAYLOAD
    # kafka-python writes xerial framing like the Java client; we read it.
    assert decompress(CompressionType.SNAPPY, kafka_codec.snappy_encode(PAYLOAD)) == PAYLOAD
    assert kafka_codec.snappy_decode(packed) == PAYLOAD


def test_zstd_frame_without_content_size_decodes():
    streaming = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    packed = streaming.compress(PAYLOAD) + streaming.flush()
    assert zstandard.get_frame_parameters(packed).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(CompressionType.ZSTD, packed) == PAYLOAD


@pytest.mark.parametrize("codec", CODECS[1:], ids=[c.name for c in CODECS[1:]])
def test_expansion_past_the_limit_is_refused(codec, monkeypatch):
    packed = compress(codec, bytes(200_000))
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BYTES", 100_000)
    with pytest.raises(CorruptRecordError):
        decompress(codec, packed)


def test_raw_snappy_claiming_a_huge_length_is_refused_before_decoding():
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.SNAPPY, b"\xff\xff\xff\xff\x0f" + b"\x00" * 10)
