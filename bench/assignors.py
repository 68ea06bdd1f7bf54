"""KIP-848 server-side assignor benchmark: how long one target assignment takes.

    python -m bench.assignors [--partitions 1000 4000 10000] [--members 10 50 100]

For each size, members join one by one (all subscribed to the same 10 topics), each join
computing a new target from the previous one (log/coordinator/assignors.py), as the
coordinator does on a heartbeat that bumped the group epoch; prints the slowest and the mean
assignment for `uniform` (sticky, balanced) and `range`. The coordinator computes the target
on its event loop, so the slowest one is the pause every other request of that broker sees.
"""

from __future__ import annotations

import argparse
import time

from log.coordinator.assignors import ASSIGNOR_NAMES, assign


def _joins(name: str, partitions: int, members: int) -> tuple[float, float]:
    counts = {f"t{i}": partitions // 10 for i in range(10)}
    subscriptions: dict[str, frozenset[str]] = {}
    current: dict = {}
    times = []
    for m in range(members):
        subscriptions[f"member-{m:04d}"] = frozenset(counts)
        start = time.perf_counter()
        current = assign(name, subscriptions, counts, current)
        times.append(time.perf_counter() - start)
    return max(times) * 1000, sum(times) / len(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, nargs="+", default=[1000, 4000, 10_000])
    parser.add_argument("--members", type=int, nargs="+", default=[10, 50, 100])
    args = parser.parse_args()
    print(f"{'assignor':>8}  {'partitions':>10}  {'members':>7}  {'max ms':>8}  {'mean ms':>8}")
    for name in ASSIGNOR_NAMES:
        for partitions, members in zip(args.partitions, args.members, strict=True):
            worst, mean = _joins(name, partitions, members)
            print(f"{name:>8}  {partitions:>10}  {members:>7}  {worst:>8.1f}  {mean:>8.1f}")


if __name__ == "__main__":
    main()
