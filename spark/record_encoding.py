"""Kafka records (RecordBatch v2's records section) for a whole Arrow column pair at once.

A record is `length, attributes (0), timestampDelta, offsetDelta, keyLength, key,
valueLength, value, headerCount` with every integer a zigzag varint (Kafka's
DefaultRecord; log/records/builder.py writes the same bytes one record at a time). Here
the integers before the key (length, attributes, timestampDelta, offsetDelta, keyLength) are
encoded with numpy for all rows together into one Arrow binary column of per-record
prefixes (_varint_rows: one byte matrix, compacted by a mask; for records of one shape a
cached column, sliced per run), and Arrow's `binary_join_element_wise` concatenates
prefix, key, valueLength, value and headerCount row by row in C: five pieces per record, no
Python object per record. Headers (`keyLength, key, valueLength, value` each) are encoded
the same way for the flattened header list, whose per-record slices are contiguous.

`plan_runs` cuts a column pair into runs whose records fit one batch (offsetDelta is the
index within the run, so runs are cut first and each is encoded on its own).
"""

from __future__ import annotations

import functools
from typing import Any


@functools.lru_cache(maxsize=4096)  # a few distinct varints and separators per job
def binary_scalar(value: bytes) -> Any:
    """An Arrow binary scalar of `value`, made from buffers: pa.scalar gives the same, but
    its first call imports pandas (0.2 s of CPU in each fresh Spark Python worker)."""
    import numpy as np
    import pyarrow as pa

    offsets = np.array([0, len(value)], dtype=np.int32)
    array = pa.Array.from_buffers(
        pa.binary(), 1, [None, pa.py_buffer(offsets), pa.py_buffer(value)]
    )
    return array[0]


def _zigzag(values: Any) -> Any:
    import numpy as np

    values = np.asarray(values, dtype=np.int64)
    return ((values << 1) ^ (values >> 63)).view(np.uint64)


def _widths_of_zigzag(zz: Any) -> Any:
    import numpy as np

    width = np.ones(len(zz), dtype=np.int64)
    if not len(zz):
        return width
    top = int(zz.max())  # one comparison pass per byte the widest varint needs, no more
    shift = 7
    while shift < 64 and top >= 1 << shift:
        width += zz >= np.uint64(1 << shift)
        shift += 7
    return width


def varint_widths(values: Any) -> Any:
    """Bytes of the zigzag varint of each int64 in `values` (1..5 for int32 values, up to
    10 for int64)."""
    return _widths_of_zigzag(_zigzag(values))


def _varint_matrix(values: Any) -> tuple[Any, Any]:
    """((rows, widest) uint8 varint bytes, width per row) of the zigzag varints of `values`
    (only as many byte columns as the widest varint needs)."""
    import numpy as np

    zz = _zigzag(values)
    width = _widths_of_zigzag(zz)
    widest = int(width.max()) if len(width) else 1
    out = np.empty((len(zz), widest), dtype=np.uint8)
    for column in range(widest):
        byte = ((zz >> np.uint64(7 * column)) & np.uint64(0x7F)).astype(np.uint8)
        if column + 1 < widest:
            byte |= (width > column + 1).view(np.uint8) << np.uint8(7)  # continuation bit
        out[:, column] = byte
    return out, width


