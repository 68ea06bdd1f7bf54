"""A metadata batch of up to max_batch_bytes reaches every voter in one message.

pysyncobj 0.3.17 sends an entry at least `appendEntriesBatchSizeBytes` long in pieces and
decides which piece is the last from the entry's length, not from its pickled length (pickle
protocol 2 writes each byte >= 0x80 as two), so a follower unpickled unfinished entries: a
"raft tick failed" traceback per extra piece and a slow pure-Python retry (a 3,000-partition
CreateTopics did it on every follower). quorum/raft.py sets the piece size above the largest
batch; this test proposes batches up to the largest, of bytes >= 0x80 (compressible, as real batches
are: zlib runs on every message), and expects every voter to apply them with nothing logged
at ERROR.
"""

from __future__ import annotations

import logging

import trio

from quorum.raft import RaftConfig
from tests.quorum.test_raft_membership import running_quorum

LARGEST = RaftConfig.max_batch_bytes - 1  # the version byte


async def test_batches_near_the_largest_reach_every_voter_without_errors(tmp_path, caplog):
    caplog.set_level(logging.ERROR)
    async with running_quorum(tmp_path) as (nodes, leader):
        for size in (200_000, LARGEST):
            payload = (bytes(range(128, 256)) * (size // 128 + 1))[:size]
            offset = (await leader.propose(payload)).offset
            with trio.fail_after(30):
                while min(n.committed_offset for n in nodes) < offset:
                    await trio.sleep(0.02)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]
