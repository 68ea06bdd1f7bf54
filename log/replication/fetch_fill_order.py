"""FetchFillOrder: which partitions a Fetch response fills first, per connection, sans-IO.

A Fetch names partitions; the leader bounds the response (`max_bytes` in all, each partition's
`partition_max_bytes`), so when more data is waiting than fits, the partitions read first get it
and the rest answer empty (with their high watermark and no records). Kafka leaves the order to
the client: its sessionless fetch reads in request order, and a fair client rotates its own list.
Not every client does, so the leader keeps, per connection, when each partition last returned
data, and reads least recently fed first (never-fed partitions first, request order breaking
ties). A follower that rotates its own list (ours moves fed partitions to the end) gets exactly
its own order back; a consumer that always sends the same order still sees every partition fed
within a bounded number of responses.

The history is bounded (`max_tracked_partitions`); past it the history is forgotten, which
only resets fairness. Until a partition was fed, request order is used as it is, unsorted.

    order = FetchFillOrder()
    results, total_bytes = order.fill(keys, max_bytes, read)  # read(i, budget, first) -> (r, n)
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")

# More partitions than one connection fetches in practice (a follower names every partition it
# follows from one leader); forgetting the history past it costs nothing but fairness, briefly.
MAX_TRACKED_PARTITIONS = 200_000


class FetchFillOrder:
    """One connection's memory of which partitions its fetch responses fed last."""

    def __init__(self, max_tracked_partitions: int = MAX_TRACKED_PARTITIONS) -> None:
        assert max_tracked_partitions > 0
        self.max_tracked_partitions = max_tracked_partitions
        self._last_fed: dict[Hashable, int] = {}
        self._fed_count = 0

    def order(self, keys: Sequence[Hashable]) -> list[int]:
        """Indices into `keys` in the order to read them: least recently fed first."""
        indices = list(range(len(keys)))
        if not self._last_fed:
            return indices
        last_fed = self._last_fed.get
        return sorted(indices, key=lambda i: last_fed(keys[i], -1))

    def record_fed(self, key: Hashable) -> None:
        if len(self._last_fed) >= self.max_tracked_partitions and key not in self._last_fed:
            self._last_fed.clear()
        self._fed_count += 1
        self._last_fed[key] = self._fed_count

    def fill(
        self,
        keys: Sequence[K],
        max_bytes: int,
        read: Callable[[int, int, bool], tuple[R, int]],
    ) -> tuple[list[R | None], int]:
        """Read every key with what is left of `max_bytes`; results in request order.

        `read(index, budget_bytes, first)` reads `keys[index]` and returns (result, bytes
        read); `first` is true while nothing was read yet, so the reader may return its first
        batch whole even past the budget (KIP-74: progress over limits). Every key is read, so
        no result is left None.
        """
        results: list[R | None] = [None] * len(keys)
        remaining = max(max_bytes, 0)
        total_bytes = 0
        for i in self.order(keys):
            result, size_bytes = read(i, remaining, total_bytes == 0)
            results[i] = result
            if size_bytes:
                self.record_fed(keys[i])
                total_bytes += size_bytes
                remaining = max(remaining - size_bytes, 0)
        return results, total_bytes
