"""ListOffsets' max timestamp (-3, KIP-734) names the record holding it, not the last offset of
its batch (KAFKA-16310, Kafka 3.8+): confluent-kafka-python's test_list_offsets produces three
records stamped +100, +400, +200 in one batch and expects offset 1."""

from __future__ import annotations

import pytest

from log.records.builder import Record, build_batch
from log.records.compression import CompressionType
from log.storage.log import MAX_TIMESTAMP


@pytest.mark.parametrize("compression", [CompressionType.NONE, CompressionType.GZIP])
def test_max_timestamp_names_its_record_inside_the_batch(log_factory, compression):
    log = log_factory()
    log.append_as_leader(build_batch([Record(b"a", timestamp_ms=50)]), 0, 0)
    stamps = [1_000_100, 1_000_400, 1_000_200]
    records = [Record(b"m%d" % i, timestamp_ms=t) for i, t in enumerate(stamps)]
    log.append_as_leader(build_batch(records, compression_type=compression), 0, 0)
    found = log.fetch_offset_by_timestamp(MAX_TIMESTAMP)
    assert (found.offset, found.timestamp_ms) == (2, 1_000_400)  # offsets 1-3: the batch


def test_max_timestamp_after_a_restart_and_a_later_smaller_batch(log_factory, tmp_path):
    log = log_factory()
    log.append_as_leader(build_batch([Record(b"x", timestamp_ms=t) for t in (5, 9, 7)]), 0, 0)
    log.append_as_leader(build_batch([Record(b"y", timestamp_ms=3)]), 0, 0)
    log.close()
    reopened = log_factory()
    found = reopened.fetch_offset_by_timestamp(MAX_TIMESTAMP)
    assert (found.offset, found.timestamp_ms) == (1, 9)
