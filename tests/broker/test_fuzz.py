"""Protocol fuzzing against a running in-process broker: whatever arrives, the broker answers
or closes the connection, never dies, and data written before the fuzzing reads back intact.

The broker runs in the test's trio loop; the fuzzer (hypothesis, modest example counts, seeded
by hypothesis' database-free derandomized mode) runs in a worker thread on blocking sockets:
each example opens a connection, sends its bytes, half-closes, and reads until the broker
closes (a deadline turns a hang into a failure).
"""

from __future__ import annotations

import socket
import struct

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from log.common.errors import ErrorCode
from log.protocol.apis import APIS
from log.protocol.framing import RequestHeader, encode_request_header
from log.records.batch_header import iter_batches
from log.records.builder import Record, build_batch
from tests.broker.conftest import WireClient, fetch_body, produce_body

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
# CreateTopics/CreatePartitions with a random partition count could make thousands of logs.
FUZZED_API_KEYS = sorted(set(APIS) - {19, 37})


def exchange(port: int, data: bytes) -> bytes:
    """Send `data`, half-close, read until the broker closes; at most 5 s."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            return b""  # the broker closed first: fine
        received = bytearray()
        while True:
            try:
                chunk = sock.recv(1 << 16)
            except ConnectionResetError:
                return bytes(received)
            if not chunk:
                return bytes(received)
            received += chunk


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def header(api_key: int, version: int) -> bytes:
    api = APIS[api_key]
    flexible = api.request.is_flexible(version)
    return encode_request_header(RequestHeader(api_key, version, 7, "fuzz"), flexible)


def fuzz(port: int) -> None:
    @SETTINGS
    @given(st.binary(max_size=300))
    def raw_bytes(data):
        exchange(port, data)

    @SETTINGS
    @given(st.binary(max_size=300))
    def framed_garbage(data):
        exchange(port, frame(data))

    @SETTINGS
    @given(st.sampled_from(FUZZED_API_KEYS), st.integers(-1, 15), st.binary(max_size=200))
    def header_then_garbage(api_key, version, body):
        exchange(port, frame(header(api_key, version) + body))

    @SETTINGS
    @given(
        st.sampled_from(["fuzzed", "fz-other", "", "x" * 300]),
        st.integers(-2, 3),
        st.integers(-3, 3),
        st.integers(0, 200),
        st.integers(0, 255),
        st.booleans(),
    )
    def mutated_produce(topic, partition, acks, flip_at, flip_mask, truncate):
        records = bytearray(build_batch([Record(b"fuzz")]))
        if flip_at < len(records):
            records[flip_at] ^= flip_mask
        if truncate:
            records = records[: len(records) // 2]
        client = WireClient.__new__(WireClient)
        from log.protocol.client_codec import ClientCodec

        client.codec = ClientCodec("fuzz")
        body = produce_body(topic, partition, bytes(records), acks=acks)
        exchange(port, client.codec.encode_request(0, 8, body, expect_response=acks != 0))

    @SETTINGS
    @given(
        st.sampled_from(["fuzzed", "nope", ""]),
        st.integers(-3, 3),
        st.integers(-(2**63), 2**63 - 1),
        st.integers(-(2**31), 2**31 - 1),
        st.integers(-(2**31), 2**31 - 1),
        st.integers(-5, 50),
        st.integers(-(2**31), 2**31 - 1),
        st.integers(-1, 1),
        st.integers(4, 11),
    )
    def mutated_fetch(topic, partition, offset, max_bytes, partition_max_bytes, max_wait_ms,
                      epoch, session_epoch, version):  # fmt: skip
        from log.protocol.client_codec import ClientCodec

        body = fetch_body(topic, partition, offset, max_wait_ms=max_wait_ms, min_bytes=1 << 30,
                          current_leader_epoch=epoch)  # fmt: skip
        fields = {f: getattr(body, f) for f in body.__dataclass_fields__}
        part = body.topics[0].partitions[0]
        part = type(part)(**{**{f: getattr(part, f) for f in part.__dataclass_fields__},
                             "partition_max_bytes": partition_max_bytes})  # fmt: skip
        body = type(body)(**{**fields, "max_bytes": max_bytes, "session_epoch": session_epoch,
                             "topics": [type(body.topics[0])(topic=topic, partitions=[part])]})  # fmt: skip
        answer = exchange(port, ClientCodec("fuzz").encode_request(1, version, body))
        assert answer, "a fetch is always answered"

    for test in (raw_bytes, framed_garbage, header_then_garbage, mutated_produce, mutated_fetch):
        test()


async def test_fuzz_never_kills_the_broker(broker):
    await broker.create_topic("fuzzed", 2)
    client = await WireClient.connect(broker.port)
    original = build_batch([Record(b"keep-%d" % i) for i in range(10)])
    body = await client.call(0, 8, produce_body("fuzzed", 1, original))
    assert body.responses[0].partition_responses[0].error_code == 0
    await client.aclose()

    await trio.to_thread.run_sync(fuzz, broker.port)

    client = await WireClient.connect(broker.port)
    data = (await client.call(1, 11, fetch_body("fuzzed", 1, 0))).responses[0].partitions[0]
    assert data.error_code == ErrorCode.NONE
    (_, first), *_ = list(iter_batches(bytes(data.records)))
    assert first.base_offset == 0 and first.record_count == 10
    stored = bytes(data.records)[: first.size_bytes]
    assert stored[21:] == original[21:]  # everything under the CRC is what the client sent
    await client.aclose()
