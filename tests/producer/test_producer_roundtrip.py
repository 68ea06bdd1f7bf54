"""Producer + FetchClient against real Kafka-protocol brokers (librdkafka's mock cluster)."""

from __future__ import annotations

import pytest
import trio

from log.records.builder import Header
from producer.errors import BufferExhaustedError, DeliveryTimeoutError
from producer.fetch_client import FetchClient
from producer.partitioner import partition_for_key
from producer.producer import Producer, wait_all


async def read_partition(bootstrap: str, topic: str, partition: int):
    async with FetchClient(bootstrap) as client:
        earliest = await client.earliest_offset(topic, partition)
        latest = await client.latest_offset(topic, partition)
        return await client.read_all(topic, partition, earliest, latest)


async def test_send_flush_close_round_trip(mock_cluster3):
    bootstrap = mock_cluster3.bootstrap
    async with Producer(bootstrap, linger_ms=2, seed=7) as producer:
        first = await producer.send(
            "rt", b"hello", key=b"k", headers=[("h", b"1")], timestamp_ms=1_700_000_000_000
        )
        metadata = await first.wait()
        assert metadata.topic == "rt" and metadata.offset >= 0
        handles = [await producer.send("rt", b"v%d" % i, partition=i % 4) for i in range(200)]
        await producer.flush()
        assert all(h.done for h in handles)
    # close delivered everything; read it back
    by_partition: dict[int, list] = {}
    for handle in handles:
        result = handle.result()
        by_partition.setdefault(result.partition, []).append(result)
    for partition, results in by_partition.items():
        records = await read_partition(bootstrap, "rt", partition)
        offsets = {r.offset: r for r in records}
        for i, result in enumerate(results):
            assert offsets[result.offset].value == b"v%d" % (partition + 4 * i)
    records = await read_partition(bootstrap, "rt", metadata.partition)
    head = next(r for r in records if r.offset == metadata.offset)
    assert head.key == b"k" and head.value == b"hello"
    assert head.headers == (Header("h", b"1"),)
    assert head.timestamp_ms == 1_700_000_000_000


async def test_kafka_style_config_dict_and_send_many(mock_cluster):
    config = {"linger.ms": "5", "batch.size": "4096", "acks": "all"}
    async with Producer(mock_cluster.bootstrap, config) as producer:
        assert producer.config.linger_ms == 5 and producer.config.batch_size == 4096
        values = [b"x%05d" % i for i in range(3000)]
        delivery = await producer.send_many("bulk", values, partition=1)
        results = await delivery.wait()
    offsets = [r.offset for r in results]
    assert offsets == list(range(offsets[0], offsets[0] + 3000))
    records = await read_partition(mock_cluster.bootstrap, "bulk", 1)
    assert [r.value for r in records] == values


async def test_keyed_records_land_where_confluent_murmur2_random_puts_them(mock_cluster):
    keys = [b"key-%d" % i for i in range(40)] + [b"", b"\xff" * 7, "ключ".encode()]
    confluent_partitions = {}

    def on_delivery(error, message):
        assert error is None
        confluent_partitions[message.key()] = message.partition()

    client = mock_cluster.client
    for key in keys:
        client.produce("keyed", b"c", key=key, on_delivery=on_delivery)
    assert client.flush(10) == 0
    async with Producer(mock_cluster.bootstrap) as producer:
        handles = [await producer.send("keyed", b"q", key=key) for key in keys]
        results = await wait_all([h.record_handle for h in handles])
    for key, result in zip(keys, results, strict=True):
        assert result.partition == confluent_partitions[key] == partition_for_key(key, 4)


async def test_dropped_connections_mid_flight_are_retried_in_sequence_order(mock_cluster):
    """Connections cut with requests in flight: every handle still succeeds, retries resend
    the same (producer id, epoch, sequence). librdkafka's mock does not deduplicate a
    retried batch it already wrote (see test_producer_peer for the broker-side dedup), so
    here we check at-least-once delivery in order and the sequences our batches carried."""
    count = 2000
    async with Producer(
        mock_cluster.bootstrap, linger_ms=0, batch_size=1024, retry_backoff_ms=10, seed=3
    ) as producer:
        handles = []
        next_cut, cuts = 100, 0
        i = 0
        while i < count or cuts < 3:
            assert i < 50 * count, "never caught a request in flight"
            handles.append((await producer.send("idem", b"%06d" % i, partition=0)).record_handle)
            if i >= next_cut and producer.sender.in_flight_batch_count > 0:
                next_cut = i + 300
                cuts += 1
                for connection in list(producer.connections._connections.values()):
                    connection.close()
            i += 1
        count = i
        await wait_all(handles)
        assert producer.sender.retry_count > 0
        assert producer.idempotence.producer_id >= 0
    records = await read_partition(mock_cluster.bootstrap, "idem", 0)
    first_seen = list(dict.fromkeys(r.value for r in records))
    assert first_seen == [b"%06d" % i for i in range(count)]


