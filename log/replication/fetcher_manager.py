"""ReplicaFetcherManager: which fetcher task fetches which followed partition (Kafka's
AbstractFetcherManager).

A partition this broker follows is fetched by the fetcher keyed `(leader_id, fetcher_index)`,
`fetcher_index = hash(topic, partition) % num.replica.fetchers`: one fetch session per source
broker and index, so partitions from one leader share requests. Fetchers are started lazily in
the manager's nursery (`run`) and stopped when their last partition leaves.

    manager = ReplicaFetcherManager(config, num_replica_fetchers, endpoint_for, clock_ms)
    await nursery.start(manager.run)
    manager.add_partition(tp, log, leader_id, leader_epoch)   # becoming (or re-)follower
    manager.remove_partition(tp)                              # leader now, or not a replica

`add_partition` always restarts the partition in TRUNCATING (a new leader or leader epoch: the
caller only calls it for `StateChange.NEW_LEADER_EPOCH`). All calls come from the trio thread.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import trio

from log.replication.follower_state import FetcherState, FollowerState
from log.replication.replica_fetcher import (
    EndpointLookup,
    FetcherConfig,
    ReplicaFetcher,
    TopicPartition,
)
from log.replication.unified_replica_log import UnifiedReplicaLog
from log.storage.log import UnifiedLog
from quorum.image import MetadataImage

MAX_NUM_REPLICA_FETCHERS = 64


class ReplicaFetcherManager:
    def __init__(
        self,
        config: FetcherConfig,
        num_replica_fetchers: int,
        endpoint_for: EndpointLookup,
        clock_ms: Callable[[], int],
        on_high_watermark: Callable[[TopicPartition], None] = lambda tp: None,
        on_storage_error: Callable[[BaseException], None] = lambda exc: None,
        image: Callable[[], MetadataImage] = MetadataImage,
        broker_epoch: Callable[[], int] = lambda: -1,
    ) -> None:
        assert 0 < num_replica_fetchers <= MAX_NUM_REPLICA_FETCHERS
        self.config = config
        self.num_replica_fetchers = num_replica_fetchers
        self.endpoint_for = endpoint_for
        self.clock_ms = clock_ms
        self.on_high_watermark = on_high_watermark
        self.on_storage_error = on_storage_error  # a follower append/truncation failed
        self.image = image
        self.broker_epoch = broker_epoch
        self.fetchers: dict[tuple[int, int], tuple[ReplicaFetcher, trio.CancelScope]] = {}
        self._fetcher_for: dict[TopicPartition, tuple[int, int]] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None
                self.fetchers.clear()
                self._fetcher_for.clear()

    def fetcher_index(self, tp: TopicPartition) -> int:
        return zlib.crc32(f"{tp[0]}-{tp[1]}".encode()) % self.num_replica_fetchers

    def add_partition(
        self, tp: TopicPartition, log: UnifiedLog, leader_id: int, leader_epoch: int
    ) -> FollowerState | None:
        """Fetch `tp` from `leader_id` in `leader_epoch`, truncating first (None: the manager
        is not running -- the broker is shutting down -- and nothing will fetch)."""
        self.remove_partition(tp)
        if self._nursery is None:
            return None
        key = (leader_id, self.fetcher_index(tp))
        fetcher = self._fetcher(key)
        follower = FollowerState(self.config.replica_fetch_backoff_ms)
        follower.on_become_follower(leader_id, leader_epoch, UnifiedReplicaLog(log))
        fetcher.add_partition(tp, log, follower)
        self._fetcher_for[tp] = key
        return follower

    def remove_partition(self, tp: TopicPartition) -> None:
        key = self._fetcher_for.pop(tp, None)
        if key is None:
            return
        fetcher, cancel_scope = self.fetchers[key]
        fetcher.remove_partition(tp)
        if not fetcher.state.partitions:
            cancel_scope.cancel()
            del self.fetchers[key]

    def follower_state(self, tp: TopicPartition) -> FollowerState | None:
        key = self._fetcher_for.get(tp)
        if key is None:
            return None
        return self.fetchers[key][0].state.partitions.get(tp)

    def unreachable_brokers(self) -> dict[int, tuple[int, int]]:
        """Source brokers whose fetch connection failed with nothing answered since: broker
        id -> (when the failures began in ms, the broker's epoch in our image then)."""
        unreachable: dict[int, tuple[int, int]] = {}
        for (broker_id, _index), (fetcher, _scope) in self.fetchers.items():
            since = fetcher.unreachable_since_ms
            if since is not None and since < unreachable.get(broker_id, (since + 1,))[0]:
                unreachable[broker_id] = (since, fetcher.unreachable_broker_epoch)
        return unreachable

    def _fetcher(self, key: tuple[int, int]) -> ReplicaFetcher:
        entry = self.fetchers.get(key)
        if entry is not None:
            return entry[0]
        assert self._nursery is not None, "ReplicaFetcherManager.run is not running"
        fetcher = ReplicaFetcher(
            self.config,
            # v12+ fetches carry the last fetched epoch: the leader reports divergence
            FetcherState(key[0], self.config.replica_fetch_max_bytes, use_last_fetched_epoch=True),
            self.endpoint_for,
            self.clock_ms,
            self.on_high_watermark,
            self.on_storage_error,
            self.image,
            self.broker_epoch,
        )
        cancel_scope = trio.CancelScope()
        self.fetchers[key] = (fetcher, cancel_scope)

        async def run_fetcher() -> None:
            with cancel_scope:
                await fetcher.run()

        self._nursery.start_soon(run_fetcher)
        return fetcher
