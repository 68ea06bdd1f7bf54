"""ProducerMetadata: the client's view of the cluster (the real ClusterView), kept fresh.

State (sans-IO, `update`/`failed_update` with `now_ms`): brokers by node id, each interesting
topic's partitions and their leaders, the topics the client cares about, and when to refresh.
A refresh is due when someone asked for one (`request_update`: an unknown leader, a
NOT_LEADER_OR_FOLLOWER-type error, a new topic) or `metadata_max_age_ms` passed since the last
success; after a failed attempt the next waits `retry_backoff_ms` (Kafka's Metadata.
timeToNextUpdate). Only the topics in use are asked for (Kafka's producer metadata), with
allow_auto_topic_creation on, as the Java producer does.

`MetadataUpdater.run` is the driver task: it waits until a refresh is due (or requested),
sends a Metadata request to a connected broker (else to a bootstrap server), applies the
answer and wakes `wait_for_update` callers. `wait_for_topic` is what `send()` uses for a topic
it has not seen: it blocks up to max.block.ms for the topic's partitions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from log.common.errors import ErrorCode, KafkaError, error_for
from log.protocol.apis import APIS
from log.protocol.metadata import METADATA_REQUEST
from producer.cluster_view import TopicPartition
from producer.connection import BrokerConnections, ConnectionFailedError, now_ms
from producer.errors import ProducerClosedError

METADATA_KEY = 3
BOOTSTRAP_NODE_BASE = -1  # bootstrap servers get node ids -1, -2, ... (as in Kafka)


class MetadataTimeoutError(KafkaError):
    """A topic did not appear in the metadata within max.block.ms."""

    error_code = ErrorCode.REQUEST_TIMED_OUT


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    node_id: int
    host: str
    port: int


class ProducerMetadata:
    """A ClusterView fed by Metadata responses; see the module docstring."""

    def __init__(
        self,
        bootstrap: Sequence[tuple[str, int]],
        *,
        metadata_max_age_ms: int = 300000,
        retry_backoff_ms: int = 100,
    ) -> None:
        self.bootstrap = [
            BrokerAddress(BOOTSTRAP_NODE_BASE - i, host, port)
            for i, (host, port) in enumerate(bootstrap)
        ]
        self.metadata_max_age_ms = metadata_max_age_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.brokers: dict[int, BrokerAddress] = {}
        self.cluster_id: str | None = None
        self.topics: set[str] = set()
        self.topic_errors: dict[str, int] = {}
        self._leaders: dict[TopicPartition, int | None] = {}
        self._leader_epochs: dict[TopicPartition, int] = {}
        self._counts: dict[str, int] = {}
        self._available: dict[str, list[int]] = {}
        self._by_node: dict[int, list[TopicPartition]] = {}
        self._need_update = True
        self._last_refresh_ms = -(2**62)
        self._last_success_ms = -(2**62)
        self.update_version = 0

    # -- ClusterView ----------------------------------------------------------------------------

    def leader_for(self, topic_partition: TopicPartition) -> int | None:
        return self._leaders.get(topic_partition)

    def partition_count(self, topic: str) -> int | None:
        return self._counts.get(topic)

    @property
    def partition_counts(self) -> Mapping[str, int]:
        """topic -> partition count, for known topics: the live mapping itself (the same
        object for the metadata's lifetime, so a hot path may keep it; read it, never write
        it; not a MappingProxyType, whose .get costs a hot path twice as much)."""
        return self._counts

    def available_partitions(self, topic: str) -> Sequence[int]:
        return self._available.get(topic, ())

    def partitions_for_node(self, node_id: int) -> Sequence[TopicPartition]:
        return self._by_node.get(node_id, ())

    # -- refresh schedule -------------------------------------------------------------------------

    def add_topics(self, topics: Iterable[str]) -> None:
        for topic in topics:
            if topic not in self.topics:
                self.topics.add(topic)
                self._need_update = True

    def request_update(self) -> None:
        self._need_update = True

    def time_to_next_update_ms(self, now: int) -> int:
        """0 when a refresh is due now (Kafka's Metadata.timeToNextUpdate)."""
        expire_ms = 0 if self._need_update else self._last_success_ms + self.metadata_max_age_ms
        backoff_ms = self._last_refresh_ms + self.retry_backoff_ms
        return max(expire_ms - now, backoff_ms - now, 0)

    def failed_update(self, now: int) -> None:
        self._last_refresh_ms = now

    def update(self, body: Any, now: int) -> None:
        """Adopt a Metadata response for the requested topics."""
        self._last_refresh_ms = self._last_success_ms = now
        self._need_update = False
        self.update_version += 1
        self.cluster_id = body.cluster_id
        self.brokers = {b.node_id: BrokerAddress(b.node_id, b.host, b.port) for b in body.brokers}
        for topic in body.topics:
            name = topic.name
            for tp in [tp for tp in self._leaders if tp.topic == name]:
                del self._leaders[tp]
                self._leader_epochs.pop(tp, None)
            self._counts.pop(name, None)
            if topic.error_code != ErrorCode.NONE:
                self.topic_errors[name] = topic.error_code
                if topic.error_code in (
                    ErrorCode.LEADER_NOT_AVAILABLE,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                ):
                    self._need_update = True  # being created: ask again after the backoff
                continue
            self.topic_errors.pop(name, None)
            count = 0
            for partition in topic.partitions:
                leader: int | None = partition.leader_id
                if leader is None or leader < 0 or leader not in self.brokers:
                    leader = None  # LEADER_NOT_AVAILABLE, or a broker we were not told about
                    self._need_update = True
                tp = TopicPartition(name, partition.partition_index)
                self._leaders[tp] = leader
                self._leader_epochs[tp] = partition.leader_epoch
                count = max(count, partition.partition_index + 1)
            if count:
                self._counts[name] = count
        self._rebuild_indexes()

    def apply_leader_hint(
        self, topic_partition: TopicPartition, leader_id: int, leader_epoch: int, endpoints: Any
    ) -> bool:
        """KIP-951: a NOT_LEADER_OR_FOLLOWER answer named the partition's current leader (and
        `endpoints`, the produce response's node_endpoints, say where it listens). Adopt it when
        it is newer than what we know, as Kafka's producer does; True when adopted, so the
        retry goes there without waiting for a metadata refresh."""
        if leader_id < 0 or topic_partition not in self._leaders:
            return False
        if leader_epoch <= self._leader_epochs.get(topic_partition, -1):
            return False
        for endpoint in endpoints:
            if endpoint.node_id == leader_id:
                self.brokers[leader_id] = BrokerAddress(leader_id, endpoint.host, endpoint.port)
        if leader_id not in self.brokers:
            return False  # nowhere to send it: a metadata refresh will tell
        self._leaders[topic_partition] = leader_id
        self._leader_epochs[topic_partition] = leader_epoch
        self._rebuild_indexes()
        return True

    def _rebuild_indexes(self) -> None:
        self._available = {}
        self._by_node = {}
        for tp in sorted(self._leaders):
            leader = self._leaders[tp]
            if leader is not None:
                self._available.setdefault(tp.topic, []).append(tp.partition)
                self._by_node.setdefault(leader, []).append(tp)

    def metadata_request(self, version: int) -> Any:
        request_cls: Any = METADATA_REQUEST.cls  # made at run time by schema.py: untyped
        topic_cls = request_cls.MetadataRequestTopic
        return request_cls(
            topics=[topic_cls(name=t) for t in sorted(self.topics)],
            allow_auto_topic_creation=True,
        )

    def address(self, node_id: int) -> BrokerAddress | None:
        if node_id in self.brokers:
            return self.brokers[node_id]
        for address in self.bootstrap:
            if address.node_id == node_id:
                return address
        return None

    def candidate_nodes(self) -> list[BrokerAddress]:
        """Where to send a Metadata request: known brokers, then the bootstrap servers."""
        return list(self.brokers.values()) + self.bootstrap


class MetadataUpdater:
    """The driver: keeps `metadata` fresh over `connections`; see the module docstring."""

    def __init__(
        self,
        metadata: ProducerMetadata,
        connections: BrokerConnections,
        *,
        request_timeout_ms: int,
    ) -> None:
        self.metadata = metadata
        self.connections = connections
        self.request_timeout_ms = request_timeout_ms
        self._wakeup = trio.Event()
        self._updated = trio.Event()
        self._closed = False
        self.last_error: KafkaError | None = None

    def request_update(self) -> None:
        self.metadata.request_update()
        self._wakeup.set()

    def add_topics(self, topics: Iterable[str]) -> None:
        self.metadata.add_topics(topics)
        self._wakeup.set()

    async def wait_for_update(self) -> None:
        await self._updated.wait()

    async def wait_for_topic(self, topic: str, max_block_ms: int) -> int:
        """The topic's partition count, refreshing metadata for up to `max_block_ms`."""
        count = self.metadata.partition_count(topic)
        if count is not None:
            return count
        self.add_topics([topic])
        with trio.move_on_after(max_block_ms / 1000):
            while True:
                if self._closed:
                    raise ProducerClosedError("producer closed while waiting for metadata")
                await self._updated.wait()
                count = self.metadata.partition_count(topic)
                if count is not None:
                    return count
                error_code = self.metadata.topic_errors.get(topic)
                if error_code is not None and error_code not in (
                    ErrorCode.LEADER_NOT_AVAILABLE,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                ):
                    raise error_for(error_code, f"metadata for topic {topic!r}")
                self.request_update()
        detail = self.metadata.topic_errors.get(topic)
        raise MetadataTimeoutError(
            f"topic {topic!r} not present in metadata after {max_block_ms} ms"
            + (f" (last error {ErrorCode(detail).name})" if detail is not None else "")
            + (f"; last failure: {self.last_error}" if self.last_error else "")
        )

    def close(self) -> None:
        self._closed = True
        self._updated.set()
        self._wakeup.set()

    async def run(self) -> None:
        while not self._closed:
            delay_ms = self.metadata.time_to_next_update_ms(now_ms())
            if delay_ms > 0:
                with trio.move_on_after(delay_ms / 1000 if delay_ms < 2**40 else math.inf):
                    await self._wakeup.wait()
                self._wakeup = trio.Event()
                continue
            self._wakeup = trio.Event()
            await self._refresh_once()
            updated, self._updated = self._updated, trio.Event()
            updated.set()

    async def _refresh_once(self) -> None:
        metadata = self.metadata
        candidates = metadata.candidate_nodes()
        # Prefer a node we are already connected to (Kafka's leastLoadedNode).
        candidates.sort(key=lambda a: self.connections.get(a.node_id) is None)
        for address in candidates:
            try:
                with trio.fail_after(self.request_timeout_ms / 1000):
                    connection = await self.connections.connected(
                        address.node_id, address.host, address.port
                    )
                    version = connection.version(METADATA_KEY)
                    body = await connection.request(
                        METADATA_KEY, metadata.metadata_request(version), version
                    )
            except (KafkaError, trio.TooSlowError) as exc:
                self.last_error = (
                    exc if isinstance(exc, KafkaError) else ConnectionFailedError(repr(exc))
                )
                continue
            metadata.update(body, now_ms())
            self.last_error = None
            return
        metadata.failed_update(now_ms())


assert APIS[METADATA_KEY].implemented[0] >= 1  # v1+: topics=[] means none, null means all
