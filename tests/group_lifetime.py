"""Session fixtures that end with their xdist group, not with the run.

The Spark tests share a 3-node cluster and a SparkSession, the `cli_cluster` tests a 3-node
cluster: session fixtures, so each starts once, on the worker that runs the group
(tests/conftest.py). Left to pytest they live until that worker's last test, idling through
every other group it runs after them (the Spark group runs first: its three nodes and JVM idled
for the rest of the run, a tenth of a core or more on a 2-core box). A fixture hands its stop to
`stop_with_group`; tests/conftest.py calls it once the worker has run the group's last test,
and fails a test of a group whose fixtures were already stopped (the group's tests must run
one after another, as --dist loadgroup runs them)."""

from __future__ import annotations

from collections.abc import Callable

SPARK_GROUP = "tests/spark"
CLI_CLUSTER_GROUP = "tests/cli:cli_cluster"

_stops: dict[str, list[Callable[[], None]]] = {}
_ended: set[str] = set()


def stop_with_group(group: str, stop: Callable[[], None]) -> Callable[[], None]:
    """Run `stop` when the worker leaves `group`; returns a stop that runs it at most once
    (for the fixture's own teardown at the end of the run)."""
    done: list[bool] = []

    def once() -> None:
        if not done:
            done.append(True)
            stop()

    _stops.setdefault(group, []).append(once)
    return once


def end_group(group: str) -> None:
    """The worker ran the last test of `group`: stop its fixtures, newest first."""
    _ended.add(group)
    for stop in reversed(_stops.pop(group, [])):
        stop()


def ended(group: str) -> bool:
    return group in _ended
