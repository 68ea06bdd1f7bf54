"""ProducerIdManager: the broker side of producer-id allocation, sans-IO.

A broker hands out producer ids (InitProducerId) from a block of BLOCK_SIZE consecutive ids that
the active controller allocated to it (AllocateProducerIds, committed as a ProducerIdsRecord, so
no block is ever given out twice, across restarts and controller fail-over). When
PREFETCH_THRESHOLD of the current block is used, the manager asks for the next block; when the
current block is exhausted it switches to the prefetched one. With neither ready it answers
COORDINATOR_LOAD_IN_PROGRESS (retriable) instead of blocking.

Driver protocol (all calls from one thread / task)::

    action = manager.poll_action(now_ms)         # after every call, and on a timer
    if action: send AllocateProducerIds(action.broker_id, action.broker_epoch), then
        manager.on_block_allocated(first_producer_id, count)   or
        manager.on_allocation_failed(now_ms)                   (error / timeout)
    producer_id = manager.generate_producer_id() # may raise CoordinatorLoadInProgressError

States: no block -> (request in flight) -> current block -> (90 % used: request in flight)
-> current + prefetched block -> current exhausted: prefetched becomes current.
"""

from __future__ import annotations

from dataclasses import dataclass

from log.common.errors import CoordinatorLoadInProgressError

BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
PREFETCH_THRESHOLD = 0.9  # Kafka's ProducerIdManager.PidPrefetchThreshold
# Wait this long after a failed allocation before asking again: Kafka's
# ProducerIdManager.RetryBackoffMs. A producer that asks meanwhile is answered
# COORDINATOR_LOAD_IN_PROGRESS and retries, so a longer wait (1 s here once) only delays the
# first InitProducerId after a controller change.
RETRY_BACKOFF_MS = 50


@dataclass(frozen=True)
class ProducerIdBlock:
    first_producer_id: int
    count: int

    @property
    def next_block_first_id(self) -> int:
        return self.first_producer_id + self.count


@dataclass(frozen=True)
class AllocateProducerIdsAction:
    """Tells the driver to send AllocateProducerIds to the active controller."""

    broker_id: int
    broker_epoch: int


class ProducerIdManager:
    def __init__(self, broker_id: int, broker_epoch: int) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.current_block: ProducerIdBlock | None = None
        self.next_block: ProducerIdBlock | None = None
        self.next_producer_id = -1  # next id to hand out from current_block; -1: none yet
        self.request_in_flight = False
        self.retry_after_ms = 0
        self._highest_seen_end = 0  # exclusive end of the newest block accepted, never goes back

    def set_broker_epoch(self, broker_epoch: int) -> None:
        """After re-registration the broker epoch changes; later requests carry the new one."""
        self.broker_epoch = broker_epoch

    def _wants_block(self) -> bool:
        if self.next_block is not None:
            return False
        block = self.current_block
        if block is None or self.next_producer_id >= block.next_block_first_id:
            return True
        used = self.next_producer_id - block.first_producer_id
        return used >= block.count * PREFETCH_THRESHOLD

    def poll_action(self, now_ms: int) -> AllocateProducerIdsAction | None:
        """An allocation request to send now, at most one in flight (then it is marked sent)."""
        if self.request_in_flight or now_ms < self.retry_after_ms or not self._wants_block():
            return None
        self.request_in_flight = True
        return AllocateProducerIdsAction(self.broker_id, self.broker_epoch)

    def on_block_allocated(self, first_producer_id: int, count: int) -> bool:
        """Install a block from the controller. False (and ignored) when it overlaps anything
        seen before: a stale or duplicated response must never make an id be handed out twice."""
        self.request_in_flight = False
        if count <= 0 or first_producer_id < self._highest_seen_end:
            return False
        block = ProducerIdBlock(first_producer_id, count)
        self._highest_seen_end = block.next_block_first_id
        if (
            self.current_block is None
            or self.next_producer_id >= self.current_block.next_block_first_id
        ):
            self.current_block = block
            self.next_producer_id = block.first_producer_id
        else:
            self.next_block = block
        return True

    def on_allocation_failed(self, now_ms: int) -> None:
        self.request_in_flight = False
        self.retry_after_ms = now_ms + RETRY_BACKOFF_MS

    def generate_producer_id(self) -> int:
        """The next unused producer id; CoordinatorLoadInProgressError when none is ready yet."""
        block = self.current_block
        if block is None or self.next_producer_id >= block.next_block_first_id:
            if self.next_block is None:
                raise CoordinatorLoadInProgressError("no producer id block available yet")
            block = self.current_block = self.next_block
            self.next_block = None
            self.next_producer_id = block.first_producer_id
        producer_id = self.next_producer_id
        self.next_producer_id += 1
        return producer_id
