"""build_batch_from_columns (the bulk and `send` path's encoder) builds the same bytes as
build_batch record by record, also for the shapes its cached fast loop special-cases: long
runs of same-shape records (offset deltas crossing the one-byte varint at 64 and the
two-byte one at 8192), null keys and values, repeated and varying timestamps."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from log.records.builder import Record, build_batch, build_batch_from_columns
from log.records.compression import CompressionType


def reference(keys, values, timestamps_ms, timestamp_ms, **kwargs) -> bytes:
    records = [
        Record(
            value,
            key=None if keys is None else keys[i],
            timestamp_ms=timestamp_ms if timestamps_ms is None else timestamps_ms[i],
        )
        for i, value in enumerate(values)
    ]
    return build_batch(records, **kwargs)


@settings(max_examples=120, deadline=None)
@given(
    st.integers(1, 300),
    st.sampled_from(["none", "same", "mixed"]),
    st.sampled_from(["one", "few", "spread"]),
    st.integers(0, 2**32 - 1),
    st.sampled_from([CompressionType.NONE, CompressionType.LZ4]),
)
def test_columns_match_records(count, key_shape, timestamp_shape, seed, codec):
    rng = random.Random(seed)
    value = rng.randbytes(rng.choice([0, 1, 100, 200]))
    values = [value if rng.random() < 0.9 else rng.choice([None, b"", b"x" * 70]) for _ in
              range(count)]  # fmt: skip
    keys = {
        "none": None,
        "same": [b"k" * 8] * count,
        "mixed": [rng.choice([None, b"", b"key", b"k" * 65]) for _ in range(count)],
    }[key_shape]
    base_ms = 1_700_000_000_000
    timestamps_ms = {
        "one": None,
        "few": [base_ms + i // 50 for i in range(count)],
        "spread": [base_ms + rng.randrange(0, 20_000) for _ in range(count)],
    }[timestamp_shape]
    state = dict(producer_id=7, producer_epoch=1, base_sequence=42, compression_type=codec)
    built = build_batch_from_columns(
        keys, values, timestamps_ms=timestamps_ms, timestamp_ms=base_ms, **state
    )
    assert built == reference(keys, values, timestamps_ms, base_ms, **state), seed


def test_offset_deltas_past_the_two_byte_varints():
    values = [b"v"] * 8300  # offset deltas 64 and 8192 change the varint width
    built = build_batch_from_columns(None, values, timestamp_ms=5)
    assert built == reference(None, values, None, 5)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([1, 2, 63, 64, 65, 148, 300]),
    st.sampled_from([0, 1, 100, 127, 128, 1000]),
    st.sampled_from(["one", "runs", "shuffled"]),
    st.integers(0, 2**32 - 1),
)
def test_equal_values_without_keys_match_records(count, value_length, timestamp_shape, seed):
    """The slice-built form (null keys, one value length) against the record-by-record one."""
    rng = random.Random(seed)
    values = [rng.randbytes(value_length) for _ in range(count)]
    base_ms = 1_700_000_000_000
    timestamps_ms = {
        "one": None,
        "runs": [base_ms + i // 40 for i in range(count)],
        "shuffled": [base_ms + rng.randrange(0, 300) for _ in range(count)],
    }[timestamp_shape]
    built = build_batch_from_columns(None, values, timestamps_ms=timestamps_ms, timestamp_ms=9)
    assert built == reference(None, values, timestamps_ms, 9), seed
