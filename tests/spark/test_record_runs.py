"""The Arrow writer's one-pass encoding of many batches (spark/record_encoding.encode_runs),
its partition order and its gathering of Spark's Arrow batches: each run's bytes are the
records section log.records.builder writes for that run's rows alone, and the batch built
around them (from a view, not a copy) is the builder's batch. No Spark, no cluster: these
are pure functions over real Arrow columns."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa

from log.records.batch_header import HEADER_BYTES, iter_batches
from log.records.builder import Header, assemble_batch, build_batch_from_columns
from spark.record_encoding import encode_runs
from spark.writer import _gathered, _partition_order


def _cuts(rng: random.Random, rows: int) -> list[tuple[int, int]]:
    bounds = sorted({0, rows, *(rng.randrange(1, rows) for _ in range(rng.randrange(0, 6)))})
    return list(zip(bounds, bounds[1:], strict=False))


def test_each_run_is_the_builders_records_section():
    """Uniform and mixed shapes, null keys and values, per-record timestamps (each run's
    deltas from its own smallest), headers, varint width edges in the offset deltas (a run
    of 8236 records)."""
    rng = random.Random(11)
    for trial in range(40):
        rows = 8300 if trial % 7 == 3 else rng.choice([1, 2, 64, 65, 300])
        lengths = rng.choice(
            [[16], [100], [0, 1, 63, 64, 65], [8191, 8192, 3]][: 2 if rows == 8300 else 4]
        )
        keys = (
            None
            if trial % 3 == 0
            else [
                None
                if trial % 5 == 1 and rng.random() < 0.2
                else rng.randbytes(rng.choice(lengths))
                for _ in range(rows)
            ]
        )
        values = [
            None if trial % 4 == 1 and rng.random() < 0.1 else rng.randbytes(rng.choice(lengths))
            for _ in range(rows)
        ]
        stamps = (
            [1_700_000_000_000 + rng.randrange(-5000, 5000) for _ in range(rows)]
            if trial % 4 == 2
            else None
        )
        headers = (
            [
                [Header(f"h{j}", None if j == 1 else rng.randbytes(j)) for j in range(i % 3)]
                for i in range(rows)
            ]
            if trial % 6 == 5
            else None
        )
        runs = _cuts(rng, rows) if rows > 1 else [(0, 1)]
        if rows == 8300:  # offset deltas of 1, 2 and 3 varint bytes
            runs = [(0, 64), (64, rows)]
        key_array = None if keys is None else pa.array(keys, pa.binary())
        header_array = None
        if headers is not None:
            header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
            header_array = pa.array(
                [[{"key": h.key, "value": h.value} for h in row] for row in headers], header_type
            )
        data, bounds = encode_runs(
            key_array,
            pa.array(values, pa.binary()),
            runs,
            None if stamps is None else np.array(stamps, dtype=np.int64),
            header_array,
        )
        assert len(bounds) == len(runs) + 1
        for index, (start, end) in enumerate(runs):
            run_stamps = None if stamps is None else stamps[start:end]
            expected = build_batch_from_columns(
                None if keys is None else keys[start:end],
                values[start:end],
                timestamps_ms=run_stamps,
                timestamp_ms=7,
                headers=None if headers is None else headers[start:end],
            )
            records = data[bounds[index] : bounds[index + 1]]
            assert bytes(records) == expected[HEADER_BYTES:], (trial, index)
            base = 7 if run_stamps is None else min(run_stamps)
            top = 7 if run_stamps is None else max(run_stamps)
            assembled = assemble_batch(
                records, record_count=end - start, base_offset=0, base_timestamp_ms=base,
                max_timestamp_ms=top,
            )  # fmt: skip
            assert assembled == expected, (trial, index)
            assert [h.record_count for _, h in iter_batches(assembled)] == [end - start]


def test_partition_order_groups_rows_and_keeps_their_order():
    rng = random.Random(3)
    for trial in range(200):
        rows = rng.randrange(1, 400)
        partitions = rng.choice([1, 2, 6, 40_000])
        targets = np.array(
            [-1 if trial % 3 == 0 and rng.random() < 0.3 else rng.randrange(partitions)
             for _ in range(rows)],
            dtype=np.int64,
        )  # fmt: skip
        order, groups = _partition_order(targets)
        ordered = np.arange(rows) if order is None else order
        assert sorted(ordered.tolist()) == list(range(rows))
        assert groups[0][1] == 0 and groups[-1][2] == rows
        for (_, _, end), (_, start, _) in zip(groups, groups[1:], strict=False):
            assert end == start
        position = {row: i for i, row in enumerate(ordered.tolist())}
        for partition, start, end in groups:
            members = ordered[start:end].tolist()
            assert members == sorted(members), "a row overtook an earlier one"
            expected = -1 if partition is None else partition
            assert all(targets[row] == expected for row in members)
        # No row of a partition (or a sticky row) overtakes an earlier row that may share
        # its partition: explicit rows keep their order per partition, and no row crosses
        # a sticky row in either direction.
        for a in range(rows):
            for b in range(a + 1, min(rows, a + 30)):
                if targets[a] == targets[b] or targets[a] < 0 or targets[b] < 0:
                    assert position[a] < position[b], (trial, a, b)


def test_gathered_joins_small_batches_and_keeps_rows_in_order():
    column = pa.array([b"%05d" % i for i in range(1000)])
    batches = [
        pa.RecordBatch.from_arrays([column.slice(i, 100)], ["value"]) for i in range(0, 1000, 100)
    ]
    size = batches[0].nbytes
    for gather in (0, 1, size, 3 * size, 10 * size, 100 * size):
        out = list(_gathered(iter(batches), gather))
        assert [b for batch in out for b in batch.column(0).to_pylist()] == column.to_pylist()
        assert all(batch.nbytes >= gather for batch in out[:-1])
        expected_count = 10 if gather <= size else -(-10 // (gather // size))
        assert len(out) == min(10, expected_count), gather


def test_a_run_view_assembles_to_the_builders_batch_under_every_codec():
    """The producer gets each run as a view of the shared buffer: every codec takes it."""
    from log.records.compression import CompressionType

    keys = [b"k%05d" % i for i in range(500)]
    values = [b"v" * (i % 70) for i in range(500)]
    runs = [(0, 200), (200, 500)]
    data, bounds = encode_runs(pa.array(keys), pa.array(values), runs)
    for codec in CompressionType:
        for index, (start, end) in enumerate(runs):
            built = assemble_batch(
                data[bounds[index] : bounds[index + 1]], record_count=end - start,
                base_offset=0, base_timestamp_ms=7, max_timestamp_ms=7, compression_type=codec,
            )  # fmt: skip
            assert built == build_batch_from_columns(
                keys[start:end], values[start:end], timestamp_ms=7, compression_type=codec
            ), codec


_NO_PANDAS = """
import sys
import numpy as np
import pyarrow as pa
from spark.record_encoding import column_lengths, encode_runs, record_sizes
from spark.writer import _arrow_indices, _partition_order
from spark.key_partitions import key_partitions

