"""log/common/socket_io.py over real connected sockets: every byte of a vectored write arrives in
order, also when the kernel's buffer fills (partial writes, a wait for writability); a read waits
for data, returns b"" at the peer's close and raises the OS error at a reset; a read is
cancellable while it waits (the broker's idle sweep cancels it)."""

from __future__ import annotations

import socket
import struct

import pytest
import trio

from log.common import socket_io


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    """Two ends of a real loopback TCP connection, non-blocking."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    for end in (client, server):
        end.setblocking(False)
    return client, server


def _pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    a, b = _tcp_pair()
    return (trio.SocketStream(trio.socket.from_stdlib_socket(a)),
            trio.SocketStream(trio.socket.from_stdlib_socket(b)))  # fmt: skip


async def _read_exactly(stream: trio.SocketStream, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = await socket_io.receive_some(stream.socket.fileno(), 1 << 16)
        assert chunk, "closed early"
        data += chunk
    return bytes(data)


async def test_vectored_write_larger_than_the_socket_buffer_arrives_whole_and_in_order():
    writer, reader = _pair()
    writer.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    reader.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    # More parts than one writev takes (MAX_IOV) and more bytes than the buffers hold, so the
    # write is partial, waits for the reader, and resumes mid-part.
    parts = [struct.pack(">I", i) * (i % 7 + 1) for i in range(socket_io.MAX_IOV * 3)]
    parts.append(b"z" * 1_000_000)
    expected = b"".join(parts)
    received: list[bytes] = []
    with trio.fail_after(60):  # a lost or doubled byte would leave the reader waiting
        async with trio.open_nursery() as nursery:

            async def read_all() -> None:
                received.append(await _read_exactly(reader, len(expected)))

            nursery.start_soon(read_all)
            await socket_io.write_all(writer.socket.fileno(), [memoryview(p) for p in parts])
            await writer.aclose()  # a doubled byte: the reader reads past the expected end
    assert received == [expected]
    assert await socket_io.receive_some(reader.socket.fileno(), 1) == b""  # nothing more
    await reader.aclose()


async def test_read_returns_empty_at_close_and_raises_at_reset():
    a, b = _pair()
    await socket_io.write_all(a.socket.fileno(), [memoryview(b"hello")])
    await a.aclose()
    assert await socket_io.receive_some(b.socket.fileno(), 100) == b"hello"
    assert await socket_io.receive_some(b.socket.fileno(), 100) == b""
    await b.aclose()

    c, d = _tcp_pair()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()  # linger 0: the peer sees a reset
    with pytest.raises(OSError):
        await socket_io.receive_some(d.fileno(), 100)
    d.close()


async def test_a_waiting_read_is_cancellable():
    a, b = _pair()
    with trio.move_on_after(0.05) as scope:
        await socket_io.receive_some(b.socket.fileno(), 100)  # nothing is ever written
    assert scope.cancelled_caught
    await a.aclose()
    await b.aclose()
