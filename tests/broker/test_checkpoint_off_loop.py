"""The broker's periodic checkpoint writes (two fsyncs each, every 5 s for the high watermarks)
run in a worker thread: while one is held up, the broker goes on answering produce and fetch
requests, and the checkpoint lands once the write can proceed. Inline, a slow disk stalled every
request of the node for the length of the fsyncs."""

from __future__ import annotations

import threading

import trio

from log.common.errors import ErrorCode
from log.records.builder import Record, build_batch
from log.storage.checkpoint_file import OffsetCheckpointFile
from tests.broker.conftest import WireClient, fetch_body, produce_body


async def test_requests_are_answered_while_a_checkpoint_write_is_held_up(broker):
    await broker.create_topic("ckpt", 1)
    client = await WireClient.connect(broker.port)
    answer = await client.call(0, 8, produce_body("ckpt", 0, build_batch([Record(b"a")])))
    assert answer.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    manager = broker.server.log_manager
    checkpoint = manager._high_watermark_checkpoint._file  # its lock serializes its writes
    checkpoint._path_lock.lock.acquire()  # the disk is slow: the next write of this file waits
    # Should the write run on the event loop, the loop would wait on the lock for good: this
    # timer lets it go (the assertions below then fail on their deadline).
    safety = threading.Timer(60, checkpoint._path_lock.lock.release)
    safety.start()
    try:
        manager._next_run_ms["high_watermark"] = 0  # due at the next tick (<= 1 s away)
        with trio.fail_after(30):
            while checkpoint._prepared == checkpoint._written:
                await trio.sleep(0.01)
            # A tick prepared a write of the file (the one made due, or a periodic one that
            # came first) and handed it to a worker thread, which now waits for the lock
            # while the broker serves requests.
            prepared = checkpoint._prepared
            for value in (b"b", b"c"):
                answer = await client.call(0, 8, produce_body("ckpt", 0, build_batch(
                    [Record(value)])))  # fmt: skip
                assert answer.responses[0].partition_responses[0].error_code == ErrorCode.NONE
            fetched = await client.call(1, 11, fetch_body("ckpt", 0, 0))
            assert fetched.responses[0].partitions[0].high_watermark == 3
    finally:
        safety.cancel()
        if checkpoint._path_lock.lock.locked():
            checkpoint._path_lock.lock.release()
    with trio.fail_after(30):  # the held-up write lands, then (if that one was older) the due one
        while (
            checkpoint._written < prepared
            or ("ckpt", 0) not in OffsetCheckpointFile(checkpoint.path).read()
        ):
            await trio.sleep(0.01)
    assert OffsetCheckpointFile(checkpoint.path).read()[("ckpt", 0)] in (1, 3)
    await client.aclose()
