"""Spark's Python workers load the installed, compiled pyspark instead of pyspark.zip.

Spark starts its Python workers with `$SPARK_HOME/python/lib/pyspark.zip` and py4j's source
zip first on PYTHONPATH. For PySpark installed with pip, SPARK_HOME is the installed package, so
the zip holds the same sources as the package beside it, but without compiled bytecode (and
zipimport writes none): every worker daemon and every worker it forks compiles the pyspark
modules it imports again, about a second of CPU each. A session that uses the quorumlog data
source starts six such daemons (one per planner module and one for tasks) before its first
query; measured on a 2-core machine, the Python side of a first write and read took 6 s of CPU
instead of 12.

This directory is put on the workers' PYTHONPATH by spark/pipeline.py (and the tests' sessions);
Python's `site` imports this module at start-up. It drops the two zips from sys.path when both
packages are installed and the zips lie inside the installed pyspark (the same distribution, so
the same code). Anything else (a Spark unpacked elsewhere, one package missing) keeps the path
as Spark gave it. A sitecustomize further down the path is still run.
"""

import importlib.machinery
import importlib.util
import os
import sys


def _prefer_installed_pyspark() -> None:
    zips = [
        p
        for p in sys.path
        if p.endswith(os.sep + "pyspark.zip")
        or (os.path.basename(p).startswith("py4j-") and p.endswith(".zip"))
    ]
    if not zips:
        return
    rest = [p for p in sys.path if p not in zips]
    installed = importlib.machinery.PathFinder.find_spec("pyspark", rest)
    if (
        installed is None
        or installed.origin is None
        or importlib.machinery.PathFinder.find_spec("py4j", rest) is None
    ):
        return
    package_dir = os.path.dirname(installed.origin)
    if all(os.path.abspath(p).startswith(package_dir + os.sep) for p in zips):
        sys.path[:] = rest


def _run_next_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_prefer_installed_pyspark()
_run_next_sitecustomize()