def _varint_column(values: Any) -> Any:
    """The zigzag varints of `values` as an Arrow binary array (a scalar when they are all
    equal: the common case for key and value lengths)."""
    import numpy as np
    import pyarrow as pa

    if len(values) and (values == values[0]).all():
        matrix, width = _varint_matrix(values[:1])
        return binary_scalar(matrix[0, : int(width[0])].tobytes())
    matrix, width = _varint_matrix(values)
    data = matrix[np.arange(matrix.shape[1])[None, :] < width[:, None]]  # row-major
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum(width, out=offsets[1:])
    return pa.BinaryArray.from_buffers(
        pa.binary(), len(values), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


@functools.lru_cache(maxsize=4096)  # a few lengths per job
def _varint_scalar(value: int) -> Any:
    import numpy as np

    matrix, width = _varint_matrix(np.array([value]))
    return binary_scalar(matrix[0, : int(width[0])].tobytes())


def _varint_rows(fields: list[Any]) -> Any:
    """One Arrow binary element per row: the zigzag varints of `fields` one after another,
    each an int64 numpy array (one value per row) or an int (the same for every row). Each
    field's varints fill a block of a (rows, widest) byte matrix, valid bytes first; a
    row-major boolean mask of the valid bytes compacts the blocks into each row's bytes in
    field order, in one pass for all rows."""
    import numpy as np
    import pyarrow as pa

    rows = next(len(field) for field in fields if not isinstance(field, int))
    blocks, masks = [], []
    widths = np.zeros(rows, dtype=np.int64)
    for field in fields:
        if isinstance(field, int):  # a constant: its bytes in every row, all valid
            constant, width = _varint_matrix(np.array([field]))
            blocks.append(np.broadcast_to(constant[:, : int(width[0])], (rows, int(width[0]))))
            masks.append(np.ones((rows, int(width[0])), dtype=bool))
            widths += int(width[0])
            continue
        block, width = _varint_matrix(field)
        blocks.append(block)
        masks.append(np.arange(block.shape[1])[None, :] < width[:, None])
        widths += width
    matrix = np.concatenate(blocks, axis=1)
    offsets = np.zeros(rows + 1, dtype=np.int32)
    np.cumsum(widths, out=offsets[1:])
    data = matrix[np.concatenate(masks, axis=1)]
    return pa.BinaryArray.from_buffers(
        pa.binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


_UNIFORM_CACHE: dict[tuple[int, int], Any] = {}


def _uniform_prefixes(key_length: int, value_length: int, rows: int) -> Any:
    """The prefix (see _prefixes) of records 0..rows-1 of one shape, keys and values of
    these lengths (at least `rows` long; cached per shape, grown by doubling)."""
    import numpy as np

    cached = _UNIFORM_CACHE.get((key_length, value_length))
    if cached is not None and len(cached) >= rows:
        return cached
    size = max(rows, 2 * len(cached) if cached is not None else 16384)
    deltas = np.arange(size, dtype=np.int64)
    fixed = 3 + _width(key_length) + max(key_length, 0) + _width(value_length)
    body = fixed + max(value_length, 0) + varint_widths(deltas)
    column = _prefixes(body, None, deltas, np.full(size, key_length, np.int64))
    if len(_UNIFORM_CACHE) > 64:  # a few shapes per job; do not grow without bound
        _UNIFORM_CACHE.clear()
    _UNIFORM_CACHE[(key_length, value_length)] = column
    return column


def _prefixes(body: Any, timestamp_deltas: Any, offset_deltas: Any, key_lengths: Any) -> Any:
    """Each record's bytes before its key: length (of the rest), attributes (0: one byte,
    the same as the varint of 0), timestampDelta (None: 0), offsetDelta, keyLength."""
    stamps = 0 if timestamp_deltas is None else timestamp_deltas
    return _varint_rows([body, 0, stamps, offset_deltas, key_lengths])


@functools.lru_cache(maxsize=4096)
def _width(value: int) -> int:
    import numpy as np

    return int(varint_widths(np.array([value]))[0])


def column_lengths(keys: Any, values: Any) -> tuple[Any, Any]:
    """(key lengths, value lengths) as int64 numpy arrays, -1 for null (no keys: all -1)."""
    import numpy as np

    value_lengths = _lengths(values)
    if keys is None:
        return np.full(len(value_lengths), -1, np.int64), value_lengths
    return _lengths(keys), value_lengths


def int_values(array: Any, null_as: int = 0) -> Any:
    """The values of an Arrow integer array as an int64 numpy array read from its buffers,
    `null_as` where null. (Arrow's to_numpy and fill_null give the same numbers, but their
    first call imports pandas: 0.2 s of CPU in each fresh Spark Python worker, for nothing
    the writer uses.)"""
    import numpy as np
    import pyarrow as pa

    assert pa.types.is_integer(array.type)
    if len(array) == 0:
        return np.zeros(0, dtype=np.int64)
    kind = "i" if pa.types.is_signed_integer(array.type) else "u"
    dtype = np.dtype(f"<{kind}{array.type.bit_width // 8}")
    values = np.frombuffer(
        array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize
    ).astype(np.int64)
    if array.null_count:
        values[~valid_rows(array)] = null_as
    return values


def valid_rows(array: Any) -> Any:
    """A bool numpy array, True where `array` (an Arrow array with nulls) has a value, read
    from its validity bitmap (is_valid().to_numpy would import pandas)."""
    import numpy as np

    bits = np.unpackbits(np.frombuffer(array.buffers()[0], dtype=np.uint8), bitorder="little")
    return bits[array.offset : array.offset + len(array)].astype(bool)


def _lengths(column: Any) -> Any:
    """int64 byte length of each element, -1 where null."""
    import pyarrow.compute as pc

    return int_values(pc.binary_length(column), null_as=-1)


def record_sizes(
    keys: Any,
    values: Any,
    offset_delta_bytes: int,
    timestamps_ms: Any = None,
    headers: Any = None,
    known_lengths: tuple[Any, Any] | None = None,
) -> Any:
    """Encoded size of each record with an offsetDelta of `offset_delta_bytes` bytes (an
    upper bound when that is the widest a run can need; timestamp deltas are taken from the
    smallest timestamp given, another upper bound for any run): for cutting runs.
    `known_lengths`: (key lengths, value lengths) from column_lengths, if known."""
    import numpy as np

    key_lengths, value_lengths = known_lengths or column_lengths(keys, values)
    rows = len(value_lengths)
    if (
        rows
        and timestamps_ms is None
        and headers is None
        and (key_lengths == key_lengths[0]).all()
        and (value_lengths == value_lengths[0]).all()
    ):  # one shape: one size
        key_length, value_length = int(key_lengths[0]), int(value_lengths[0])
        body_bytes = 3 + offset_delta_bytes + _width(key_length) + max(key_length, 0)
        body_bytes += _width(value_length) + max(value_length, 0)
        return np.full(rows, body_bytes + _width(body_bytes), dtype=np.int64)
    body = (
        3  # attributes, timestampDelta 0, headerCount 0
        + offset_delta_bytes
        + varint_widths(key_lengths)
        + np.maximum(key_lengths, 0)
        + varint_widths(value_lengths)
        + np.maximum(value_lengths, 0)
    )
    if timestamps_ms is not None and len(timestamps_ms):
        body += varint_widths(timestamps_ms - timestamps_ms.min()) - 1
    if headers is not None:
        counts, _section, section_lengths = _headers_section(headers)
        body += varint_widths(counts) - 1 + section_lengths
    return body + varint_widths(body)


def _headers_section(headers: Any) -> tuple[Any, Any, Any]:
    """(header count per record, the records' encoded headers as an Arrow binary array,
    their byte length per record) for a list<struct<key: string, value: binary|string>>
    column: each header is `keyLength, key, valueLength, value` (valueLength -1: null). A
    null list has no headers; a null header key is refused (Kafka's keys are non-null)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = len(headers)
    counts = int_values(pc.list_value_length(headers))  # a null list: no headers
    flat = headers.flatten()  # the headers of every record, in record order
    if len(flat) == 0:
        return counts, binary_scalar(b""), np.zeros(rows, dtype=np.int64)
    header_keys, header_values = flat.flatten()
    if header_keys.null_count:
        raise ValueError("a header with a null key (Kafka header keys are non-null)")
    header_keys = header_keys.cast(pa.binary())
    header_values = header_values.cast(pa.binary())
    empty = binary_scalar(b"")
    encoded = pc.binary_join_element_wise(
        _varint_column(_lengths(header_keys)),
        header_keys,
        _varint_column(_lengths(header_values)),
        header_values if header_values.null_count == 0 else pc.fill_null(header_values, empty),
        empty,
    )
    _validity, encoded_offsets, encoded_data = encoded.buffers()
    bounds = np.frombuffer(encoded_offsets, dtype=np.int32)[
        encoded.offset : encoded.offset + len(encoded) + 1
    ]
    firsts = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(counts, out=firsts[1:])
    offsets = bounds[firsts].astype(np.int32)  # record i: its headers' bytes, contiguous
    section = pa.BinaryArray.from_buffers(
        pa.binary(), rows, [None, pa.py_buffer(offsets), encoded_data]
    )
    return counts, section, np.diff(offsets).astype(np.int64)


def encode_records(
    keys: Any,
    values: Any,
    timestamps_ms: Any = None,
    headers: Any = None,
    known_lengths: tuple[Any, Any] | None = None,
) -> bytes:
    """The records section of one batch holding these rows (offsetDelta 0..n-1): the bytes
    log.records.builder.build_batch_from_columns writes for the same keys and values, and
    the same per-record timestamps (int64 numpy, ms; timestampDelta from their minimum, the
    batch's base timestamp) and headers (an Arrow list<struct<key, value>> column), if
    given; else timestampDelta 0 (the batch's one timestamp) and no headers.
    `known_lengths`: (key lengths, value lengths) from column_lengths, if known."""
    data, bounds = encode_runs(
        keys, values, [(0, len(values))], timestamps_ms, headers, known_lengths
    )
    return bytes(data[bounds[0] : bounds[1]])


def encode_runs(
    keys: Any,
    values: Any,
    runs: list[tuple[int, int]],
    timestamps_ms: Any = None,
    headers: Any = None,
    known_lengths: tuple[Any, Any] | None = None,
) -> tuple[memoryview, list[int]]:
    """The records sections of several batches at once: `runs` are consecutive [start,
    end) row ranges covering the rows in order, one batch each, so offsetDelta restarts at
    0 in each run and timestampDelta counts from each run's smallest timestamp. One Arrow
    join for all of them, no copy per run: (a view of the encoded bytes, run after run, and
    the byte position where each run starts, then the end; run i is
    `view[bounds[i]:bounds[i + 1]]`, the bytes encode_records gives for its rows alone)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = len(values)
    assert runs and runs[0][0] == 0 and runs[-1][1] == rows
    if pa.types.is_string(values.type):
        values = values.cast(pa.binary())
    if keys is not None and pa.types.is_string(keys.type):
        keys = keys.cast(pa.binary())
    key_lengths, value_lengths = known_lengths or column_lengths(keys, values)
    uniform_keys = keys is None or (key_lengths == key_lengths[0]).all()
    plain = timestamps_ms is None and headers is None
    starts = np.fromiter((start for start, _ in runs), dtype=np.int64, count=len(runs))
    counts = np.fromiter((end - start for start, end in runs), dtype=np.int64, count=len(runs))
    empty = binary_scalar(b"")
    if plain and uniform_keys and (value_lengths == value_lengths[0]).all():
        # Every record the same shape but for its offsetDelta: the prefixes are slices of a
        # column made once per shape (the common case).
        key_length = int(key_lengths[0])
        value_length = int(value_lengths[0])
        prefixes = _uniform_prefixes(key_length, value_length, int(counts.max()))
        if len(runs) == 1:
            prefixes = prefixes.slice(0, rows)
        else:
            prefixes = pa.concat_arrays([prefixes.slice(0, int(c)) for c in counts])
        value_varint: Any = _varint_scalar(value_length)
        suffix: list[Any] = [binary_scalar(b"\x00")]  # headerCount 0
    else:
        offset_deltas = np.arange(rows, dtype=np.int64)
        if len(runs) > 1:
            offset_deltas -= np.repeat(starts, counts)
        body = (
            3
            + varint_widths(offset_deltas)
            + varint_widths(key_lengths)
            + np.maximum(key_lengths, 0)
            + varint_widths(value_lengths)
            + np.maximum(value_lengths, 0)
        )
        timestamp_deltas = None
        if timestamps_ms is not None:
            timestamp_deltas = np.asarray(timestamps_ms, dtype=np.int64)
            bases = np.minimum.reduceat(timestamp_deltas, starts)  # each run's smallest
            timestamp_deltas = timestamp_deltas - np.repeat(bases, counts)
            body += varint_widths(timestamp_deltas) - 1
        suffix = [binary_scalar(b"\x00")]
        if headers is not None:
            header_counts, section, section_lengths = _headers_section(headers)
            body += varint_widths(header_counts) - 1 + section_lengths
            suffix = [_varint_column(header_counts), section]
        prefixes = _prefixes(body, timestamp_deltas, offset_deltas, key_lengths)
        value_varint = _varint_column(value_lengths)
    # record = prefix (length .. keyLength), key, valueLength, value, headerCount, headers
    pieces = [prefixes]
    if keys is not None:
        pieces.append(keys if keys.null_count == 0 else pc.fill_null(keys, empty))
    pieces += [
        value_varint,
        values if values.null_count == 0 else pc.fill_null(values, empty),
        *suffix,
    ]
    joined = pc.binary_join_element_wise(*pieces, empty)  # the last argument: the separator
    _validity, offsets, data = joined.buffers()
    positions = np.frombuffer(offsets, dtype=np.int32)[joined.offset : joined.offset + rows + 1]
    bounds = positions[np.append(starts, rows)].tolist()
    return memoryview(data), bounds


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
