"""murmur2 against the Java client's vectors and kafka-python; the sticky/adaptive partitioner."""

import collections
import random

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from producer.partitioner import BuiltInPartitioner, murmur2, partition_for_key, to_positive

# Kafka's UtilsTest.testMurmur2 vectors (Java signed ints); the empty array from the same suite.
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    b"": 275646681,
}


@pytest.mark.parametrize(("data", "expected"), sorted(JAVA_VECTORS.items()))
def test_murmur2_matches_java_client(data, expected):
    assert murmur2(data) == expected


def test_to_positive_clears_sign_bit():
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5


def test_keyed_partition_agrees_with_kafka_python():
    rng = random.Random(20261121)
    for _ in range(2000):
        key = rng.randbytes(rng.randrange(0, 40))
        partitions = rng.randrange(1, 200)
        expected = (kafka_python_murmur2(key) & 0x7FFFFFFF) % partitions
        assert partition_for_key(key, partitions) == expected, (key, partitions)
        assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key)


def test_partition_for_key_known_value():
    # to_positive(-790332482) = 1357151166; 1357151166 % 50 == 16
    assert partition_for_key(b"foobar", 50) == 16


def test_load_table_is_inverted_cumulative_queue_sizes():
    partitioner = BuiltInPartitioner("t", 1000, random.Random(1))
    partitioner.update_partition_load_stats([0, 3, 1], [0, 1, 2], partition_count=3)
    assert partitioner.load_stats.cumulative_frequency_table == (4, 5, 8)
    assert partitioner.load_stats.partition_ids == (0, 1, 2)


def test_equal_queues_or_single_partition_mean_no_table():
    partitioner = BuiltInPartitioner("t", 1000, random.Random(1))
    partitioner.update_partition_load_stats([2, 2, 2], [0, 1, 2], partition_count=3)
    assert partitioner.load_stats is None
    partitioner.update_partition_load_stats([5], [0], partition_count=1)
    assert partitioner.load_stats is None
    # equal, but a partition is missing (unavailable): the table still excludes it
    partitioner.update_partition_load_stats([2, 2], [0, 2], partition_count=3)
    assert partitioner.load_stats.partition_ids == (0, 2)
    assert partitioner.load_stats.cumulative_frequency_table == (1, 2)


def test_weighted_choice_follows_the_load_table():
    seed = 7
    partitioner = BuiltInPartitioner("t", 1000, random.Random(seed))
    partitioner.update_partition_load_stats([0, 3, 1], [10, 11, 12], partition_count=3)
    draws = 40_000
    counts = collections.Counter(partitioner.next_partition(3, [10, 11, 12]) for _ in range(draws))
    # weights 4 : 1 : 3 of 8
    for partition, weight in ((10, 4), (11, 1), (12, 3)):
        assert counts[partition] / draws == pytest.approx(weight / 8, abs=0.015), (seed, counts)


def test_uniform_choice_among_available_partitions_without_table():
    partitioner = BuiltInPartitioner("t", 1000, random.Random(3))
    counts = collections.Counter(partitioner.next_partition(6, [1, 4]) for _ in range(10_000))
    assert set(counts) == {1, 4}
    assert counts[1] / 10_000 == pytest.approx(0.5, abs=0.03)
    # nothing available: any partition
    assert {partitioner.next_partition(3, []) for _ in range(200)} == {0, 1, 2}


def test_sticky_partition_switches_after_batch_size_at_a_batch_boundary():
    partitioner = BuiltInPartitioner("t", 100, random.Random(11))
    info = partitioner.peek_current_partition_info(1000, list(range(1000)))
    first = info.partition
    partitioner.update_partition_info(info, 60, 1000, list(range(1000)), enable_switch=True)
    assert partitioner.peek_current_partition_info(1000, []).partition == first
    partitioner.update_partition_info(info, 60, 1000, list(range(1000)), enable_switch=False)
    assert partitioner.peek_current_partition_info(1000, []) is info  # not at a boundary yet
    partitioner.update_partition_info(info, 10, 1000, list(range(1000)), enable_switch=True)
    assert partitioner.peek_current_partition_info(1000, []) is not info


def test_sticky_partition_switches_unconditionally_at_twice_batch_size():
    partitioner = BuiltInPartitioner("t", 100, random.Random(11))
    info = partitioner.peek_current_partition_info(1000, list(range(1000)))
    partitioner.update_partition_info(info, 199, 1000, [], enable_switch=False)
    assert partitioner.peek_current_partition_info(1000, []) is info
    partitioner.update_partition_info(info, 1, 1000, [], enable_switch=False)
    assert partitioner.peek_current_partition_info(1000, []) is not info
