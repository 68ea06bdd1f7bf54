"""The segment keeps the headers of the newest batches read (every follower and tailing consumer
reads the newest batch): a truncated batch's header is never answered for the batch appended in
its place."""

from __future__ import annotations

from log.storage.config import LogConfig

from .conftest import make_batch
from .test_log import linear_translate


def test_a_batch_appended_where_a_truncated_one_was_is_read_from_the_file(log_factory):
    log = log_factory(LogConfig(index_interval_bytes=1 << 20))
    for i in range(5):
        log.append_as_leader(make_batch(1, tag=i), 0, i)
    segment = log.segments[-1]
    for offset in range(5):  # the newest batches' headers are remembered now
        assert segment.translate_offset(offset) == linear_translate(segment, offset)
    log.truncate_to(3)
    for i in range(2):  # same sizes and positions, another leader epoch in the header
        log.append_as_leader(make_batch(1, tag=i), 1, 10 + i)
    for offset in range(5):
        found = segment.translate_offset(offset)
        assert found == linear_translate(segment, offset), offset
        assert found is not None and found[1].partition_leader_epoch == (0 if offset < 3 else 1)
    log.close()
