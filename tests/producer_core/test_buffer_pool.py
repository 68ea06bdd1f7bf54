"""BufferPool: pooled reuse, FIFO blocking, wake-up order, timeouts (trio MockClock autojump)."""

import random

import pytest
import trio
import trio.testing

from log.common.errors import MessageTooLargeError
from producer.buffer_pool import BufferPool
from producer.errors import BufferExhaustedError, ProducerClosedError


def test_pooled_buffers_are_recycled():
    pool = BufferPool(total_memory_bytes=1024, pooled_size_bytes=256)
    first = pool.try_allocate_nowait(256)
    assert first is not None and len(first) == 256
    pool.deallocate(first)
    assert pool.free_buffer_count == 1
    assert pool.try_allocate_nowait(256) is first
    assert pool.available_memory_bytes == 768


def test_non_pooled_sizes_release_pooled_buffers_when_needed():
    pool = BufferPool(total_memory_bytes=1024, pooled_size_bytes=256)
    buffers = [pool.try_allocate_nowait(256) for _ in range(4)]
    assert pool.try_allocate_nowait(1) is None
    for buffer in buffers:
        pool.deallocate(buffer)
    assert pool.free_buffer_count == 4 and pool.unallocated_memory_bytes == 0
    big = pool.try_allocate_nowait(600)
    assert big is not None and len(big) == 600
    assert pool.free_buffer_count == 1  # three pooled buffers were released to make room
    assert pool.available_memory_bytes == 424
    pool.deallocate(big)
    assert pool.available_memory_bytes == 1024


def test_request_larger_than_total_memory_fails_at_once():
    pool = BufferPool(total_memory_bytes=1024, pooled_size_bytes=256)
    with pytest.raises(MessageTooLargeError, match="hard limit of 1024"):
        pool.try_allocate_nowait(1025)


async def test_request_larger_than_total_memory_fails_without_waiting(autojump_clock):
    pool = BufferPool(total_memory_bytes=1024, pooled_size_bytes=256)
    start = trio.current_time()
    with pytest.raises(MessageTooLargeError):
        await pool.allocate(4096, max_time_to_block_ms=60_000)
    assert trio.current_time() == start


async def test_allocate_times_out_after_max_block_ms(autojump_clock):
    pool = BufferPool(total_memory_bytes=512, pooled_size_bytes=256)
    held = pool.try_allocate_nowait(512)
    start = trio.current_time()
    with pytest.raises(BufferExhaustedError, match="within the configured max blocking time 250"):
        await pool.allocate(256, max_time_to_block_ms=250)
    assert trio.current_time() - start == pytest.approx(0.25)
    assert pool.queued_waiter_count == 0
    pool.deallocate(held)
    assert pool.available_memory_bytes == 512


async def test_waiters_are_woken_in_fifo_order(autojump_clock):
    pool = BufferPool(total_memory_bytes=512, pooled_size_bytes=256)
    held = [pool.try_allocate_nowait(256), pool.try_allocate_nowait(256)]
    order = []

    async def waiter(name, size):
        buffer = await pool.allocate(size, max_time_to_block_ms=10_000)
        order.append((name, trio.current_time()))
        await trio.sleep(1)
        pool.deallocate(buffer)

    async with trio.open_nursery() as nursery:
        for index, name in enumerate("abc"):
            nursery.start_soon(waiter, name, 256)
            await trio.testing.wait_all_tasks_blocked()
            assert pool.queued_waiter_count == index + 1
        # a newcomer must queue behind the waiters even though it could be served later
        assert pool.try_allocate_nowait(256) is None
        await trio.sleep(1)
        pool.deallocate(held.pop(0))
        await trio.sleep(1)
        pool.deallocate(held.pop(0))
    assert [name for name, _ in order] == ["a", "b", "c"]
    assert pool.available_memory_bytes == 512


