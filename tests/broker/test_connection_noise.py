"""Clients that misbehave at the socket level are expected, not errors: resets while the
broker writes its answer, garbage, truncated frames, oversized frames. The node logs each at
DEBUG/INFO once per connection with the peer address, never an ERROR or a traceback, and goes
on serving (issue 20: 400 such connections used to leave 200 ERROR lines and 3,000 lines of
tracebacks)."""

from __future__ import annotations

import logging
import socket
import struct

import trio

from log.protocol.client_codec import ClientCodec
from log.records.builder import Record, build_batch
from tests.broker.conftest import WireClient, fetch_body, produce_body

RESETS = 60
GARBAGE = 60


async def _reset_while_answered(port: int, frame: bytes) -> None:
    sock = trio.socket.socket()
    await sock.connect(("127.0.0.1", port))
    await sock.send(frame)
    # SO_LINGER 0: close sends a RST at once, while the broker is still writing its answer.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


async def _send_and_close(port: int, data: bytes) -> None:
    """Send, read whatever comes back for a moment, hang up (mid-frame for a truncated one)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    try:
        await stream.send_all(data)
        with trio.move_on_after(0.05):
            while await stream.receive_some(65536):
                pass
    except trio.BrokenResourceError:
        pass
    finally:
        await stream.aclose()


async def test_resets_and_garbage_log_no_error_and_the_broker_serves_on(broker, caplog):
    caplog.set_level(logging.DEBUG)
    await broker.create_topic("noise", 1)
    client = await WireClient.connect(broker.port)
    big = build_batch([Record(b"x" * 900_000)])
    await client.call(0, 8, produce_body("noise", 0, big))
    fetch = ClientCodec("noise").encode_request(1, 11, fetch_body("noise", 0, 0))
    async with trio.open_nursery() as nursery:
        for _ in range(RESETS):
            nursery.start_soon(_reset_while_answered, broker.port, fetch)
    garbage = [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # a frame size no request has
        struct.pack(">i", 12) + b"\x00\x01",  # truncated: the peer goes away mid-frame
        struct.pack(">i", 7) + b"\x00\x12\x00\x00\x00\x00\x01",  # a header that is cut short
        struct.pack(">i", 200_000_000),  # over socket.request.max.bytes
        struct.pack(">ihhi", 8, 999, 0, 1),  # an API key nobody has
    ]
    async with trio.open_nursery() as nursery:
        for i in range(GARBAGE):
            nursery.start_soon(_send_and_close, broker.port, garbage[i % len(garbage)])
    await trio.sleep(0.5)  # let the broker finish with every connection
    # It still serves, on the same listener.
    response = await client.call(1, 11, fetch_body("noise", 0, 0))
    assert response.responses[0].partitions[0].records
    await client.aclose()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors[:3]]
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert any("127.0.0.1:" in r.getMessage() for r in caplog.records
               if r.name == "log.server.broker")  # fmt: skip
