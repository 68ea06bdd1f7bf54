"""The suite's own scheduling: a group's shared fixtures stop when an xdist worker leaves the
group (tests/conftest.py, tests/group_lifetime.py), not at the end of the run.

An inner pytest run under pytest-xdist (one worker, `--dist loadgroup`, as `make test` runs)
with this suite's conftest: a session fixture of the Spark group hands its stop to
`stop_with_group` and writes a file when stopped; a test of a later group checks the file is
there. Session 21 found the hook keyed by node id, which xdist changes by appending
`@<group>`: the stop never ran before the run's end and the shared clusters idled meanwhile.
"""

from __future__ import annotations

from pathlib import Path

pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent

SHARED_FIXTURE = """
import pytest
from group_lifetime import SPARK_GROUP, stop_with_group

@pytest.fixture(scope="session")
def shared(tmp_path_factory):
    marker = tmp_path_factory.getbasetemp().parent / "stopped"
    stop = stop_with_group(SPARK_GROUP, lambda: marker.write_text("stopped"))
    yield marker
    stop()
"""

SPARK_TESTS = """
def test_first(shared):
    assert not shared.exists()

def test_second(shared):
    assert not shared.exists()
"""

LATER_TEST = """
def test_the_spark_groups_fixture_was_stopped_when_its_group_ended(tmp_path_factory):
    marker = tmp_path_factory.getbasetemp().parent / "stopped"
    assert marker.read_text() == "stopped"
"""


def test_a_groups_shared_fixture_stops_when_the_worker_leaves_the_group(pytester):
    tests = pytester.mkdir("tests")
    for name in ("conftest.py", "group_lifetime.py"):
        (tests / name).write_text((HERE / name).read_text())
    spark = tests / "spark"
    spark.mkdir()
    (spark / "conftest.py").write_text(SHARED_FIXTURE)
    (spark / "test_shared.py").write_text(SPARK_TESTS)
    (tests / "test_later.py").write_text(LATER_TEST)
    result = pytester.runpytest_subprocess(
        "-n", "1", "--dist", "loadgroup", "--no-loadscope-reorder", "-p", "no:cacheprovider",
        "--import-mode=importlib",
    )  # fmt: skip
    result.assert_outcomes(passed=3)
