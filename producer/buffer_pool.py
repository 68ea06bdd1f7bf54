"""BufferPool: the producer's bounded memory, `buffer.memory` bytes in total.

Memory is held in two forms: a free list of pooled buffers of exactly `batch.size` bytes
(recycled without reallocation, the common case) and a count of non-pooled available bytes
(allocated fresh for odd sizes). Invariant, asserted after every operation::

    non_pooled_available_bytes + len(free) * pooled_size_bytes
        + allocated_bytes + bytes accumulated by waiters == total_memory_bytes

`allocate` takes a pooled buffer when the size matches, else carves bytes out of the non-pooled
count (releasing pooled buffers into it if needed). When memory is short the caller queues in
FIFO order and waits on its own `trio.Event` (no polling): each `deallocate` wakes the first
waiter, which takes what is free (accumulating partial memory across wake-ups so a large request
is not starved by small ones) and, once satisfied, wakes the next waiter if memory remains. A
waiter that times out after `max_time_to_block_ms` returns what it accumulated and raises
`BufferExhaustedError`; a request larger than the whole pool fails at once.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

import trio

from log.common.errors import MessageTooLargeError
from producer.errors import BufferExhaustedError, ProducerClosedError


@dataclass(slots=True, eq=False)
class _Waiter:
    size_bytes: int
    accumulated_bytes: int = 0
    event: trio.Event = field(default_factory=trio.Event)


class BufferPool:
    def __init__(self, total_memory_bytes: int, pooled_size_bytes: int) -> None:
        assert total_memory_bytes > 0 and 0 <= pooled_size_bytes <= total_memory_bytes
        self.total_memory_bytes = total_memory_bytes
        self.pooled_size_bytes = pooled_size_bytes
        self._free: collections.deque[bytearray] = collections.deque()
        self._non_pooled_available_bytes = total_memory_bytes
        self._allocated_bytes = 0
        self._waiters: collections.deque[_Waiter] = collections.deque()
        self._closed = False

    # -- observation --------------------------------------------------------------------------

    @property
    def available_memory_bytes(self) -> int:
        """Free bytes, pooled and non-pooled (Kafka's availableMemory)."""
        return self._non_pooled_available_bytes + len(self._free) * self.pooled_size_bytes

    @property
    def unallocated_memory_bytes(self) -> int:
        return self._non_pooled_available_bytes

    @property
    def allocated_bytes(self) -> int:
        return self._allocated_bytes

    @property
    def free_buffer_count(self) -> int:
        return len(self._free)

    @property
    def queued_waiter_count(self) -> int:
        """Callers blocked for memory; the accumulator treats > 0 as 'exhausted'."""
        return len(self._waiters)

    # -- allocation -----------------------------------------------------------------------------

    def try_allocate_nowait(self, size_bytes: int) -> bytearray | None:
        """A buffer of `size_bytes` if it is available without waiting (and nobody queues)."""
        self._check_request(size_bytes)
        if self._waiters:
            return None
        buffer = self._take_now(size_bytes)
        self._check_invariant()
        return buffer

    async def allocate(self, size_bytes: int, max_time_to_block_ms: int) -> bytearray:
        """A buffer of `size_bytes`, waiting FIFO up to `max_time_to_block_ms` for memory."""
        buffer = self.try_allocate_nowait(size_bytes)
        if buffer is not None:
            return buffer
        waiter = _Waiter(size_bytes)
        self._waiters.append(waiter)
        buffer = None
        try:
            with trio.move_on_after(max_time_to_block_ms / 1000):
                while True:
                    if self._closed:
                        raise ProducerClosedError("producer closed while allocating memory")
                    if self._waiters[0] is waiter:
                        buffer = self._feed(waiter)
                        if buffer is not None:
                            break
                    await waiter.event.wait()
                    waiter.event = trio.Event()
        finally:
            self._waiters.remove(waiter)
            if buffer is None:
                self._non_pooled_available_bytes += waiter.accumulated_bytes
                waiter.accumulated_bytes = 0
            self._wake_first()
            self._check_invariant()
        if buffer is None:
            raise BufferExhaustedError(
                f"failed to allocate {size_bytes} bytes within the configured max blocking "
                f"time {max_time_to_block_ms} ms; total memory {self.total_memory_bytes} bytes, "
                f"batch size {self.pooled_size_bytes} bytes"
            )
        return buffer

    def deallocate(self, buffer: bytearray, size_bytes: int | None = None) -> None:
        """Return `buffer` (of `size_bytes`, default its length) and wake the first waiter."""
        size_bytes = len(buffer) if size_bytes is None else size_bytes
        assert 0 < size_bytes <= self._allocated_bytes, (size_bytes, self._allocated_bytes)
        self._allocated_bytes -= size_bytes
        if size_bytes == self.pooled_size_bytes and len(buffer) == self.pooled_size_bytes:
            self._free.append(buffer)
        else:
            self._non_pooled_available_bytes += size_bytes
        self._wake_first()
        self._check_invariant()

    def close(self) -> None:
        """Wake every waiter; they raise ProducerClosedError."""
        self._closed = True
        for waiter in self._waiters:
            waiter.event.set()

    # -- internals ------------------------------------------------------------------------------

    def _check_request(self, size_bytes: int) -> None:
        if self._closed:
            raise ProducerClosedError("producer closed while allocating memory")
        assert size_bytes > 0, size_bytes
        if size_bytes > self.total_memory_bytes:
            raise MessageTooLargeError(
                f"attempt to allocate {size_bytes} bytes, but there is a hard limit of "
                f"{self.total_memory_bytes} bytes (buffer.memory) on memory allocations"
            )

    def _take_now(self, size_bytes: int) -> bytearray | None:
        if size_bytes == self.pooled_size_bytes and self._free:
            self._allocated_bytes += size_bytes
            return self._free.popleft()
        if self.available_memory_bytes < size_bytes:
            return None
        self._free_up(size_bytes)
        self._non_pooled_available_bytes -= size_bytes
        self._allocated_bytes += size_bytes
        return bytearray(size_bytes)

    def _feed(self, waiter: _Waiter) -> bytearray | None:
        """Give the head waiter what memory is free; its buffer once it holds all it asked for."""
        if waiter.accumulated_bytes == 0 and waiter.size_bytes == self.pooled_size_bytes:
            if self._free:
                self._allocated_bytes += waiter.size_bytes
                return self._free.popleft()
        wanted = waiter.size_bytes - waiter.accumulated_bytes
        self._free_up(wanted)
        got = min(wanted, self._non_pooled_available_bytes)
        self._non_pooled_available_bytes -= got
        waiter.accumulated_bytes += got
        if waiter.accumulated_bytes < waiter.size_bytes:
            return None
        waiter.accumulated_bytes = 0  # handed over to the caller as allocated bytes
        self._allocated_bytes += waiter.size_bytes
        return bytearray(waiter.size_bytes)

    def _free_up(self, size_bytes: int) -> None:
        """Release pooled buffers into the non-pooled count until `size_bytes` are there."""
        while self._free and self._non_pooled_available_bytes < size_bytes:
            self._free.pop()
            self._non_pooled_available_bytes += self.pooled_size_bytes

    def _wake_first(self) -> None:
        if self._waiters:
            self._waiters[0].event.set()

    def _check_invariant(self) -> None:
        waiting = sum(w.accumulated_bytes for w in self._waiters)
        assert self._non_pooled_available_bytes >= 0
        assert (
            self._non_pooled_available_bytes
            + len(self._free) * self.pooled_size_bytes
            + self._allocated_bytes
            + waiting
            == self.total_memory_bytes
        ), "buffer pool accounting is broken"
