"""Kafka records (RecordBatch v2's records section) for a whole Arrow column pair at once.

A record is `length, attributes (0), timestampDelta, offsetDelta, keyLength, key,
valueLength, value, headerCount` with every integer a zigzag varint (Kafka's
DefaultRecord; log/records/builder.py writes the same bytes one record at a time). Here
every integer column is encoded with numpy for all rows together, the per-row fixed parts
become two small Arrow binary columns (before the key: length .. keyLength; between key and
value: valueLength), and Arrow's `binary_join_element_wise` concatenates prefix, key, middle,
value and headerCount row by row in C: no Python object per record. One timestamp for every
record (timestampDelta 0) and no headers: rows with either take the producer's
per-record path.

`plan_runs` cuts a column pair into runs whose records fit one batch (offsetDelta is the
index within the run, so runs are cut first and each is encoded on its own).
"""

from __future__ import annotations

from typing import Any

MAX_VARINT_BYTES = 5  # every length and delta here fits an int32


def _zigzag(values: Any) -> Any:
    import numpy as np

    values = values.astype(np.int64)
    return ((values << 1) ^ (values >> 63)).astype(np.uint64)


def varint_widths(values: Any) -> Any:
    """Bytes of the zigzag varint of each int64 in `values` (1..5 for int32 values)."""
    import numpy as np

    zz = _zigzag(values)
    width = np.ones(len(zz), dtype=np.int64)
    for shift in (7, 14, 21, 28):
        width += zz >= np.uint64(1 << shift)
    return width


def _varint_matrix(values: Any) -> tuple[Any, Any]:
    """((rows, 5) uint8 varint bytes, width per row) of the zigzag varints of `values`."""
    import numpy as np

    zz = _zigzag(values)
    width = varint_widths(values)
    out = np.zeros((len(zz), MAX_VARINT_BYTES), dtype=np.uint8)
    for column in range(MAX_VARINT_BYTES):
        byte = (zz >> np.uint64(7 * column)) & np.uint64(0x7F)
        more = width > column + 1
        out[:, column] = (byte | (more.astype(np.uint64) << np.uint64(7))).astype(np.uint8)
    return out, width


