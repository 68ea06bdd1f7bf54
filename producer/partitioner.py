"""Choosing a partition: Kafka's murmur2 for keyed records, the built-in sticky partitioner
(KIP-794, with the adaptive load table) for the rest.

Keyed records go to `to_positive(murmur2(key)) % partition_count`, bit-for-bit what the Java
client does, so keys land on the same partitions whichever client wrote them.

Unkeyed records (or all records when `partitioner.ignore.keys`) stick to one partition until
about `batch.size` bytes were produced to it, then switch (at a batch boundary: the switch is
enabled once the partition's last batch is full; unconditionally at 2 x batch.size).
`switch_before_new_batch` is the other boundary: when the next record would open a new batch
on the sticky partition and the partition's records, with this one and a batch header, would
reach batch.size (a full batch's worth), the switch happens first, so the record opens (or
joins) a batch on the next partition instead of leaving a one-record batch behind on this one
(which a one-broker cluster's drain, taking every partition's head, would send alone).

The next partition is picked

- uniformly among partitions with a known leader when no load statistics exist, or
- weighted by the inverse of each partition's queue length (in batches): with queue sizes
  q = [0, 3, 1], max + 1 = 4, weights 4 - q = [4, 1, 3] and the cumulative frequency table
  [4, 5, 8]; a uniform r in [0, 8) picks the first index whose running total exceeds r.
  Partitions whose leader has not been ready for `partitioner.availability.timeout.ms` are left
  out of the table by the accumulator. Equal queues mean no table (uniform choice).

Pure: randomness comes from an injected `random.Random`.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence
from dataclasses import dataclass

from log.records.batch_header import HEADER_BYTES

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """The Java client's `Utils.murmur2`: a signed 32-bit hash of `data`."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    tail = length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - 2**32 if h >= 2**31 else h


def to_positive(number: int) -> int:
    """Kafka's `Utils.toPositive`: clear the sign bit (not abs: abs(MIN_VALUE) overflows)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, partition_count: int) -> int:
    assert partition_count > 0
    return to_positive(murmur2(key)) % partition_count


@dataclass(frozen=True, slots=True)
class PartitionLoadStats:
    cumulative_frequency_table: tuple[int, ...]
    partition_ids: tuple[int, ...]


@dataclass(slots=True)
class StickyPartitionInfo:
    partition: int
    produced_bytes: int = 0


class BuiltInPartitioner:
    """The sticky, optionally adaptive partitioner of one topic (Kafka's BuiltInPartitioner)."""

    def __init__(self, topic: str, sticky_batch_size_bytes: int, rng: random.Random) -> None:
        assert sticky_batch_size_bytes >= 0
        self.topic = topic
        self.sticky_batch_size_bytes = sticky_batch_size_bytes
        self._rng = rng
        # The current sticky partition (None until the first choice); read it, never set it,
        # from outside: the `send` fast path reads it instead of calling
        # current_partition_info.
        self.sticky: StickyPartitionInfo | None = None
        self.load_stats: PartitionLoadStats | None = None

    def peek_current_partition_info(
        self, partition_count: int, available_partitions: Sequence[int]
    ) -> StickyPartitionInfo:
        """The current sticky partition, choosing one first if there is none yet."""
        if self.sticky is None or self.sticky.partition >= partition_count:
            self.sticky = StickyPartitionInfo(
                self.next_partition(partition_count, available_partitions)
            )
        return self.sticky

    def current_partition_info(self, partition_count: int) -> StickyPartitionInfo | None:
        """The current sticky partition if there is one in range (no choice made here)."""
        sticky = self.sticky
        return sticky if sticky is not None and sticky.partition < partition_count else None

    def next_partition(self, partition_count: int, available_partitions: Sequence[int]) -> int:
        assert partition_count > 0
        random_value = self._rng.getrandbits(31)
        stats = self.load_stats
        if stats is None:
            if available_partitions:
                return available_partitions[random_value % len(available_partitions)]
            return random_value % partition_count
        table = stats.cumulative_frequency_table
        weighted = random_value % table[-1]
        index = bisect.bisect_right(table, weighted)  # first running total > weighted
        assert index < len(table)
        return stats.partition_ids[index]

    def update_partition_info(
        self,
        partition_info: StickyPartitionInfo,
        appended_bytes: int,
        partition_count: int,
        available_partitions: Sequence[int],
        enable_switch: bool,
    ) -> None:
        """Count bytes produced to the sticky partition; switch after about batch.size."""
        if self.sticky_batch_size_bytes <= 0 or partition_info is not self.sticky:
            return
        partition_info.produced_bytes += appended_bytes
        produced = partition_info.produced_bytes
        if (
            produced >= self.sticky_batch_size_bytes and enable_switch
        ) or produced >= 2 * self.sticky_batch_size_bytes:
            self.sticky = StickyPartitionInfo(
                self.next_partition(partition_count, available_partitions)
            )

    def switch_before_new_batch(
        self,
        partition_info: StickyPartitionInfo,
        record_bytes: int,
        partition_count: int,
        available_partitions: Sequence[int],
    ) -> bool:
        """The sticky partition's open batch cannot take a `record_bytes` record: switch now
        (True) if with it (and a batch header) the partition would have had batch.size bytes;
        else (False) the record opens a new batch on the same partition."""
        if self.sticky_batch_size_bytes <= 0 or partition_info is not self.sticky:
            return False
        produced_bytes = partition_info.produced_bytes + record_bytes + HEADER_BYTES
        if produced_bytes < self.sticky_batch_size_bytes:
            return False
        self.sticky = StickyPartitionInfo(
            self.next_partition(partition_count, available_partitions)
        )
        return True

    def update_partition_load_stats(
        self, queue_sizes: Sequence[int] | None, partition_ids: Sequence[int], partition_count: int
    ) -> None:
        """Rebuild the load table from the queue sizes (in batches) of available partitions.

        `partition_count` is the topic's total; when every partition is included and all queues
        are equal, no table is kept (uniform choice is the same and cheaper).
        """
        if queue_sizes is None or len(queue_sizes) < 1 or partition_count < 2:
            self.load_stats = None
            return
        assert len(queue_sizes) == len(partition_ids)
        max_size_plus_1 = max(queue_sizes) + 1
        if len(set(queue_sizes)) == 1 and len(queue_sizes) == partition_count:
            self.load_stats = None
            return
        table = []
        running = 0
        for size in queue_sizes:
            running += max_size_plus_1 - size
            table.append(running)
        self.load_stats = PartitionLoadStats(tuple(table), tuple(partition_ids))
