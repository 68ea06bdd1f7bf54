"""What the producer cores need to know about the cluster, as a narrow read-only protocol.

The metadata driver implements `ClusterView` from Metadata responses; `StaticClusterView` is a
plain immutable implementation for tests and tools. Partition lists are returned in a stable
order (the accumulator's round-robin drain index relies on it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple, Protocol


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class ClusterView(Protocol):
    def leader_for(self, topic_partition: TopicPartition) -> int | None:
        """The leader's node id, or None when the leader is unknown."""
        ...

    def partition_count(self, topic: str) -> int | None:
        """How many partitions `topic` has, or None when the topic is unknown."""
        ...

    def available_partitions(self, topic: str) -> Sequence[int]:
        """Partitions of `topic` whose leader is known (Kafka's availablePartitionsForTopic)."""
        ...

    def partitions_for_node(self, node_id: int) -> Sequence[TopicPartition]:
        """Partitions led by `node_id`, in a stable order."""
        ...


class StaticClusterView:
    """An immutable ClusterView built from {TopicPartition: leader node id or None}."""

    def __init__(self, leaders: Mapping[TopicPartition, int | None]) -> None:
        self._leaders = dict(leaders)
        self._counts: dict[str, int] = {}
        self._available: dict[str, list[int]] = {}
        self._by_node: dict[int, list[TopicPartition]] = {}
        for tp in sorted(self._leaders):
            self._counts[tp.topic] = max(self._counts.get(tp.topic, 0), tp.partition + 1)
            leader = self._leaders[tp]
            if leader is not None:
                self._available.setdefault(tp.topic, []).append(tp.partition)
                self._by_node.setdefault(leader, []).append(tp)

    @classmethod
    def uniform(
        cls, topic: str, partition_count: int, node_ids: Sequence[int]
    ) -> StaticClusterView:
        """`topic` with leaders assigned round-robin over `node_ids`."""
        return cls(
            {TopicPartition(topic, p): node_ids[p % len(node_ids)] for p in range(partition_count)}
        )

    def leader_for(self, topic_partition: TopicPartition) -> int | None:
        return self._leaders.get(topic_partition)

    def partition_count(self, topic: str) -> int | None:
        return self._counts.get(topic)

    def available_partitions(self, topic: str) -> Sequence[int]:
        return self._available.get(topic, [])

    def partitions_for_node(self, node_id: int) -> Sequence[TopicPartition]:
        return self._by_node.get(node_id, [])
