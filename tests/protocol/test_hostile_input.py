"""Truncated, garbage and forged input raises our typed errors only, and cheaply."""

from __future__ import annotations

import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from log.common.errors import InvalidFrameError, InvalidRequestError
from log.protocol.apis import APIS
from log.protocol.connection import NEED_DATA, BadRequest, Request, ServerConnection
from log.protocol.fetch import FETCH_REQUEST
from log.protocol.metadata import METADATA_RESPONSE
from log.protocol.produce import PRODUCE_REQUEST

_MESSAGES = [
    pytest.param(message, version, id=f"{message.name}-v{version}")
    for api in APIS.values()
    for message in (api.request, api.response)
    for version in range(message.versions[0], message.versions[1] + 1)
]


@pytest.mark.parametrize(("message", "version"), _MESSAGES)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(garbage=st.binary(max_size=64))
def test_garbage_decodes_or_raises_invalid_request(message, version, garbage):
    try:
        message.decode(garbage, version)
    except InvalidRequestError:
        pass


def _produce_request() -> bytes:
    cls = PRODUCE_REQUEST.cls
    body = cls(
        transactional_id="tx",
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            cls.TopicProduceData(
                name="topic",
                partition_data=[
                    cls.PartitionProduceData(index=i, records=b"r" * 20) for i in range(3)
                ],
            )
        ],
    )
    return PRODUCE_REQUEST.encode(body, 8)


def test_every_truncation_of_a_valid_request_is_typed():
    data = _produce_request()
    for end in range(len(data)):
        with pytest.raises(InvalidRequestError):
            PRODUCE_REQUEST.decode(data[:end], 8)


@settings(max_examples=150, deadline=None)
@given(position=st.integers(0, 200), byte=st.integers(0, 255))
def test_flipped_bytes_are_typed(position, byte):
    data = bytearray(_produce_request())
    data[position % len(data)] = byte
    try:
        PRODUCE_REQUEST.decode(bytes(data), 8)
    except InvalidRequestError:
        pass


@pytest.mark.parametrize("count", [2**31 - 1, 100_000_000, 5])
def test_forged_array_counts_fail_before_allocating(count):
    # transactional_id null, acks, timeout, then a topic count far beyond the 2 bytes left
    data = struct.pack(">hhii", -1, 1, 1000, count) + b"\x00\x00"
    started = time.perf_counter()
    with pytest.raises(InvalidRequestError, match="cannot fit"):
        PRODUCE_REQUEST.decode(data, 8)
    assert time.perf_counter() - started < 0.05


def test_forged_primitive_array_count():
    # Metadata v1 response: brokers [], controller, topics [error, name, internal,
    # partitions [error, index, leader, replica_nodes count = 2**30]]
    data = (
        struct.pack(">i", 0)
        + struct.pack(">i", 1)
        + struct.pack(">i", 1)
        + struct.pack(">hh", 0, 1) + b"t" + b"\x00"
        + struct.pack(">i", 1)
        + struct.pack(">hii", 0, 0, 1)
        + struct.pack(">i", 2**30)
    )  # fmt: skip
    with pytest.raises(InvalidRequestError, match="cannot fit"):
        METADATA_RESPONSE.decode(data, 1)


def test_forged_string_and_bytes_lengths():
    with pytest.raises(InvalidRequestError):
        PRODUCE_REQUEST.decode(struct.pack(">h", 30000) + b"abc", 8)
    with pytest.raises(InvalidRequestError):
        PRODUCE_REQUEST.decode(struct.pack(">h", -5) + b"abc", 8)  # -5 is not null
    body = struct.pack(">hhii", -1, 1, 1000, 1) + struct.pack(">h", 1) + b"t"
    body += struct.pack(">ii", 1, 0) + struct.pack(">i", 2**31 - 1) + b"abc"
    with pytest.raises(InvalidRequestError, match="past the frame end"):
        PRODUCE_REQUEST.decode(body, 8)


def test_non_nullable_null_is_typed():
    # Fetch v4: a topic name of length -1
    data = (
        struct.pack(">iiiib", -1, 500, 1, 1 << 20, 0) + struct.pack(">i", 1) + struct.pack(">h", -1)
    ) + bytes(8)
    with pytest.raises(InvalidRequestError, match="null"):
        FETCH_REQUEST.decode(data, 4)


def test_invalid_utf8_is_typed():
    data = struct.pack(">h", 2) + b"\xff\xfe" + struct.pack(">hi", 1, 1000) + struct.pack(">i", 0)
    with pytest.raises(InvalidRequestError):
        PRODUCE_REQUEST.decode(data, 8)


@settings(max_examples=200, deadline=None)
@given(stream=st.binary(max_size=300))
def test_server_connection_on_garbage_never_raises_untyped(stream):
    conn = ServerConnection(max_frame_bytes=256, max_in_flight=1000)
    conn.receive_data(stream)
    try:
        while True:
            event = conn.next_request()
            if event is NEED_DATA:
                break
            if isinstance(event, BadRequest) and event.close_connection:
                break
            assert isinstance(event, Request | BadRequest)
    except InvalidFrameError:
        pass


@settings(max_examples=100, deadline=None)
@given(
    api_key=st.sampled_from(sorted(APIS)), version=st.integers(-2, 20), tail=st.binary(max_size=80)
)
def test_server_connection_on_valid_headers_with_garbage_bodies(api_key, version, tail):
    payload = struct.pack(">hhih", api_key, version, 42, 3) + b"cli" + tail
    conn = ServerConnection(max_frame_bytes=1024)
    conn.receive_data(struct.pack(">i", len(payload)) + payload)
    event = conn.next_request()
    assert isinstance(event, Request | BadRequest)
