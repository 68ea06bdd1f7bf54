"""Large frames read straight into their own buffer (FrameDecoder.read_buffer / filled),
mixed with fed bytes in any chunking, give the same frames in the same order as feeding;
the size checks still hold. Sans-IO: a seeded random stream and its cuts."""

from __future__ import annotations

import random

import pytest

from log.common.errors import InvalidFrameError
from log.protocol.framing import DIRECT_READ_MIN_BYTES, FrameDecoder


def _framed(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def _receive(decoder: FrameDecoder, stream: bytes, rng: random.Random) -> list[bytes]:
    """What a driver does: after each NEED_DATA read into the frame's buffer when offered,
    else feed a chunk of random size; collect the frames."""
    received: list[bytes] = []
    position = 0
    while True:
        while (frame := decoder.next_frame()) is not None:
            received.append(bytes(frame))
        if position == len(stream):
            return received
        chunk = rng.choice([1, 3, 4, 5, 1000, 70_000, 300_000])
        into = decoder.read_buffer()
        if into is not None:
            count = min(chunk, len(into), len(stream) - position)
            into[:count] = stream[position : position + count]
            into.release()
            decoder.filled(count)
        else:
            count = min(chunk, len(stream) - position)
            decoder.feed(stream[position : position + count])
        position += count


@pytest.mark.parametrize("seed", range(12))
def test_direct_reads_give_the_frames_feeding_gives(seed):
    rng = random.Random(seed)
    sizes = [
        rng.choice([0, 1, 17, DIRECT_READ_MIN_BYTES - 1, DIRECT_READ_MIN_BYTES, 200_000])
        for _ in range(rng.randrange(1, 8))
    ]
    payloads = [rng.randbytes(size) for size in sizes]
    stream = b"".join(_framed(p) for p in payloads)
    decoder = FrameDecoder(max_frame_bytes=1 << 20)
    assert _receive(decoder, stream, rng) == payloads
    assert decoder.buffered_bytes == 0
    assert decoder.pending_frame_bytes == 0


def test_a_large_frame_is_offered_once_its_size_is_known_and_counts_as_pending():
    payload = random.Random(3).randbytes(DIRECT_READ_MIN_BYTES * 2)
    stream = _framed(payload) + _framed(b"next")
    decoder = FrameDecoder(max_frame_bytes=1 << 20)
    decoder.feed(stream[:3])
    assert decoder.read_buffer() is None  # the size is not known yet
    decoder.feed(stream[3:100])
    into = decoder.read_buffer()
    assert into is not None and len(into) == len(payload) - 96
    assert decoder.pending_frame_bytes == 4 + len(payload)
    assert decoder.buffered_bytes == 100
    into[:] = payload[96:]
    into.release()
    decoder.filled(len(payload) - 96)
    assert decoder.read_buffer() is None  # complete: nothing more to read into
    decoder.feed(stream[4 + len(payload) :])  # bytes after it are fed as usual
    assert decoder.next_frame() == payload
    assert decoder.next_frame() == b"next"
    assert decoder.next_frame() is None


def test_bytes_fed_while_a_frame_is_read_directly_go_into_it_first():
    payload = random.Random(4).randbytes(DIRECT_READ_MIN_BYTES)
    stream = _framed(payload) + _framed(b"tail")
    decoder = FrameDecoder(max_frame_bytes=1 << 20)
    decoder.feed(stream[:10])
    assert decoder.read_buffer() is not None
    decoder.feed(stream[10:])  # a driver that fed instead of reading into the view
    assert decoder.next_frame() == payload
    assert decoder.next_frame() == b"tail"


@pytest.mark.parametrize("size", [-1, (1 << 20) + 1])
def test_a_bad_size_is_never_offered_for_a_direct_read_and_still_refused(size):
    decoder = FrameDecoder(max_frame_bytes=1 << 20)
    decoder.feed(size.to_bytes(4, "big", signed=True) + b"x" * 10)
    assert decoder.read_buffer() is None
    with pytest.raises(InvalidFrameError):
        decoder.next_frame()
