"""Shared fixtures for the producer core tests (sync driving of try_append)."""

import random

import pytest

from producer.accumulator import AppendStatus, RecordAccumulator
from producer.buffer_pool import BufferPool
from producer.config import ProducerConfig
from producer.idempotence import IdempotenceManager


def make_accumulator(seed=1, idempotent=False, **overrides):
    settings = dict(
        batch_size=1024,
        linger_ms=10,
        buffer_memory=64 * 1024,
        request_timeout_ms=1000,
        delivery_timeout_ms=5000,
        retry_backoff_ms=100,
        retry_backoff_max_ms=1000,
        enable_idempotence=idempotent,
    )
    settings.update(overrides)
    config = ProducerConfig(**settings)
    pool = BufferPool(config.buffer_memory, config.batch_size)
    idempotence = IdempotenceManager() if idempotent else None
    return RecordAccumulator(config, pool, random.Random(seed), idempotence)


def append(acc, cluster, topic, partition=None, value=b"v" * 100, key=None, now_ms=0):
    """try_append, allocating from the pool without waiting as a driver would."""
    result = acc.try_append(topic, partition, now_ms, key, value, (), now_ms, cluster)
    while result.status is AppendStatus.NEEDS_BUFFER:
        buffer = acc.buffer_pool.try_allocate_nowait(result.buffer_size_bytes)
        assert buffer is not None, "test pool exhausted"
        result = acc.try_append(
            topic, partition, now_ms, key, value, (), now_ms, cluster, buffer=buffer
        )
    assert result.status is AppendStatus.APPENDED
    return result


@pytest.fixture(name="make_accumulator", scope="session")
def _make_accumulator_fixture():
    return make_accumulator


@pytest.fixture(name="append", scope="session")
def _append_fixture():
    return append
