"""A directory for the PYTHONPATH of Spark's Python workers: its sitecustomize.py makes them
import the installed, compiled pyspark rather than pyspark.zip (the module says why)."""

import os
from pathlib import Path

DIRECTORY = Path(__file__).resolve().parent
PACKAGE_ROOT = DIRECTORY.parents[1]  # where `spark`, `producer` and `log` are imported from


def worker_python_path(existing: str = "") -> str:
    """The PYTHONPATH Spark's Python workers need: this package's root (the data source's
    modules), this directory, then `existing`."""
    return os.pathsep.join(p for p in (str(PACKAGE_ROOT), str(DIRECTORY), existing) if p)
