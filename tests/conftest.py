"""How `make test` spreads the suite over its three pytest-xdist workers (`--dist loadgroup
--no-loadscope-reorder`).

Every test is put in the xdist group of its file, as `--dist loadfile` would (a file's module
fixtures, e.g. its cluster, start once), except the files sharing a session fixture, which form
one group: those under tests/spark (a 3-node cluster and a SparkSession) and those whose tests
use tests/cli's `cli_cluster` (a 3-node cluster). Their session fixtures then start once, on
one worker, instead of once on each worker that got such a file.

Groups are handed out in collection order, which this sorts heaviest first (HEAVY_FIRST, then
the groups holding `slow` tests, then the rest, each as collected), so the longest units start
at once and the short ones fill the end (xdist's default reorder, by test count, queued the
few-test Spark and cluster files late). The order and the groups only change where and when
tests run, never what they check. A group's session fixtures stop when the worker leaves the
group (tests/group_lifetime.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # --import-mode=importlib adds none
# pytest keeps a test module's assertion-rewritten code in __pycache__ only where bytecode may be
# written; with PYTHONDONTWRITEBYTECODE set (as on CI) each worker rewrote and compiled all the
# test modules on every run: collecting took 17 s of CPU per worker against 7 s with the cache.
# From here on the workers write it (the project's own modules are compiled by `make bytecode`).
sys.dont_write_bytecode = False
from group_lifetime import CLI_CLUSTER_GROUP, SPARK_GROUP, end_group, ended  # noqa: E402

GROUP = pytest.StashKey[str]()  # a test's xdist group (kept on the item: xdist then appends
# "@<group>" to its node id, so a table keyed by node id no longer finds it)
# The longest units of a `make test` run (its --durations list; 2026-11-27 on a 2-core box with
# three workers: tests/spark about 640 s in all, these 30-140 s each), the Spark group first:
# the other workers take the rest meanwhile.
HEAVY_FIRST = (
    SPARK_GROUP,
    "tests/node/test_transactions_copier.py",
    "tests/nemesis/test_nemesis_run.py",
    "tests/cli/test_demo.py",
    "tests/hosts/test_replace_controller.py",
    "tests/replication/test_replication_real.py",
    "tests/nemesis/test_nemesis_netns.py",
)


def _file(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cli_cluster_files = {
        _file(item) for item in items if "cli_cluster" in getattr(item, "fixturenames", ())
    }

    def group_of(item: pytest.Item) -> str:
        path = _file(item)
        if path.startswith(SPARK_GROUP + "/"):
            return SPARK_GROUP
        return CLI_CLUSTER_GROUP if path in cli_cluster_files else path

    groups = {item.nodeid: group_of(item) for item in items}
    for item in items:
        item.stash[GROUP] = groups[item.nodeid]
    if config.pluginmanager.hasplugin("xdist"):  # its marker (unknown when run without it)
        for item in items:
            if item.get_closest_marker("xdist_group") is None:
                item.add_marker(pytest.mark.xdist_group(groups[item.nodeid]))
    heavy = {group: i for i, group in enumerate(HEAVY_FIRST)}
    slow = {groups[item.nodeid] for item in items if item.get_closest_marker("slow") is not None}

    first: dict[str, int] = {}  # a group's place in collection order: its tests stay together
    for index, item in enumerate(items):
        first.setdefault(groups[item.nodeid], index)

    def rank(item: pytest.Item) -> tuple[int, bool, int]:
        group = groups[item.nodeid]
        return heavy.get(group, len(HEAVY_FIRST)), group not in slow, first[group]

    items.sort(key=rank)  # stable: a group's tests keep their order


def pytest_runtest_setup(item: pytest.Item) -> None:
    group = item.stash.get(GROUP, None)
    if group is not None and ended(group):
        pytest.fail(
            f"{group}'s shared fixtures were stopped before this test: its tests must run together"
        )


@pytest.hookimpl(trylast=True)  # after the test's own fixtures were torn down
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """The worker leaves a group: its session fixtures stop now (tests/group_lifetime.py)."""
    group = item.stash.get(GROUP, None)
    if group is not None and (nextitem is None or nextitem.stash.get(GROUP, None) != group):
        end_group(group)
