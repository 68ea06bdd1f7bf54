"""BrokerContext: what every request handler gets -- config, logs, metadata, controller, the
replica manager and the coordinators (group and transaction). KafkaServer builds it whole, once, before it serves.

Handlers are plain `async def handle_x(ctx, request) -> response body` functions; a handler
raises a `KafkaError` to fail the whole request with that code (broker.py answers it through
`error_response_body`), and returns per-partition error codes itself for partial failures.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable

import trio

from log.common.node_config import NodeConfig
from log.coordinator.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from log.coordinator.group_driver import GroupCoordinatorDriver
from log.coordinator.transaction_driver import TransactionCoordinatorDriver
from log.replication.fetch_session import FetchSessionCache
from log.replication.replica_manager import ReplicaManager
from log.server.authorization import Authorization
from log.server.broker_failure_view import BrokerFailureView
from log.server.producer_ids import ProducerIdDriver
from log.storage.manager import LogManager
from quorum.broker_interface import ControllerChannel, MetadataSource
from quorum.image import MetadataImage, PartitionRegistration

MAX_ADMIN_WAIT_MS = 30_000  # longest an admin request waits for the local image to catch up


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclasses.dataclass(frozen=True)
class BrokerContext:
    config: NodeConfig
    log_manager: LogManager
    metadata: MetadataSource
    controller: ControllerChannel
    replica_manager: ReplicaManager
    group_coordinator: GroupCoordinatorDriver
    producer_ids: ProducerIdDriver
    transaction_coordinator: TransactionCoordinatorDriver
    add_partitions_to_txn_manager: AddPartitionsToTxnManager
    fetch_sessions: FetchSessionCache
    advertised_api_keys: frozenset[int]
    # Metadata around a broker's death: held for the new leader, the dead broker still listed
    broker_failure_view: BrokerFailureView
    clock_ms: Callable[[], int] = wall_clock_ms
    # authorizer.class.name & co. (log/server/authorization.py); none configured: all allowed
    authorization: Authorization = dataclasses.field(default_factory=lambda: Authorization({}))

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def cluster_id(self) -> str:
        return self.config.props["cluster.id"]

    @property
    def image(self) -> MetadataImage:
        return self.metadata.image

    async def wait_until(self, predicate: Callable[[MetadataImage], bool], timeout_ms: int) -> bool:
        """Wait until the local image satisfies `predicate` (True) or `timeout_ms` passes."""
        timeout_s = min(max(timeout_ms, 0), MAX_ADMIN_WAIT_MS) / 1000
        with trio.move_on_after(timeout_s):
            image = self.replica_manager.sync()
            while not predicate(image):
                await self.metadata.wait_for_image(image.last_offset + 1)
                image = self.replica_manager.sync()
            return True
        return False

    async def await_new_leaders(
        self,
        image: MetadataImage,
        names: Iterable[str] | None = None,
        partitions: Iterable[tuple[str, int]] | None = None,
    ) -> MetadataImage:
        """The image to act on: `image`, or a newer one when one of the topics `names` (None:
        every topic), or of `partitions` when given, is led by a broker this node's replica
        fetchers just lost: the controller is about to fence it and elect another (perhaps
        this node), so the answer waits for that, for up to the failure view's hold
        (log/server/broker_failure_view.py)."""
        fetchers, view = self.replica_manager.fetcher_manager, self.broker_failure_view
        unreachable = fetchers.unreachable_brokers() if view.hold_ms > 0 else None
        if not unreachable:
            return image  # before `names` or `partitions` is iterated: either may be a generator
        names = None if names is None else list(names)
        partitions = None if partitions is None else list(partitions)
        until_ms = view.hold_until_ms(image, names, unreachable, self.clock_ms(), partitions)
        if until_ms is None:
            return image

        def settled(newer: MetadataImage) -> bool:
            lost = fetchers.unreachable_brokers()
            return view.hold_until_ms(newer, names, lost, self.clock_ms(), partitions) is None

        await self.wait_until(settled, until_ms - self.clock_ms())
        return self.replica_manager.sync()

    async def wait_for_partitions(
        self,
        partitions: list[tuple[str, int]],
        ready: Callable[[str, int, PartitionRegistration], bool],
        timeout_ms: int,
    ) -> bool:
        """Wait until every (topic, partition) is `ready` in the local image (one deleted
        meanwhile counts as ready: nothing to wait for), or `timeout_ms` passes (False)."""

        def visible(image: MetadataImage) -> bool:
            for name, index in partitions:
                topic = image.topic(name)
                state = None if topic is None else topic.partitions.get(index)
                if state is not None and not ready(name, index, state):
                    return False
            return True

        return not partitions or await self.wait_until(visible, timeout_ms)
