"""Frames in any chunking, frame-size limits, and request/response headers."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from log.common.errors import InvalidFrameError, InvalidRequestError, KafkaError
from log.protocol.framing import (
    FrameDecoder,
    RequestHeader,
    encode_request_header,
    encode_response_header,
    read_request_header,
    read_response_header,
    response_header_version,
)


def _framed(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


@settings(max_examples=100, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=40), max_size=8),
    seed=st.integers(0, 2**32 - 1),
)
def test_frames_survive_any_split_or_merge(payloads, seed):
    stream = b"".join(_framed(p) for p in payloads)
    rng = random.Random(seed)
    cuts = sorted(rng.randrange(len(stream) + 1) for _ in range(rng.randrange(6)))
    decoder = FrameDecoder(max_frame_bytes=64)
    received = []
    start = 0
    for cut in [*cuts, len(stream)]:
        received.extend(decoder.frames(stream[start:cut]))
        start = cut
    assert received == payloads
    assert decoder.buffered_bytes == 0


def test_one_byte_at_a_time():
    decoder = FrameDecoder(max_frame_bytes=10)
    stream = _framed(b"abc") + _framed(b"") + _framed(b"0123456789")
    received = []
    for i in range(len(stream)):
        received.extend(decoder.frames(stream[i : i + 1]))
    assert received == [b"abc", b"", b"0123456789"]


@pytest.mark.parametrize("size", [-1, -(2**31), 11, 2**31 - 1])
def test_negative_or_oversized_frame_is_a_typed_error(size):
    decoder = FrameDecoder(max_frame_bytes=10)
    decoder.feed(size.to_bytes(4, "big", signed=True) + b"x")
    with pytest.raises(InvalidFrameError) as excinfo:
        decoder.next_frame()
    assert isinstance(excinfo.value, KafkaError)


def test_frame_exactly_at_the_limit_is_accepted():
    decoder = FrameDecoder(max_frame_bytes=5)
    assert decoder.frames(_framed(b"12345")) == [b"12345"]


def test_large_backlog_is_compacted():
    decoder = FrameDecoder(max_frame_bytes=1 << 20)
    payload = b"x" * 4000
    stream = _framed(payload) * 40
    decoder.feed(stream)
    for _ in range(40):
        assert decoder.next_frame() == payload
    assert decoder.buffered_bytes == 0


@pytest.mark.parametrize("client_id", [None, "", "kafka-python-3.0.12", "ü"])
@pytest.mark.parametrize("flexible", [False, True])
def test_request_header_round_trip(client_id, flexible):
    header = RequestHeader(api_key=3, api_version=12, correlation_id=-7, client_id=client_id)
    data = encode_request_header(header, flexible) + b"body"
    decoded, position = read_request_header(data, flexible)
    assert decoded == header
    assert data[position:] == b"body"


def test_flexible_request_header_skips_unknown_tags():
    header = RequestHeader(18, 3, 1, "rdkafka")
    # two tagged fields: tag 0 of 2 bytes, tag 5 of 0 bytes
    data = encode_request_header(header, False) + b"\x02\x00\x02ab\x05\x00" + b"body"
    decoded, position = read_request_header(data, flexible=True)
    assert decoded == header and data[position:] == b"body"


def test_client_id_stays_int16_length_in_header_v2():
    data = encode_request_header(RequestHeader(18, 3, 9, "ab"), flexible=True)
    assert data == b"\x00\x12\x00\x03\x00\x00\x00\x09\x00\x02ab\x00"


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00\x01", b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x05ab", b"\x00" * 8 + b"\xff\xfe"],
)
def test_truncated_request_header_is_a_typed_error(data):
    with pytest.raises(InvalidRequestError):
        read_request_header(data)


def test_response_header_versions():
    assert response_header_version(18, flexible=True) == 0  # ApiVersions: always v0
    assert response_header_version(60, flexible=True) == 1
    assert response_header_version(0, flexible=False) == 0
    assert encode_response_header(5, 0) == b"\x00\x00\x00\x05"
    assert encode_response_header(5, 1) == b"\x00\x00\x00\x05\x00"
    assert read_response_header(b"\x00\x00\x00\x05\x00rest", 1) == (5, 5)


@settings(max_examples=100, deadline=None)
@given(
    api_key=st.integers(-(2**15), 2**15 - 1),
    api_version=st.integers(-(2**15), 2**15 - 1),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    client_id=st.none() | st.text(max_size=10),
    flexible=st.booleans(),
)
def test_header_codecs_match_the_construct_reference(
    api_key, api_version, correlation_id, client_id, flexible
):
    from log.protocol.wire_construct import request_header, response_header

    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    reference = request_header(2 if flexible else 1)
    fields = {
        "api_key": api_key,
        "api_version": api_version,
        "correlation_id": correlation_id,
        "client_id": client_id,
        "_tagged_fields": None,
    }
    data = encode_request_header(header, flexible)
    assert reference.build(fields) == data
    parsed = reference.parse(data)
    assert (
        RequestHeader(parsed.api_key, parsed.api_version, parsed.correlation_id, parsed.client_id)
        == header
    )
    for version in (0, 1):
        built = response_header(version).build(
            {"correlation_id": correlation_id, "_tagged_fields": None}
        )
        assert built == encode_response_header(correlation_id, version)