def binary(items):  # an Arrow binary array from buffers (pa.array itself imports pandas)
    data = b"".join(i or b"" for i in items)
    offsets = np.cumsum([0] + [len(i or b"") for i in items]).astype(np.int32)
    valid = np.packbits(np.array([i is not None for i in items]), bitorder="little")
    return pa.Array.from_buffers(pa.binary(), len(items), [pa.py_buffer(valid),
                                 pa.py_buffer(offsets), pa.py_buffer(data)])

rows = 300
keys = binary([None if i % 3 == 0 else b"k%d" % i for i in range(rows)])
values = binary([b"v" * (i % 7) for i in range(rows)])
order, groups = _partition_order(key_partitions(keys, 6))
batch = pa.RecordBatch.from_arrays([keys, values], names=["key", "value"])
batch = batch.take(_arrow_indices(order))
keys, values = batch.column(0), batch.column(1)
header_keys = pa.Array.from_buffers(pa.string(), rows, [None,
    pa.py_buffer(np.arange(rows + 1, dtype=np.int32)), pa.py_buffer(b"h" * rows)])
headers_struct = pa.StructArray.from_arrays([header_keys, binary([b"x"] * rows)],
                                            names=["key", "value"])
list_valid = np.packbits(np.array([i % 4 != 0 for i in range(rows)]), bitorder="little")
headers = pa.Array.from_buffers(pa.list_(headers_struct.type), rows, [pa.py_buffer(list_valid),
    pa.py_buffer(np.arange(rows + 1, dtype=np.int32))], children=[headers_struct])
stamps = np.arange(rows, dtype=np.int64) + 1_700_000_000_000
lengths = column_lengths(keys, values)
record_sizes(keys, values, 2, stamps, headers, lengths)
encode_runs(keys, values, [(0, 100), (100, rows)], stamps, headers, lengths)
uniform = binary([b"u" * 100] * rows)
encode_runs(uniform, uniform, [(0, 100), (100, rows)])
print("pandas" in sys.modules)
"""


def test_encoding_never_imports_pandas():
    """Arrow's pa.array, pa.scalar, to_numpy and fill_null import pandas on first use (0.2 s
    of CPU in each fresh Spark Python worker): the writer's partitioning, reordering and
    encoding of every column shape use none of them. In a fresh interpreter."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", _NO_PANDAS], cwd=repo, capture_output=True,
                         text=True, timeout=120, check=True)  # fmt: skip
    assert out.stdout.strip() == "False", out.stderr


def test_int_values_reads_any_integer_array_as_int64_with_nulls_replaced():
    """int_values (the writer's pandas-free to_numpy): widths, signedness, slices whose
    validity bitmap starts mid-byte, nulls replaced by the given value, empty arrays."""
    from spark.record_encoding import int_values

    source = [5, None, -3, 7, None, 1, 0, None, 2, 9, None]
    for type_ in (pa.int8(), pa.int16(), pa.int32(), pa.int64()):
        array = pa.array(source, type_)
        for start in (0, 1, 3, 9):
            got = int_values(array.slice(start), null_as=-1)
            assert got.dtype == np.int64
            assert got.tolist() == [-1 if v is None else v for v in source[start:]]
    assert int_values(pa.array([250, 7], pa.uint8())).tolist() == [250, 7]
    assert int_values(pa.array([], pa.int32())).tolist() == []
