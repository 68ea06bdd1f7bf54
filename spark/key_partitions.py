"""The partition of every key of an Arrow column at once: the Java client's murmur2, vectorized.

The producer places a keyed record on `toPositive(murmur2(key)) % partitions`
(producer/partitioner.py, one key at a time in Python). The writer computes the same for a
whole binary column with numpy, keys of equal length together (a (rows, length) byte matrix,
its 4-byte words viewed as little-endian uint32; numpy's uint32 arithmetic wraps like Java's
int), then hands each partition's rows to the producer with that partition explicit. Same
answer as `partition_for_key`, without a Python call per key. Null keys get -1 (no key: the
producer's sticky partitioner decides).
"""

from __future__ import annotations

from typing import Any

_M = 0x5BD1E995
_SEED = 0x9747B28C


def _murmur2_equal_length(words: Any, tail: Any, length: int) -> Any:
    """murmur2 (as uint32) of rows that are all `length` bytes: `words` (rows, length // 4)
    uint32, `tail` (rows, length % 4) uint8."""
    import numpy as np

    m = np.uint32(_M)
    h = np.full(words.shape[0], (_SEED ^ length) & 0xFFFFFFFF, dtype=np.uint32)
    with np.errstate(over="ignore"):
        for column in range(words.shape[1]):
            k = words[:, column] * m
            k ^= k >> np.uint32(24)
            k *= m
            h *= m
            h ^= k
        rest = length % 4
        if rest == 3:
            h ^= tail[:, 2].astype(np.uint32) << np.uint32(16)
        if rest >= 2:
            h ^= tail[:, 1].astype(np.uint32) << np.uint32(8)
        if rest >= 1:
            h ^= tail[:, 0].astype(np.uint32)
            h *= m
        h ^= h >> np.uint32(13)
        h *= m
        h ^= h >> np.uint32(15)
    return h


def key_partitions(keys: Any, partition_count: int) -> Any:
    """int64 numpy array: the partition of each key of the Arrow binary/string array `keys`
    (as `producer.partitioner.partition_for_key`), -1 where the key is null."""
    import numpy as np
    import pyarrow as pa

    from spark.record_encoding import valid_rows

    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if not (pa.types.is_binary(keys.type) or pa.types.is_string(keys.type)):
        keys = keys.cast(pa.binary())
    count = len(keys)
    out = np.full(count, -1, dtype=np.int64)
    if count == 0:
        return out
    _, offsets_buffer, data_buffer = keys.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32, count=count + 1, offset=keys.offset * 4)
    data = (
        np.frombuffer(data_buffer, dtype=np.uint8)
        if data_buffer is not None
        else np.zeros(0, np.uint8)
    )
    starts = offsets[:-1].astype(np.int64)
    lengths = (offsets[1:] - offsets[:-1]).astype(np.int64)
    valid = valid_rows(keys) if keys.null_count else np.ones(count, dtype=bool)
    first = int(starts[0])
    if keys.null_count == 0 and count > 0 and np.all(lengths == lengths[0]):
        length = int(lengths[0])  # the common case: one length, contiguous (no gather)
        matrix = data[first : first + count * length].reshape(count, length)
        out[:] = _partitions(matrix, length, partition_count)
        return out
    for length in np.unique(lengths[valid]):
        rows = np.nonzero(valid & (lengths == length))[0]
        length = int(length)
        matrix = np.empty((len(rows), length), dtype=np.uint8)
        row_starts = starts[rows]
        for column in range(length):  # one gather per byte column, no (rows, length) index
            matrix[:, column] = data[row_starts + column]
        out[rows] = _partitions(matrix, length, partition_count)
    return out


def _partitions(matrix: Any, length: int, partition_count: int) -> Any:
    import numpy as np

    whole = length - length % 4
    words = np.ascontiguousarray(matrix[:, :whole]).view("<u4")
    hashed = _murmur2_equal_length(words, matrix[:, whole:], length)
    return (hashed & np.uint32(0x7FFFFFFF)).astype(np.int64) % partition_count
