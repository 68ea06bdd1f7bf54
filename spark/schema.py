"""The columns: spark-sql-kafka's source schema, and validation of a sink DataFrame's schema.

Source (read) columns, exactly spark-sql-kafka's types (Arrow types in brackets, which a reader
that yields RecordBatches must match exactly):

    key binary [binary]          value binary [binary]        topic string [string]
    partition int [int32]        offset long [int64]          timestamp timestamp [us, UTC]
    timestampType int [int32]    headers array<struct<key: string, value: binary>> (optional)

Sink (write) columns: `value` (string or binary, required), `key` (string or binary), `topic`
(string; required unless the `topic` option is set), `partition` (int), `headers`
(array<struct<key: string, value: binary>>), `timestamp` (timestamp). Any other column is an
error, as a misspelt column would otherwise be dropped silently.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


class QuorumLogSchemaError(ValueError):
    """The DataFrame written to quorumlog has a missing column or a column of the wrong type."""


def source_schema(include_headers: bool = True) -> StructType:
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def arrow_source_schema(include_headers: bool = True):
    import pyarrow as pa

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        fields.append(pa.field("headers", pa.list_(header)))
    return pa.schema(fields)


def _headers_ok(data_type: DataType) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    element = data_type.elementType
    names = [f.name for f in element.fields]
    return (
        names == ["key", "value"]
        and isinstance(element["key"].dataType, StringType)
        and isinstance(element["value"].dataType, BinaryType | StringType)
    )


_SINK_TYPES = {
    "value": ("string or binary", lambda t: isinstance(t, StringType | BinaryType)),
    "key": ("string or binary", lambda t: isinstance(t, StringType | BinaryType)),
    "topic": ("string", lambda t: isinstance(t, StringType)),
    "partition": ("int", lambda t: isinstance(t, IntegerType)),
    "headers": ("array<struct<key: string, value: binary>>", _headers_ok),
    "timestamp": ("timestamp", lambda t: isinstance(t, TimestampType)),
}


def validate_sink_schema(schema: StructType, topic_option: str | None) -> None:
    """Raise QuorumLogSchemaError for a DataFrame quorumlog cannot write (planning time)."""
    names = [f.name for f in schema.fields]
    if "value" not in names:
        raise QuorumLogSchemaError(
            f"quorumlog sink: required column 'value' (string or binary) is missing; "
            f"columns are {names}"
        )
    for f in schema.fields:
        rule = _SINK_TYPES.get(f.name)
        if rule is None:
            raise QuorumLogSchemaError(
                f"quorumlog sink: unexpected column {f.name!r}; allowed columns are "
                f"{sorted(_SINK_TYPES)}"
            )
        description, ok = rule
        if not ok(f.dataType):
            raise QuorumLogSchemaError(
                f"quorumlog sink: column {f.name!r} must be {description}, "
                f"got {f.dataType.simpleString()}"
            )
    if topic_option is None and "topic" not in names:
        raise QuorumLogSchemaError(
            "quorumlog sink: no topic: set the option topic or add a string column 'topic'"
        )
