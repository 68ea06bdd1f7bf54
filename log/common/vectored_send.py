"""Writing a list of buffers to a socket with vectored writes (writev), no joining copy.

Kafka's large payloads (a produce request's record batches, a fetch answer's records) travel
as memoryviews of buffers that already exist; the small encoded fields around them are
joined into one buffer each run (cheaper than a scatter-gather entry each). Used by the
broker's answers and the producer's requests.
"""

from __future__ import annotations

import trio

from log.common import socket_io

# Parts this large go out as they are (zero-copy record bytes); smaller ones are copied into
# one buffer, which costs less than a scatter-gather entry each.
ZERO_COPY_MIN_BYTES = 4096


async def send_parts(stream: trio.abc.Stream, parts: list) -> None:
    """Write `parts` (bytes / memoryviews) in order. Plain TCP: vectored writes on the socket's
    descriptor (log/common/socket_io.py), partial writes and a full send buffer handled; runs
    of small parts (the encoded fields around the records) are joined first, so a fetch
    response naming thousands of partitions goes out in a few buffers, not thousands. Any
    other stream (TLS): joined, then one send_all."""
    if isinstance(stream, trio.SocketStream):
        await socket_io.write_all(stream.socket.fileno(), coalesce_parts(parts))
    else:
        await stream.send_all(b"".join(parts))


def coalesce_parts(parts: list) -> list[memoryview]:
    """Memoryviews of `parts` in order, runs of parts below ZERO_COPY_MIN_BYTES joined."""
    views: list[memoryview] = []
    small: list = []
    for part in parts:
        size = len(part)
        if size >= ZERO_COPY_MIN_BYTES:
            if small:
                views.append(memoryview(b"".join(small)))
                small = []
            views.append(memoryview(part))
        elif size:
            small.append(part)
    if small:
        views.append(memoryview(b"".join(small)))
    return views