def _varint_column(values: Any) -> Any:
    """The zigzag varints of `values` as an Arrow binary array (a scalar when they are all
    equal: the common case for key and value lengths)."""
    import numpy as np
    import pyarrow as pa

    if len(values) and (values == values[0]).all():
        matrix, width = _varint_matrix(values[:1])
        return pa.scalar(matrix[0, : int(width[0])].tobytes(), pa.binary())
    matrix, width = _varint_matrix(values)
    data = matrix[np.arange(MAX_VARINT_BYTES)[None, :] < width[:, None]]  # row-major
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum(width, out=offsets[1:])
    return pa.BinaryArray.from_buffers(
        pa.binary(), len(values), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def _varint_scalar(value: int) -> Any:
    import numpy as np
    import pyarrow as pa

    matrix, width = _varint_matrix(np.array([value]))
    return pa.scalar(matrix[0, : int(width[0])].tobytes(), pa.binary())


_UNIFORM_CACHE: dict[tuple[int, int], tuple[Any, Any]] = {}


def _uniform_columns(key_length: int, value_length: int, rows: int) -> tuple[Any, Any]:
    """(length varints, offsetDelta varints) for records 0..rows-1 of one shape (at least
    `rows` long; cached per shape, grown by doubling)."""
    import numpy as np

    cached = _UNIFORM_CACHE.get((key_length, value_length))
    if cached is not None and len(cached[1]) >= rows:
        return cached
    size = max(rows, 2 * len(cached[1]) if cached else 16384)
    deltas = np.arange(size, dtype=np.int64)
    fixed = 3 + _width(key_length) + max(key_length, 0) + _width(value_length)
    body = fixed + max(value_length, 0) + varint_widths(deltas)
    columns = (_varint_column(body), _varint_column(deltas))
    if len(_UNIFORM_CACHE) > 64:  # a few shapes per job; do not grow without bound
        _UNIFORM_CACHE.clear()
    _UNIFORM_CACHE[(key_length, value_length)] = columns
    return columns


def _width(value: int) -> int:
    import numpy as np

    return int(varint_widths(np.array([value]))[0])


def _lengths(column: Any) -> Any:
    """int64 byte length of each element, -1 where null."""
    import numpy as np
    import pyarrow.compute as pc

    lengths = pc.binary_length(column).fill_null(-1)
    return lengths.to_numpy(zero_copy_only=False).astype(np.int64)


def record_sizes(keys: Any, values: Any, offset_delta_bytes: int) -> Any:
    """Encoded size of each record with an offsetDelta of `offset_delta_bytes` bytes (an
    upper bound when that is the widest a run can need): for cutting runs."""
    import numpy as np

    value_lengths = _lengths(values)
    key_lengths = _lengths(keys) if keys is not None else np.full(len(values), -1, np.int64)
    body = (
        3  # attributes, timestampDelta 0, headerCount 0
        + offset_delta_bytes
        + varint_widths(key_lengths)
        + np.maximum(key_lengths, 0)
        + varint_widths(value_lengths)
        + np.maximum(value_lengths, 0)
    )
    return body + varint_widths(body)


def encode_records(keys: Any, values: Any) -> bytes:
    """The records section of one batch holding these rows (offsetDelta 0..n-1, one
    timestamp, no headers): the bytes log.records.builder.build_batch_from_columns would
    write for the same keys and values."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = len(values)
    if pa.types.is_string(values.type):
        values = values.cast(pa.binary())
    if keys is not None and pa.types.is_string(keys.type):
        keys = keys.cast(pa.binary())
    value_lengths = _lengths(values)
    key_lengths = _lengths(keys) if keys is not None else np.full(rows, -1, np.int64)
    uniform_keys = keys is None or (key_lengths == key_lengths[0]).all()
    if uniform_keys and (value_lengths == value_lengths[0]).all():
        # Every record the same shape but for its offsetDelta: the length and offsetDelta
        # varints are slices of columns made once per shape (the common case).
        key_length = int(key_lengths[0])
        value_length = int(value_lengths[0])
        lengths, deltas = _uniform_columns(key_length, value_length, rows)
        lengths, deltas = lengths.slice(0, rows), deltas.slice(0, rows)
        key_varint: Any = _varint_scalar(key_length)
        value_varint: Any = _varint_scalar(value_length)
    else:
        offset_deltas = np.arange(rows, dtype=np.int64)
        body = (
            3
            + varint_widths(offset_deltas)
            + varint_widths(key_lengths)
            + np.maximum(key_lengths, 0)
            + varint_widths(value_lengths)
            + np.maximum(value_lengths, 0)
        )
        lengths, deltas = _varint_column(body), _varint_column(offset_deltas)
        key_varint, value_varint = _varint_column(key_lengths), _varint_column(value_lengths)
    empty = pa.scalar(b"", pa.binary())
    pieces = [
        lengths,
        pa.scalar(b"\x00\x00", pa.binary()),  # attributes 0, timestampDelta 0
        deltas,
        key_varint,
    ]
    if keys is not None:
        pieces.append(keys if keys.null_count == 0 else pc.fill_null(keys, empty))
    pieces += [
        value_varint,
        values if values.null_count == 0 else pc.fill_null(values, empty),
        pa.scalar(b"\x00", pa.binary()),  # headerCount 0
    ]
    joined = pc.binary_join_element_wise(*pieces, empty)  # the last argument: the separator
    _validity, offsets, data = joined.buffers()
    bounds = np.frombuffer(offsets, dtype=np.int32)
    start, end = int(bounds[joined.offset]), int(bounds[joined.offset + rows])
    return memoryview(data)[start:end].tobytes()


def plan_runs(sizes: Any, limit_bytes: int) -> list[tuple[int, int]]:
    """[start, end) runs of consecutive records whose sizes sum to at most `limit_bytes`
    (a record larger than that gets a run of its own)."""
    import numpy as np

    runs = []
    ends = np.cumsum(sizes)
    start, base, count = 0, 0, len(sizes)
    while start < count:
        end = int(np.searchsorted(ends, base + limit_bytes, side="right"))
        end = max(end, start + 1)
        runs.append((start, end))
        base = int(ends[end - 1])
        start = end
    return runs