async def test_back_pressure_blocks_then_buffer_exhausted(mock_cluster):
    async with Producer(
        mock_cluster.bootstrap,
        batch_size=1024,
        buffer_memory=4096,
        linger_ms=0,
        max_block_ms=300,
        request_timeout_ms=200,
        delivery_timeout_ms=60000,
        retry_backoff_ms=50,
    ) as producer:
        # With the broker up, a tiny pool still delivers everything: send waits for memory.
        handles = [await producer.send("bp", b"z" * 400, partition=0) for _ in range(100)]
        await wait_all([h.record_handle for h in handles])
        mock_cluster.stop()
        with pytest.raises(BufferExhaustedError):
            with trio.fail_after(5):
                for _ in range(100):
                    await producer.send("bp", b"z" * 400, partition=0)
        await producer.close(timeout_ms=0)


async def test_delivery_timeout_when_the_broker_is_down(mock_cluster):
    async with Producer(
        mock_cluster.bootstrap,
        linger_ms=1000,
        request_timeout_ms=200,
        delivery_timeout_ms=1200,
        retry_backoff_ms=20,
    ) as producer:
        await (await producer.send("down", b"warm-up")).wait()
        mock_cluster.stop()
        handles = [await producer.send("down", b"v%d" % i) for i in range(50)]
        with trio.fail_after(10):
            for handle in handles:
                with pytest.raises(DeliveryTimeoutError):
                    await handle.wait()


async def test_send_many_keyed_and_unkeyed_keeps_partitioning_and_order(mock_cluster):
    keys = [b"user-%d" % (i % 37) for i in range(2000)]
    values = [b"%05d" % i for i in range(2000)]
    async with Producer(mock_cluster.bootstrap, batch_size=2048, seed=5) as producer:
        before = await producer.send("mixed", b"before", partition=2)
        keyed = await producer.send_many("mixed", values, keys=keys)
        unkeyed = await producer.send_many("mixed", values)
        after = await producer.send("mixed", b"after", partition=2)
        keyed_results = await keyed.wait()
        unkeyed_results = await unkeyed.wait()
        assert (await before.wait()).offset < (await after.wait()).offset
    for key, result in zip(keys, keyed_results, strict=True):
        assert result.partition == partition_for_key(key, 4)
    assert len({r.partition for r in unkeyed_results}) > 1  # sticky moves on per batch
    records = []
    for partition in range(4):
        records += await read_partition(mock_cluster.bootstrap, "mixed", partition)
    by_partition_offset = {(r.partition, r.offset) for r in keyed_results + unkeyed_results}
    assert len(by_partition_offset) == 4000
    # within a partition, each call's records are in call order
    for results in (keyed_results, unkeyed_results):
        last: dict[int, int] = {}
        for result in results:
            assert result.offset > last.get(result.partition, -1)
            last[result.partition] = result.offset
    partition2 = await read_partition(mock_cluster.bootstrap, "mixed", 2)
    assert partition2[0].value == b"before" and partition2[-1].value == b"after"


async def test_send_many_blocks_on_a_tiny_buffer_and_still_delivers(mock_cluster):
    async with Producer(
        mock_cluster.bootstrap, batch_size=1024, buffer_memory=3072, linger_ms=0
    ) as producer:
        delivery = await producer.send_many("tiny", [b"q" * 100] * 3000, partition=0)
        results = await delivery.wait()
    assert [r.offset for r in results] == list(range(3000))


async def test_send_paths_interleaved_keep_order_and_timestamps(mock_cluster):
    """Plain records (columnar fast path), records with headers (the accumulator's batches),
    send_many and timestamps going backwards, all to one partition, stay in send order."""
    expected = []
    async with Producer(mock_cluster.bootstrap, batch_size=1024, linger_ms=1) as producer:
        handles = []
        for i in range(600):
            timestamp_ms = 1_700_000_000_000 + (i * 7919) % 1000  # not monotonic
            headers = [("i", b"%d" % i)] if i % 5 == 0 else None
            value = b"r%04d" % i
            handles.append(
                await producer.send(
                    "order", value, partition=3, headers=headers, timestamp_ms=timestamp_ms
                )
            )
            expected.append((value, timestamp_ms, bool(headers)))
            if i % 100 == 50:
                bulk = [b"m%04d-%d" % (i, j) for j in range(30)]
                await producer.send_many("order", bulk, partition=3, timestamp_ms=5)
                expected += [(v, 5, False) for v in bulk]
        await producer.flush()
    records = await read_partition(mock_cluster.bootstrap, "order", 3)
    assert [(r.value, r.timestamp_ms, bool(r.headers)) for r in records] == expected
    value_at = {r.offset: r.value for r in records}
    for i, handle in enumerate(handles):
        assert value_at[handle.result().offset] == b"r%04d" % i
