"""RequestMemory: the node-wide bound on bytes of requests being received (Kafka's
`queued.max.request.bytes`), so that many clients each announcing a large frame and sending it
slowly cannot make the broker hold gigabytes of partial requests.

    memory = RequestMemory(limit_bytes)
    await memory.reserve(n)   # before reading the rest of an announced n-byte frame
    memory.release(n)         # once its response is written (or the connection ends)

A connection whose announced frame does not fit waits (it is not read: back-pressure, as
Kafka mutes a channel when its memory pool is exhausted) until others release. One frame may
always proceed when nothing else is held, even above the limit, so a single large request
(up to `socket.request.max.bytes`) never waits forever.
"""

from __future__ import annotations

import trio


class RequestMemory:
    def __init__(self, limit_bytes: int) -> None:
        assert limit_bytes > 0
        self.limit_bytes = limit_bytes
        self.used_bytes = 0
        self.waiting = 0  # connections waiting for memory now (a gauge)
        self._freed = trio.Event()

    def try_reserve(self, size: int) -> bool:
        if self.used_bytes and self.used_bytes + size > self.limit_bytes:
            return False
        self.used_bytes += size
        return True

    async def reserve(self, size: int) -> None:
        if self.try_reserve(size):
            return
        self.waiting += 1
        try:
            while not self.try_reserve(size):
                await self._freed.wait()
        finally:
            self.waiting -= 1

    def release(self, size: int) -> None:
        if size <= 0:
            return
        self.used_bytes -= size
        assert self.used_bytes >= 0
        freed, self._freed = self._freed, trio.Event()
        freed.set()
