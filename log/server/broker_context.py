"""BrokerContext: what every request handler gets -- config, logs, metadata, controller.

Handlers are plain `async def handle_x(ctx, request) -> response body` functions; a handler
raises a `KafkaError` to fail the whole request with that code (broker.py answers it through
`error_response_body`), and returns per-partition error codes itself for partial failures.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import trio

from log.common.node_config import NodeConfig
from log.replication.fetch_session import FetchSessionCache
from log.replication.isr_manager import IsrManager
from log.server.collaborators import ControllerChannel, MetadataSource
from log.server.partitions import HostedPartitions
from log.server.producer_ids import ProducerIdDriver
from log.storage.manager import LogManager
from quorum.image import MetadataImage

MAX_ADMIN_WAIT_MS = 30_000  # longest an admin request waits for the local image to catch up


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclasses.dataclass
class BrokerContext:
    config: NodeConfig
    log_manager: LogManager
    metadata: MetadataSource
    controller: ControllerChannel
    partitions: HostedPartitions
    producer_ids: ProducerIdDriver
    advertised_api_keys: frozenset[int]
    clock_ms: Callable[[], int] = wall_clock_ms
    isr_manager: IsrManager | None = None  # set by KafkaServer: ISR expansions on fetch
    group_coordinator: Any = None  # GroupCoordinatorDriver, set by KafkaServer
    fetch_sessions: FetchSessionCache = dataclasses.field(default_factory=FetchSessionCache)

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def cluster_id(self) -> str:
        return self.config.props["cluster.id"]

    @property
    def image(self) -> MetadataImage:
        return self.metadata.image

    def sync_partitions(self) -> MetadataImage:
        """Apply the newest image to the hosted partitions (cheap when unchanged) and return it,
        so a handler never acts on partitions older than the image it answers from."""
        image = self.metadata.image
        if image is not self.partitions.image:
            self.partitions.apply_image(image, self.clock_ms())
        return image

    async def wait_until(self, predicate: Callable[[MetadataImage], bool], timeout_ms: int) -> bool:
        """Wait until the local image satisfies `predicate` (True) or `timeout_ms` passes."""
        timeout_s = min(max(timeout_ms, 0), MAX_ADMIN_WAIT_MS) / 1000
        with trio.move_on_after(timeout_s):
            image = self.sync_partitions()
            while not predicate(image):
                await self.metadata.wait_for_image(image.last_offset + 1)
                image = self.sync_partitions()
            return True
        return False
