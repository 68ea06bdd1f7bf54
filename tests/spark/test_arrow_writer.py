"""The Arrow writer's bulk path (partitions computed per column, one send_many per partition
piece): what it sends is what the row-by-row Java client would have sent. Real local Spark,
real 3-node cluster; the murmur2 vectorization also against the producer's own, key by key."""

from __future__ import annotations

import random

import pytest
from spark_harness import create_topic

from producer.partitioner import partition_for_key

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]


def test_vectorized_partitions_equal_the_producers_key_by_key():
    import pyarrow as pa

    from spark.key_partitions import key_partitions

    rng = random.Random(17)
    keys = [
        None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 1, 2, 3, 4, 5, 16, 33]))
        for _ in range(5000)
    ]
    column = pa.array(keys, pa.binary())
    for partitions in (1, 2, 6, 7, 1000):
        expected = [-1 if k is None else partition_for_key(k, partitions) for k in keys]
        assert key_partitions(column, partitions).tolist() == expected
        window = column.slice(101, 777)  # an offset into the buffers
        assert key_partitions(window, partitions).tolist() == expected[101:878]
    same_length = pa.array([b"%016d" % i for i in range(3000)])  # the contiguous fast path
    assert key_partitions(same_length, 6).tolist() == [
        partition_for_key(b"%016d" % i, 6) for i in range(3000)
    ]
    text = pa.array([f"k{i}" for i in range(300)], pa.string())  # string keys: UTF-8 bytes
    assert key_partitions(text, 5).tolist() == [
        partition_for_key(b"k%d" % i, 5) for i in range(300)
    ]


def test_encoded_records_are_the_builders_bytes():
    """spark/record_encoding.py writes, for a whole column pair, exactly the records section
    log.records.builder writes record by record: odd lengths, nulls, varint width edges
    (63/64 and 8191/8192 records, 63/64/8191/8192-byte values), uniform and mixed shapes,
    sliced Arrow arrays, string columns."""
    import pyarrow as pa

    from log.records.batch_header import HEADER_BYTES
    from log.records.builder import build_batch_from_columns
    from spark.record_encoding import encode_records, plan_runs, record_sizes

    def expected(keys, values):
        return build_batch_from_columns(keys, values, timestamp_ms=7)[HEADER_BYTES:]

    rng = random.Random(5)
    for trial in range(40):
        n = rng.choice([1, 2, 63, 64, 65, 300, 8191, 8193])
        lengths = rng.choice([[16], [0, 1, 63, 64, 65], [100], [8191, 8192, 0]])
        keys = (
            None
            if trial % 3 == 0
            else [
                None if rng.random() < 0.2 else rng.randbytes(rng.choice(lengths)) for _ in range(n)
            ]
        )
        values = [
            None if trial % 4 == 1 and rng.random() < 0.05 else rng.randbytes(rng.choice(lengths))
            for _ in range(n)
        ]
        key_array = None if keys is None else pa.array(keys, pa.binary())
        value_array = pa.array(values, pa.binary())
        records = encode_records(key_array, value_array)
        assert records == expected(keys, values), trial
        assert sum(record_sizes(key_array, value_array, 3)) >= len(records)
        if n > 10:
            window = (
                None if key_array is None else key_array.slice(3, n - 6),
                value_array.slice(3, n - 6),
            )
            assert encode_records(*window) == expected(
                None if keys is None else keys[3 : n - 3], values[3 : n - 3]
            )
    for rows, key_length, value_length in [(70000, 16, 100), (9000, None, 0), (100, 0, 8192)]:
        keys = None if key_length is None else [rng.randbytes(key_length) for _ in range(rows)]
        values = [rng.randbytes(value_length) for _ in range(rows)]
        arrays = (None if keys is None else pa.array(keys), pa.array(values))
        assert encode_records(*arrays) == expected(keys, values)
    text = ["héllo", "", "k" * 70]
    assert encode_records(pa.array(text), pa.array(text)) == expected(
        [t.encode() for t in text], [t.encode() for t in text]
    )
    assert plan_runs([5, 5, 5, 20, 1], 10) == [(0, 2), (2, 3), (3, 4), (4, 5)]


