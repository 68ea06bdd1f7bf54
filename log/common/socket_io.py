"""Socket reads and vectored writes on a trio SocketStream's descriptor, one system call each.

The broker's connections and the followers' fetch connections answer one request at a time:
when they read, the peer has usually not written yet. trio's socket methods try the call
first, and a call that succeeds at once ends with a scheduler checkpoint; so a read costs a
failed `recv` (EAGAIN raised as an exception) before its wait, and every write a trip through
the scheduler. Here a read waits for readiness first and then reads once; a write writes at once
and waits only when the kernel's buffer is full. Both still wait through trio (epoll), so they
are cancellable there (an idle connection's sweep, a request timeout). A caller that has not
waited yet checkpoints elsewhere: the broker takes its send lock before it writes.

Errors are the OS's (ECONNRESET, EPIPE: OSError), as from the raw socket calls they replace;
b"" is end of stream. Only plain TCP streams: TLS goes through its SSLStream.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable

import trio

MAX_IOV = 512  # parts per writev (IOV_MAX is 1024 on Linux)


def receiver(stream: trio.abc.Stream) -> Callable[[int], Awaitable[bytes | bytearray]]:
    """`receive(max_bytes)` for `stream`: receive_some on its descriptor for plain TCP, the
    stream's own receive_some otherwise (TLS)."""
    if isinstance(stream, trio.SocketStream):
        return functools.partial(receive_some, stream.socket.fileno())
    return stream.receive_some


async def receive_some(fd: int, max_bytes: int) -> bytes:
    """Wait until `fd` is readable, then read at most `max_bytes` (b"": the peer closed)."""
    while True:
        await trio.lowlevel.wait_readable(fd)
        try:
            return os.read(fd, max_bytes)
        except BlockingIOError:  # woken spuriously: wait again
            continue


async def receive_into(fd: int, view: memoryview) -> int:
    """Wait until `fd` is readable, then read into `view`: the bytes read (0: the peer closed)."""
    while True:
        await trio.lowlevel.wait_readable(fd)
        try:
            return os.readv(fd, [view])
        except BlockingIOError:  # woken spuriously: wait again
            continue


async def write_all(fd: int, views: list[memoryview]) -> None:
    """Write every view in order with vectored writes (`views` is consumed); handles partial
    writes and a full send buffer."""
    first = 0
    while first < len(views):
        try:
            written = os.writev(fd, views[first : first + MAX_IOV])
        except BlockingIOError:
            await trio.lowlevel.wait_writable(fd)
            continue
        while written and first < len(views):
            if written >= len(views[first]):
                written -= len(views[first])
                first += 1
            else:
                views[first] = views[first][written:]
                written = 0
