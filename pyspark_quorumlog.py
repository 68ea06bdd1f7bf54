"""Spark's automatic registration of the quorumlog data source (no register() call needed).

The first time a session uses a Python data source, Spark runs a lookup worker that imports
every top-level module whose name starts with `pyspark_` and registers its `DefaultSource`
under `DefaultSource.name()` (pyspark/sql/worker/lookup_data_sources.py). With the
repository on the workers' PYTHONPATH, `format("quorumlog")` therefore works as is.
"""

from spark.source import QuorumLogDataSource as DefaultSource

__all__ = ["DefaultSource"]
