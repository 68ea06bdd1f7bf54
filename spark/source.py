"""QuorumLogDataSource: the PySpark data source named "quorumlog" (batch and streaming).

    df.write.format("quorumlog").mode("append").option("kafka.bootstrap.servers", servers) \
        .option("topic", "events").save()
    spark.read.format("quorumlog").option("kafka.bootstrap.servers", servers) \
        .option("subscribe", "events").load()

No register() call is needed when the repository is on the Python path of Spark's workers:
Spark's data source lookup imports every top-level `pyspark_*` module and registers its
`DefaultSource` (pyspark_quorumlog.py, at the repository root). `spark.dataSource.register(
QuorumLogDataSource)` does the same for one session.

Column schema and option names follow spark-sql-kafka-0-10 (see spark/schema.py and
spark/options.py). Writers: Arrow (default) or `.option("writer", "row")`. Readers: filter
pushdown on partition / offset / timestamp when `.option("pushFilters", "true")` is set, which
needs `spark.sql.python.filterPushdown.enabled=true` on the session (Spark refuses a reader
implementing pushFilters without it).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource

from spark.options import QuorumLogOptionError
from spark.schema import source_schema

FORMAT_NAME = "quorumlog"


class QuorumLogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> Any:
        value = str(self.options.get("includeheaders", "false")).strip().lower()
        return source_schema(include_headers=value == "true")

    def reader(self, schema: Any) -> Any:
        from spark.reader import QuorumLogFilteringReader, QuorumLogReader

        push = str(self.options.get("pushfilters", "false")).strip().lower()
        if push not in ("true", "false"):
            raise QuorumLogOptionError(f"option pushFilters: expected true or false, got {push!r}")
        return (QuorumLogFilteringReader if push == "true" else QuorumLogReader)(
            self.options,  # type: ignore[arg-type]  # reader.py should take a Mapping (issue 15)
            schema,
        )

    def writer(self, schema: Any, overwrite: bool) -> Any:
        from spark.writer import QuorumLogArrowWriter, QuorumLogRowWriter

        if overwrite:
            raise QuorumLogOptionError("quorumlog sink: only mode append is supported")
        kind = str(self.options.get("writer", "arrow")).strip().lower()
        cls = QuorumLogRowWriter if kind == "row" else QuorumLogArrowWriter
        return cls(self.options, schema)

    def streamReader(self, schema: Any) -> Any:  # noqa: N802  (Spark's name)
        from spark.stream_reader import QuorumLogStreamReader

        return QuorumLogStreamReader(
            self.options,  # type: ignore[arg-type]  # stream_reader.py should take a Mapping (issue 15)
            schema,
        )

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:  # noqa: N802
        from spark.writer import QuorumLogStreamWriter

        return QuorumLogStreamWriter(self.options, schema)
