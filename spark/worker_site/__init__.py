"""A directory for the PYTHONPATH of Spark's Python workers: its sitecustomize.py makes them
import the installed, compiled pyspark rather than pyspark.zip (the module says why)."""

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

DIRECTORY = Path(__file__).resolve().parent
PACKAGE_ROOT = DIRECTORY.parents[1]  # where `spark`, `producer` and `log` are imported from


def worker_python_path(existing: str = "") -> str:
    """The PYTHONPATH Spark's Python workers need: this package's root (the data source's
    modules), this directory, then `existing`."""
    return os.pathsep.join(p for p in (str(PACKAGE_ROOT), str(DIRECTORY), existing) if p)


@contextlib.contextmanager
def on_the_workers_path() -> Iterator[None]:
    """os.environ's PYTHONPATH is worker_python_path() inside, as it was again after: wrap the
    building of a SparkSession in it. Spark's JVM keeps the environment it was started with and
    gives that PYTHONPATH to every Python worker it starts; the processes this one starts later
    (a restarted node, a command) then do not run the sitecustomize as well (a Ctrl-C during a
    command's start-up landed in it)."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = worker_python_path(before or "")
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before