async def test_large_waiter_accumulates_and_is_not_starved(autojump_clock):
    pool = BufferPool(total_memory_bytes=1000, pooled_size_bytes=100)
    held = [pool.try_allocate_nowait(100) for _ in range(10)]
    got = {}

    async def big():
        got["big"] = await pool.allocate(700, max_time_to_block_ms=10_000)

    async def small():
        got["small"] = await pool.allocate(100, max_time_to_block_ms=10_000)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(big)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(small)
        await trio.testing.wait_all_tasks_blocked()
        for _ in range(7):
            pool.deallocate(held.pop())
            await trio.testing.wait_all_tasks_blocked()
            if len(held) > 3:
                assert "big" not in got and "small" not in got
        assert len(got["big"]) == 700 and "small" not in got
        pool.deallocate(held.pop())
    assert len(got["small"]) == 100
    assert pool.allocated_bytes == 700 + 100 + 200


async def test_timed_out_waiter_returns_partial_memory_and_wakes_next(autojump_clock):
    pool = BufferPool(total_memory_bytes=1000, pooled_size_bytes=100)
    held = [pool.try_allocate_nowait(100) for _ in range(10)]
    results = {}

    async def big():
        try:
            await pool.allocate(900, max_time_to_block_ms=1_000)
        except BufferExhaustedError:
            results["big"] = "timeout"

    async def small():
        results["small"] = await pool.allocate(300, max_time_to_block_ms=5_000)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(big)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(small)
        await trio.testing.wait_all_tasks_blocked()
        for _ in range(3):
            pool.deallocate(held.pop())  # all taken by the big head waiter
        await trio.testing.wait_all_tasks_blocked()
        assert "small" not in results
    assert results["big"] == "timeout"
    assert len(results["small"]) == 300  # got the 300 bytes the big waiter gave back
    assert pool.available_memory_bytes == 0


async def test_cancelled_waiter_returns_memory(autojump_clock):
    pool = BufferPool(total_memory_bytes=300, pooled_size_bytes=100)
    held = [pool.try_allocate_nowait(100) for _ in range(3)]
    with trio.move_on_after(1):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pool.allocate, 300, 60_000)
            await trio.testing.wait_all_tasks_blocked()
            pool.deallocate(held.pop())
    assert pool.queued_waiter_count == 0
    assert pool.available_memory_bytes == 100


async def test_close_wakes_waiters(autojump_clock):
    pool = BufferPool(total_memory_bytes=100, pooled_size_bytes=100)
    pool.try_allocate_nowait(100)
    errors = []

    async def allocate():
        try:
            await pool.allocate(100, 60_000)
        except ProducerClosedError as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(allocate)
        await trio.testing.wait_all_tasks_blocked()
        pool.close()
    assert len(errors) == 1 and pool.queued_waiter_count == 0


@pytest.mark.parametrize("seed", range(5))
async def test_random_workload_keeps_accounting_and_returns_everything(seed, autojump_clock):
    rng = random.Random(seed)
    pool = BufferPool(total_memory_bytes=4096, pooled_size_bytes=512)
    outcomes = {"ok": 0, "timeout": 0}

    async def worker():
        for _ in range(30):
            size = 512 if rng.random() < 0.6 else rng.randrange(1, 3000)
            try:
                buffer = await pool.allocate(size, max_time_to_block_ms=rng.randrange(1, 400))
            except BufferExhaustedError:
                outcomes["timeout"] += 1
                continue
            assert len(buffer) == size
            outcomes["ok"] += 1
            await trio.sleep(rng.random() / 5)
            pool.deallocate(buffer)

    async with trio.open_nursery() as nursery:
        for _ in range(8):
            nursery.start_soon(worker)
    assert outcomes["ok"] > 0 and outcomes["timeout"] > 0, (seed, outcomes)
    assert pool.allocated_bytes == 0 and pool.queued_waiter_count == 0
    assert pool.available_memory_bytes == 4096
