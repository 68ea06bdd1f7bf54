"""The per-record `send` path: lazy ColumnarRecordHandles (results, callbacks in record
order, through a split), whole batches from the sticky partitioner's batch-boundary switch,
and the public BulkDelivery.parts; against KafkaPeer (4 partitions)."""

from __future__ import annotations

import random

import pytest
import trio

from producer.bulk import ColumnarRecordHandle
from producer.partitioner import BuiltInPartitioner
from producer.producer import Producer, wait_all
from tests.producer.kafka_peer import batches_of

VALUE = bytes(range(100))


async def test_handles_are_lazy_and_call_back_in_record_order(kafka_peer):
    calls: list[int] = []
    async with Producer(kafka_peer.bootstrap, linger_ms=20, seed=3) as producer:
        handles = []
        for i in range(400):
            handle = await producer.send(
                "lazy", b"%05d" % i, partition=1, key=b"k" if i % 3 else None
            )
            assert isinstance(handle, ColumnarRecordHandle) and not handle.done
            handle.add_callback(lambda h, i=i: calls.append(i))
            handles.append(handle)
        await producer.flush()
        assert all(h.done and h.error is None for h in handles)
        results = [h.result() for h in handles]
        assert [r.offset for r in results] == list(range(400))
        assert {(r.topic, r.partition) for r in results} == {("lazy", 1)}
        assert [r.serialized_key_size for r in results[:3]] == [-1, 1, 1]
        assert all(r.serialized_value_size == 5 and r.timestamp_ms > 0 for r in results)
        late: list[ColumnarRecordHandle] = []
        handles[7].add_callback(late.append)  # already complete: called at once
        assert late == [handles[7]]
        assert (await handles[9].wait()).offset == 9
        assert handles[9].record_handle is handles[9]
    assert calls == list(range(400))


async def test_per_record_handles_follow_a_split(kafka_peer):
    kafka_peer.max_message_bytes = 1500  # whole 16 KiB batches are refused and split
    values = [b"%04d" % i + b"." * 96 for i in range(300)]
    calls: list[int] = []
    async with Producer(
        kafka_peer.bootstrap, linger_ms=50, enable_idempotence=False, acks=1,
        max_in_flight_requests_per_connection=1,
    ) as producer:  # fmt: skip
        handles = []
        for i, value in enumerate(values):
            handle = await producer.send("split", value, partition=0)
            handle.add_callback(lambda h, i=i: calls.append(i))
            handles.append(handle)
        results = await wait_all(handles)
        assert producer.sender.split_count > 0
    assert [r.offset for r in results] == list(range(300))
    assert calls == list(range(300))
    assert all(h.size_bytes <= 1500 for h in batches_of(kafka_peer, "split", 0))


async def test_unkeyed_sends_fill_whole_batches(kafka_peer):
    """The sticky partitioner switches when a batch is full, before a new one opens: no
    one-record batch is left behind to be drained alone."""
    async with Producer(kafka_peer.bootstrap, linger_ms=1000, seed=5) as producer:
        for _ in range(3000):
            await producer.send("sticky", VALUE)
        await producer.flush()
    for partition in range(kafka_peer.partitions):
        counts = [h.record_count for h in batches_of(kafka_peer, "sticky", partition)]
        # every batch but the partition's last (cut by flush) is full: 16 KiB of 110-byte records
        assert all(count >= 140 for count in counts[:-1]), (partition, counts)
    total = sum(h.record_count for p in range(4) for h in batches_of(kafka_peer, "sticky", p))
    assert total == 3000


def test_switch_before_new_batch_only_once_batch_size_was_produced():
    partitioner = BuiltInPartitioner("t", 1000, random.Random(7))
    info = partitioner.peek_current_partition_info(100, list(range(100)))
    partitioner.update_partition_info(info, 800, 100, list(range(100)), enable_switch=False)
    assert not partitioner.switch_before_new_batch(info, 100, 100, list(range(100)))
    assert partitioner.peek_current_partition_info(100, []) is info  # a new batch, same place
    info.produced_bytes = 850  # + 100 + a 61-byte batch header reach batch.size
    assert partitioner.switch_before_new_batch(info, 100, 100, list(range(100)))
    assert partitioner.peek_current_partition_info(100, []) is not info


async def test_bulk_delivery_parts_account_for_every_record(kafka_peer):
    async with Producer(kafka_peer.bootstrap, linger_ms=5) as producer:
        delivery = await producer.send_many("parts", [VALUE] * 1000)
        await delivery.wait()
    parts = delivery.parts
    assert sorted(i for part in parts for i in part.indices) == list(range(1000))
    for part in parts:
        stored = {h.base_offset for h in batches_of(kafka_peer, "parts", part.partition)}
        assert part.base_offset in stored


async def test_too_large_and_larger_than_batch_records_on_the_inline_path(kafka_peer):
    import pytest

    from log.common.errors import MessageTooLargeError

    async with Producer(
        kafka_peer.bootstrap, linger_ms=20, batch_size=1024, max_request_size=8192
    ) as producer:
        first = await producer.send("large", b"a", partition=0)  # opens the tail
        with pytest.raises(MessageTooLargeError):
            await producer.send("large", b"x" * 9000, partition=0)
        big = await producer.send("large", b"b" * 4000, partition=0)  # > batch.size: alone
        last = await producer.send("large", b"c", partition=0)
        results = await wait_all([first, big, last])
    assert [r.offset for r in results] == [0, 1, 2]
    # "a" alone (the big record opened its own, larger batch behind it), then "b..." + "c"
    assert [h.record_count for h in batches_of(kafka_peer, "large", 0)] == [1, 2]


async def test_the_collector_is_tuned_only_while_a_producer_is_open(kafka_peer):
    import gc

    from producer.gc_tuning import GC_TUNING, YOUNG_THRESHOLD

    if not gc.isenabled() or gc.get_freeze_count() or gc.get_threshold()[0] >= YOUNG_THRESHOLD:
        pytest.skip("the test process tunes its own collector")
    before = gc.get_threshold()
    async with Producer(kafka_peer.bootstrap, linger_ms=1) as producer:
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        assert gc.get_freeze_count() > 0
        await (await producer.send("gc-tuning", b"v")).wait()
        async with Producer(kafka_peer.bootstrap, gc_tuning=False):
            pass
        assert GC_TUNING.active_count == 1
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    assert GC_TUNING.active_count == 0


async def test_delivery_timeout_scans_are_not_run_every_sender_turn(kafka_peer):
    from producer.sender import EXPIRY_CHECK_INTERVAL_MS

    async with Producer(kafka_peer.bootstrap, linger_ms=0, batch_size=1024) as producer:
        await (await producer.send("scans", b"warm-up")).wait()
        accumulator, sender = producer.accumulator, producer.sender
        scans = []
        fail_expired_batches = accumulator.fail_expired_batches

        def counted(now_ms, in_flight=()):
            scans.append(now_ms)
            return fail_expired_batches(now_ms, in_flight)

        accumulator.fail_expired_batches = counted
        requests_before = sender.produce_request_count
        start = trio.current_time()
        handles = [await producer.send("scans", VALUE) for _ in range(3000)]
        await wait_all([h.record_handle for h in handles])
        elapsed_ms = (trio.current_time() - start) * 1000
    assert sender.produce_request_count - requests_before >= 100  # many sender turns
    assert len(scans) <= elapsed_ms / EXPIRY_CHECK_INTERVAL_MS + 2
