"""Fixtures for the storage tests: batch builders and a log factory over tmp_path."""

from __future__ import annotations

import pytest

from log.records.builder import Record, build_batch
from log.storage.config import LogConfig
from log.storage.log_loader import load_log


def make_batch(
    record_count: int = 1,
    *,
    value_bytes: int = 20,
    timestamp_ms: int = 1_000,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    tag: int = 0,
) -> bytes:
    records = [
        Record(bytes([(tag + i) % 256]) * value_bytes, timestamp_ms=timestamp_ms + i)
        for i in range(record_count)
    ]
    return build_batch(
        records,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
    )


@pytest.fixture
def batch_factory():
    return make_batch


@pytest.fixture
def small_config() -> LogConfig:
    return LogConfig(segment_bytes=4096, index_interval_bytes=256, segment_index_bytes=4096)


@pytest.fixture
def log_factory(tmp_path):
    def factory(config: LogConfig | None = None, name: str = "topic-0", **kwargs):
        return load_log(str(tmp_path / name), config or LogConfig(), **kwargs)

    return factory
