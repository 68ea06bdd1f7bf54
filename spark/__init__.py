"""The quorumlog PySpark data source: `from spark import QuorumLogDataSource`."""

from spark.source import FORMAT_NAME, QuorumLogDataSource

__all__ = ["FORMAT_NAME", "QuorumLogDataSource"]
