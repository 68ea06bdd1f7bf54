"""Server-side partition assignors of KIP-848 consumer groups: `uniform` and `range`. Sans-IO.

An assignor maps the group's members (their subscribed topics) and the subscribed topics'
partition counts to a target assignment: member id -> topic -> partitions. Topics are opaque
keys here (the coordinator uses topic ids). Both assignors give every partition of a
subscribed topic to exactly one member subscribed to it, and the result depends only on the
inputs (never on dict order).

- `uniform` (Kafka's UniformAssignor, the default): balanced and sticky. Partitions a member
  already has in the current target and may keep (it still subscribes, the partition still
  exists) stay with it; the others go, one at a time, to the eligible member with the fewest
  partitions; then the most loaded member gives partitions, one at a time, to the least loaded
  member subscribed to the topic while that one holds at least two fewer, until none can. With
  identical subscriptions every member ends with floor(P/N) or ceil(P/N) partitions, and a
  member joining only takes partitions from the others (no other partition moves).
- `range` (Kafka's RangeAssignor): per topic, the members subscribed to it in member id order
  get consecutive ranges; the first (partitions % members) get one more. Members with the same
  subscriptions get the same partition numbers of every topic (co-partitioning).

`group.consumer.assignors` names them by these names or by Kafka's class names.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Mapping
from typing import TypeVar

Topic = TypeVar("Topic", bound=Hashable)  # topic ids for the coordinator, anything for tests

UNIFORM = "uniform"
RANGE = "range"
_KAFKA_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": UNIFORM,
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RANGE,
}
ASSIGNOR_NAMES = (UNIFORM, RANGE)


def parse_assignors(value: str) -> tuple[str, ...]:
    """`group.consumer.assignors` (comma separated names) -> our names, in order."""
    names = []
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        name = _KAFKA_CLASS_NAMES.get(item, item)
        if name not in ASSIGNOR_NAMES:
            raise ValueError(
                f"unknown server assignor {item!r} (known: {', '.join(ASSIGNOR_NAMES)})"
            )
        if name not in names:
            names.append(name)
    if not names:
        raise ValueError("group.consumer.assignors names no assignor")
    return tuple(names)


def assign(
    name: str,
    subscriptions: Mapping[str, frozenset[Topic]],
    partition_counts: Mapping[Topic, int],
    current: Mapping[str, Mapping[Topic, frozenset[int]]] | None = None,
) -> dict[str, dict[Topic, frozenset[int]]]:
    """The target assignment by assignor `name`; `current` is the previous target (stickiness).
    Topics absent from `partition_counts` (unknown, deleted) are assigned to nobody."""
    if name == UNIFORM:
        return _uniform(subscriptions, partition_counts, current or {})
    if name == RANGE:
        return _range(subscriptions, partition_counts)
    raise ValueError(f"unknown assignor {name!r}")


def _sort_key(topic: Hashable) -> str:
    return str(topic)


def _range(
    subscriptions: Mapping[str, frozenset[Topic]], partition_counts: Mapping[Topic, int]
) -> dict[str, dict[Topic, frozenset[int]]]:
    result: dict[str, dict[Topic, frozenset[int]]] = {m: {} for m in subscriptions}
    topics = {t for subscribed in subscriptions.values() for t in subscribed}
    for topic in sorted(topics, key=_sort_key):
        count = partition_counts.get(topic, 0)
        members = sorted(m for m, subscribed in subscriptions.items() if topic in subscribed)
        if count <= 0 or not members:
            continue
        quota, extra = divmod(count, len(members))
        start = 0
        for index, member in enumerate(members):
            size = quota + (1 if index < extra else 0)
            if size:
                result[member][topic] = frozenset(range(start, start + size))
            start += size
    return result


def _uniform(
    subscriptions: Mapping[str, frozenset[Topic]],
    partition_counts: Mapping[Topic, int],
    current: Mapping[str, Mapping[Topic, frozenset[int]]],
) -> dict[str, dict[Topic, frozenset[int]]]:
    members = sorted(subscriptions)
    owner: dict[tuple[Topic, int], str] = {}
    owned: dict[str, set[tuple[Topic, int]]] = {m: set() for m in members}
    # 1. keep what may be kept (each partition once: the first member in id order wins)
    for member in members:
        for topic, partitions in (current.get(member) or {}).items():
            if topic not in subscriptions[member]:
                continue
            for partition in partitions:
                tp = (topic, partition)
                if 0 <= partition < partition_counts.get(topic, 0) and tp not in owner:
                    owner[tp] = member
                    owned[member].add(tp)
    topics = sorted({t for m in members for t in subscriptions[m]}, key=_sort_key)
    least = _LeastLoaded(
        {t: tuple(m for m in members if t in subscriptions[m]) for t in topics},
        {m: len(owned[m]) for m in members},
    )

    def move(tp: tuple[Topic, int], to: str) -> None:
        source = owner.get(tp)
        if source is not None:
            owned[source].discard(tp)
            least.changed(source, len(owned[source]))
        owner[tp] = to
        owned[to].add(tp)
        least.changed(to, len(owned[to]))

    # 2. the rest, one by one, to the least loaded eligible member
    for topic in topics:
        for partition in range(partition_counts.get(topic, 0)):
            if (topic, partition) not in owner and (target := least.of(topic)) is not None:
                move((topic, partition), target)
    # 3. balance: the most loaded member gives a partition to the least loaded member
    # subscribed to its topic while that one holds at least two fewer (few moves: sticky)
    moved = True
    while moved:
        moved = False
        queue = {m: sorted(owned[m], key=lambda tp: (_sort_key(tp[0]), tp[1])) for m in members}
        position = dict.fromkeys(members, 0)
        heap = [(-len(owned[m]), m) for m in members]
        heapq.heapify(heap)
        while heap:
            negative_load, member = heapq.heappop(heap)
            if -negative_load != len(owned[member]):
                continue  # stale: its current load was pushed when it changed
            candidates = queue[member]
            while position[member] < len(candidates):
                tp = candidates[position[member]]
                position[member] += 1
                if owner.get(tp) != member:
                    continue
                target = least.of(tp[0])
                if target is not None and len(owned[target]) + 1 < len(owned[member]):
                    move(tp, target)
                    moved = True
                    heapq.heappush(heap, (-len(owned[member]), member))
                    heapq.heappush(heap, (-len(owned[target]), target))
                    break
    result: dict[str, dict[Topic, frozenset[int]]] = {}
    for member in members:
        by_topic: dict[Topic, set[int]] = {}
        for topic, partition in owned[member]:
            by_topic.setdefault(topic, set()).add(partition)
        result[member] = {t: frozenset(p) for t, p in by_topic.items()}
    return result


class _LeastLoaded:
    """The least loaded member (ties: smallest id) among those subscribed to a topic, in
    O(log members): one heap per distinct set of subscribers, stale entries skipped."""

    def __init__(self, eligible: Mapping[Hashable, tuple[str, ...]], load: dict[str, int]) -> None:
        self.load = load
        self.heap_of: dict[Hashable, list[tuple[int, str]]] = {}
        by_set: dict[tuple[str, ...], list[tuple[int, str]]] = {}
        self.heaps_with: dict[str, list[list[tuple[int, str]]]] = {m: [] for m in load}
        for topic, members in eligible.items():
            if not members:
                continue
            heap = by_set.get(members)
            if heap is None:
                heap = by_set[members] = [(load[m], m) for m in members]
                heapq.heapify(heap)
                for m in members:
                    self.heaps_with[m].append(heap)
            self.heap_of[topic] = heap

    def of(self, topic: Hashable) -> str | None:
        heap = self.heap_of.get(topic)
        if heap is None:
            return None
        while heap[0][0] != self.load[heap[0][1]]:
            heapq.heappop(heap)
        return heap[0][1]

    def changed(self, member: str, load: int) -> None:
        self.load[member] = load
        for heap in self.heaps_with[member]:
            heapq.heappush(heap, (load, member))
