"""ProducerIdDriver: drives the sans-IO `quorum.producer_id_manager.ProducerIdManager`.

InitProducerId takes the next id from the current block. The first request (no block yet)
allocates a block inline through `ControllerChannel.allocate_producer_ids`, bounded by
ALLOCATION_TIMEOUT_MS; once 90 % of a block is used the next block is prefetched in the
background (in the server's nursery), so steady-state requests never wait. When no block can be
had the request fails with COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from log.common.errors import CoordinatorLoadInProgressError, ErrorCode, KafkaError
from quorum.broker_interface import ControllerChannel
from quorum.controller import AllocateProducerIdsRequest
from quorum.producer_id_manager import AllocateProducerIdsAction, ProducerIdManager

logger = logging.getLogger(__name__)

ALLOCATION_TIMEOUT_MS = 5_000


class ProducerIdDriver:
    def __init__(
        self,
        broker_id: int,
        controller: ControllerChannel,
        broker_epoch_getter: Callable[[], int],
        clock_ms: Callable[[], int],
    ) -> None:
        self.manager = ProducerIdManager(broker_id, broker_epoch_getter())
        self.controller = controller
        self.broker_epoch_getter = broker_epoch_getter
        self.clock_ms = clock_ms
        self.nursery: trio.Nursery | None = None  # set by KafkaServer.run for prefetches

    async def _allocate(self, action: AllocateProducerIdsAction) -> None:
        try:
            with trio.fail_after(ALLOCATION_TIMEOUT_MS / 1000):
                response = await self.controller.allocate_producer_ids(
                    AllocateProducerIdsRequest(action.broker_id, action.broker_epoch)
                )
        except (KafkaError, trio.TooSlowError) as exc:
            logger.warning("AllocateProducerIds failed: %r", exc)
            self.manager.on_allocation_failed(self.clock_ms())
            return
        if response.error_code != ErrorCode.NONE:
            logger.warning("AllocateProducerIds answered %s", response.error_code)
            self.manager.on_allocation_failed(self.clock_ms())
            return
        self.manager.on_block_allocated(response.producer_id_start, response.producer_id_len)

    def _poll(self) -> AllocateProducerIdsAction | None:
        self.manager.set_broker_epoch(self.broker_epoch_getter())
        return self.manager.poll_action(self.clock_ms())

    async def generate_producer_id(self) -> int:
        try:
            producer_id = self.manager.generate_producer_id()
        except CoordinatorLoadInProgressError:
            action = self._poll()
            if action is None:
                raise
            await self._allocate(action)
            producer_id = self.manager.generate_producer_id()
        action = self._poll()
        if action is not None:
            if self.nursery is not None:
                self.nursery.start_soon(self._allocate, action)
            else:
                await self._allocate(action)
        return producer_id

    def has_producer_id(self) -> bool:
        """True when `generate_producer_id_now` would succeed."""
        manager = self.manager
        block = manager.current_block
        current = block is not None and manager.next_producer_id < block.next_block_first_id
        return current or manager.next_block is not None

    async def ensure_producer_id(self) -> None:
        """Allocate the first block inline when none is here (the transaction coordinator's
        core takes ids synchronously, `generate_producer_id_now`, after this)."""
        if self.has_producer_id():
            return
        action = self._poll()
        if action is not None:
            await self._allocate(action)

    def generate_producer_id_now(self) -> int:
        """The next id without waiting (CoordinatorLoadInProgressError when no block is here);
        prefetches the next block in the background as `generate_producer_id` does."""
        producer_id = self.manager.generate_producer_id()
        action = self._poll()
        if action is not None and self.nursery is not None:
            self.nursery.start_soon(self._allocate, action)
        return producer_id
