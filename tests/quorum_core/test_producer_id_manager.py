import random

import pytest

from log.common.errors import CoordinatorLoadInProgressError, ErrorCode
from quorum.producer_id_manager import (
    BLOCK_SIZE,
    RETRY_BACKOFF_MS,
    AllocateProducerIdsAction,
    ProducerIdManager,
)


def test_first_id_needs_a_block():
    manager = ProducerIdManager(broker_id=1, broker_epoch=7)
    with pytest.raises(CoordinatorLoadInProgressError) as info:
        manager.generate_producer_id()
    assert info.value.retriable and info.value.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert manager.poll_action(0) == AllocateProducerIdsAction(1, 7)
    assert manager.poll_action(0) is None  # one request in flight at most
    assert manager.on_block_allocated(0, BLOCK_SIZE)
    assert [manager.generate_producer_id() for _ in range(3)] == [0, 1, 2]


def test_prefetch_at_ninety_percent_and_switch_to_the_next_block():
    manager = ProducerIdManager(1, 7)
    manager.poll_action(0)
    manager.on_block_allocated(5000, BLOCK_SIZE)
    threshold = int(BLOCK_SIZE * 0.9)
    for i in range(threshold):
        assert manager.generate_producer_id() == 5000 + i
        if i < threshold - 1:
            assert manager.poll_action(0) is None, i
    assert manager.poll_action(0) is not None  # 900 of 1000 used: prefetch now
    manager.on_block_allocated(9000, BLOCK_SIZE)
    ids = [manager.generate_producer_id() for _ in range(BLOCK_SIZE - threshold + 2)]
    assert ids[-3:] == [5999, 9000, 9001]


def test_exhausted_without_next_block_is_retriable_then_recovers():
    manager = ProducerIdManager(1, 7)
    manager.poll_action(0)
    manager.on_block_allocated(0, 10)
    assert [manager.generate_producer_id() for _ in range(10)] == list(range(10))
    with pytest.raises(CoordinatorLoadInProgressError):
        manager.generate_producer_id()
    manager.on_allocation_failed(now_ms=100)
    assert manager.poll_action(100 + RETRY_BACKOFF_MS - 1) is None  # backing off
    assert manager.poll_action(100 + RETRY_BACKOFF_MS) is not None
    manager.on_block_allocated(10, 10)
    assert manager.generate_producer_id() == 10


def test_stale_or_overlapping_blocks_are_ignored():
    manager = ProducerIdManager(1, 7)
    manager.on_block_allocated(1000, BLOCK_SIZE)
    assert not manager.on_block_allocated(1500, BLOCK_SIZE)  # overlaps the current block
    assert not manager.on_block_allocated(0, BLOCK_SIZE)  # older
    assert not manager.on_block_allocated(5000, 0)


def test_no_duplicate_ids_over_many_blocks_with_a_slow_controller():
    rng = random.Random(42)
    manager = ProducerIdManager(3, 1)
    next_block_start = 0
    pending: list[int] = []
    seen: set[int] = set()
    now_ms = 0
    stalls = 0
    while len(seen) < 30 * BLOCK_SIZE:
        now_ms += 1
        if manager.poll_action(now_ms) is not None:
            pending.append(now_ms)
        if pending and rng.random() < 0.02:  # the controller answers late, sometimes fails
            pending.pop()
            if rng.random() < 0.1:
                manager.on_allocation_failed(now_ms)
            else:
                assert manager.on_block_allocated(next_block_start, BLOCK_SIZE)
                next_block_start += BLOCK_SIZE + rng.choice([0, 0, 1000])  # others' blocks between
        try:
            producer_id = manager.generate_producer_id()
        except CoordinatorLoadInProgressError:
            stalls += 1
            continue
        assert producer_id not in seen
        seen.add(producer_id)
    assert stalls > 0  # the slow controller path was exercised