def _read(session, bootstrap, topic):
    return (
        session.read.format("quorumlog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
        .collect()
    )


@pytest.mark.parametrize("ignore_keys", ["false", "true"])
def test_bulk_path_keeps_order_keys_nulls_and_partitions(cluster, bootstrap, session, ignore_keys):
    """One Spark task (so one order) of mixed rows: keyed, null-keyed, explicit partition,
    across two topics named by the topic column, in Arrow batches of 1000 (the session's
    maxRecordsPerBatch) that each split into many pieces."""
    topics = [f"bulk-{ignore_keys}-a", f"bulk-{ignore_keys}-b"]
    for t in topics:
        create_topic(cluster, t, 5)
    rows = 6000
    df = session.range(0, rows, 1, 1).selectExpr(
        f"case when id % 3 = 0 then '{topics[0]}' else '{topics[1]}' end as topic",
        "case when id % 7 = 0 then null when id % 2 = 0 then concat('k', cast(id as string))"
        " else cast(cast(id * 31 as string) as binary) end as key",
        "cast(id as string) as value",
        "case when id % 11 = 0 then cast(id % 5 as int) else null end as partition",
    )
    (
        df.write.format("quorumlog")
        .mode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.partitioner.ignore.keys", ignore_keys)
        .save()
    )
    seen = {}
    for topic in topics:
        got = _read(session, bootstrap, topic)
        by_partition: dict[int, list] = {}
        for r in got:
            i = int(bytes(r.value))
            assert i not in seen, f"row {i} twice"
            seen[i] = r
            by_partition.setdefault(r.partition, []).append((r.offset, i))
        for found in by_partition.values():  # offsets follow the task's row order
            found.sort()
            assert [i for _o, i in found] == sorted(i for _o, i in found)
            assert [o for o, _i in found] == list(range(len(found)))  # nothing lost
    assert sorted(seen) == list(range(rows))
    for i, r in seen.items():
        assert r.topic == topics[0 if i % 3 == 0 else 1]
        key = None if i % 7 == 0 else f"k{i}".encode() if i % 2 == 0 else str(i * 31).encode()
        assert (None if r.key is None else bytes(r.key)) == key
        assert r.headers == []
        if i % 11 == 0:
            assert r.partition == i % 5
        elif key is not None and ignore_keys == "false":
            assert r.partition == partition_for_key(key, 5)


def test_headers_and_timestamps_with_the_arrow_writer(cluster, bootstrap, session):
    topic = "bulk-headers"
    create_topic(cluster, topic, 3)
    df = session.range(0, 3000, 1, 2).selectExpr(
        "concat('k', cast(id % 50 as string)) as key",
        "cast(id as string) as value",
        "case when id % 4 = 0 then null else array(named_struct('key', 'i', 'value',"
        " cast(cast(id as string) as binary)), named_struct('key', 'nil', 'value',"
        " cast(null as binary))) end as headers",
        "case when id % 5 = 0 then null else timestamp_millis(1700000000000 + id) end as timestamp",
    )
    (
        df.write.format("quorumlog")
        .mode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .save()
    )
    got = _read(session, bootstrap, topic)
    assert sorted(int(bytes(r.value)) for r in got) == list(range(3000))
    for r in got:
        i = int(bytes(r.value))
        assert r.partition == partition_for_key(f"k{i % 50}".encode(), 3)
        if i % 4 == 0:
            assert r.headers == []
        else:
            assert [(h.key, h.value and bytes(h.value)) for h in r.headers] == [
                ("i", str(i).encode()),
                ("nil", None),
            ]
        if i % 5:
            assert int(r.timestamp.timestamp() * 1000) == 1700000000000 + i
    by_key: dict[bytes, list] = {}
    for r in sorted(got, key=lambda r: (r.partition, r.offset)):
        by_key.setdefault(bytes(r.key), []).append(int(bytes(r.value)))
    for values in by_key.values():  # a key's rows from one Spark task stay in order
        for half in ([v for v in values if v < 1500], [v for v in values if v >= 1500]):
            assert half == sorted(half)
