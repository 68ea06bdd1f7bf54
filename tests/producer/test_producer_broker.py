"""The producer, fetch client, sync wrapper and perf command against the real KafkaServer.

The broker is the `broker` branch's in-process fixture (tests/broker/conftest.py
`start_broker`: a real KafkaServer with a LogManager on tmp_path and a local metadata
quorum). Clients that run their own event loop (SyncProducer, confluent-kafka, the perf
command) run in a worker thread while the broker serves from the test's trio loop.
"""

from __future__ import annotations

import json

import pytest
import trio
from click.testing import CliRunner

from log.records.batch_header import read_header
from producer.cluster_view import TopicPartition
from producer.errors import DeliveryTimeoutError
from producer.fetch_client import FetchClient
from producer.partitioner import partition_for_key
from producer.producer import Producer, wait_all
from producer.sync_producer import SyncProducer
from tests.broker.conftest import fetch_body, no_server_errors, start_broker  # noqa: F401 (autouse)
from tools.cli import main


@pytest.fixture
async def broker(nursery, tmp_path):
    return await start_broker(nursery, tmp_path)


async def read_partition(bootstrap, topic, partition):
    async with FetchClient(bootstrap) as client:
        earliest = await client.earliest_offset(topic, partition)
        latest = await client.latest_offset(topic, partition)
        return await client.read_all(topic, partition, earliest, latest)


async def test_round_trip_send_send_many_flush_close(broker):
    await broker.create_topic("rt", partitions=3)
    async with Producer(broker.bootstrap, linger_ms=2, seed=1) as producer:
        handles = [await producer.send("rt", b"v%d" % i, partition=i % 3) for i in range(300)]
        keyed = [await producer.send("rt", b"k%d" % i, key=b"key-%d" % i) for i in range(100)]
        bulk = await producer.send_many("rt", [b"b%d" % i for i in range(5000)], partition=0)
        await producer.flush()
        assert all(h.done for h in handles + keyed) and bulk.done
    for i, handle in enumerate(handles):
        assert handle.result().partition == i % 3
    for i, handle in enumerate(keyed):
        assert handle.result().partition == partition_for_key(b"key-%d" % i, 3)
    records = await read_partition(broker.bootstrap, "rt", 0)
    by_offset = {r.offset: r.value for r in records}
    for i in range(0, 300, 3):  # the records sent to partition 0
        assert by_offset[handles[i].result().offset] == b"v%d" % i
    bulk_results = bulk.results()
    assert [by_offset[r.offset] for r in bulk_results] == [b"b%d" % i for i in range(5000)]


async def test_keys_partitioned_like_confluent_murmur2_random(broker):
    await broker.create_topic("keys", partitions=5)
    keys = [b"customer-%d" % i for i in range(60)]

    def confluent_produce():
        from confluent_kafka import Producer as ConfluentProducer

        client = ConfluentProducer(
            {"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"}
        )
        partitions = {}

        def on_delivery(error, message):
            assert error is None, error
            partitions[message.key()] = message.partition()

        for key in keys:
            client.produce("keys", b"c", key=key, on_delivery=on_delivery)
        assert client.flush(15) == 0
        return partitions

    confluent = await trio.to_thread.run_sync(confluent_produce)
    async with Producer(broker.bootstrap) as producer:
        results = await wait_all(
            [(await producer.send("keys", b"q", key=k)).record_handle for k in keys]
        )
    assert [r.partition for r in results] == [confluent[k] for k in keys]


async def test_idempotent_no_duplicates_after_connections_dropped_mid_flight(broker):
    await broker.create_topic("idem", partitions=1)
    async with Producer(
        broker.bootstrap, linger_ms=0, batch_size=512, retry_backoff_ms=5, seed=2
    ) as producer:
        handles, cuts, i = [], 0, 0
        while i < 1500 or cuts < 3:
            assert i < 50_000, "never caught a request in flight"
            handles.append((await producer.send("idem", b"%06d" % i, partition=0)).record_handle)
            if i >= 100 * (cuts + 1) * 3 and producer.sender.in_flight_batch_count > 0:
                cuts += 1
                for connection in list(producer.connections._connections.values()):
                    connection.close()
            i += 1
        results = await wait_all(handles)
        assert producer.sender.retry_count > 0
        producer_id = producer.idempotence.producer_id
    records = await read_partition(broker.bootstrap, "idem", 0)
    assert [r.value for r in records] == [b"%06d" % n for n in range(i)]
    assert [r.offset for r in results] == [r.offset for r in records]
    # batches carry our producer id and contiguous sequences
    async with FetchClient(broker.bootstrap) as client:
        expected_sequence, offset = 0, 0
        while offset < i:
            connection = await client._leader(TopicPartition("idem", 0))
            body = await connection.request(1, fetch_body("idem", 0, offset), 12)  # by name
            data = bytes(body.responses[0].partitions[0].records)
            assert data, f"nothing at offset {offset}"
            position = 0
            while position + 61 <= len(data):
                header = read_header(data, position)
                if position + header.size_bytes > len(data):
                    break
                assert header.producer_id == producer_id
                assert header.base_sequence == expected_sequence
                expected_sequence += header.record_count
                offset = header.next_offset
                position += header.size_bytes
    assert expected_sequence == i


async def test_delivery_timeout_when_the_broker_is_down(nursery, tmp_path):
    broker_scope = trio.CancelScope()

    async def run_broker(task_status=trio.TASK_STATUS_IGNORED):
        with broker_scope:
            async with trio.open_nursery() as broker_nursery:
                task_status.started(await start_broker(broker_nursery, tmp_path))
                await trio.sleep_forever()

    broker = await nursery.start(run_broker)
    await broker.create_topic("down", partitions=2)
    async with Producer(
        broker.bootstrap,
        linger_ms=500,
        request_timeout_ms=200,
        delivery_timeout_ms=900,
        retry_backoff_ms=20,
    ) as producer:
        # Warm: metadata and a connection, shown by one delivered record. Its 900 ms delivery
        # timeout (500 of them lingering) can run out on a loaded box before the first
        # metadata answer: then the next attempt, now with metadata, delivers.
        for attempt in range(10):
            try:
                await (await producer.send("down", b"warm-up")).wait()
                break
            except DeliveryTimeoutError:
                assert attempt < 9, "the live broker never took the warm-up record"
        broker_scope.cancel()
        handles = [await producer.send("down", b"v%d" % i) for i in range(40)]
        with trio.fail_after(10):
            for handle in handles:
                with pytest.raises(DeliveryTimeoutError):
                    await handle.wait()


async def test_sync_producer_against_the_broker(broker):
    await broker.create_topic("sync", partitions=2)

    def produce():
        with SyncProducer(broker.bootstrap, {"linger.ms": "1"}) as producer:
            futures = [producer.send("sync", b"%d" % i, partition=1) for i in range(500)]
            bulk = producer.send_many("sync", [b"bulk"] * 1000, partition=0)
            producer.flush()
        return [f.result().offset for f in futures], bulk.result().offsets()

    offsets, bulk_offsets = await trio.to_thread.run_sync(produce)
    assert offsets == list(range(500))
    assert bulk_offsets == list(range(1000))


@pytest.mark.parametrize("client", ["quorumlog", "confluent"])
async def test_perf_produce_json_against_the_broker(broker, client):
    await broker.create_topic("perf", partitions=1)
    args = ["perf", "produce", "--bootstrap", broker.bootstrap, "--topic", "perf"]
    args += ["--records", "3000", "--record-size", "100", "--client", client, "--json"]
    result = await trio.to_thread.run_sync(
        lambda: CliRunner().invoke(main, args, catch_exceptions=False)
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output.strip().splitlines()[-1])
    assert report["acknowledged"] == 3000 and report["records_per_s"] > 0
    assert report["p50_ms"] <= report["p99_ms"]


async def test_acks_zero_is_fire_and_forget(broker):
    await broker.create_topic("fire", partitions=1)
    async with Producer(broker.bootstrap, acks=0, linger_ms=1) as producer:
        assert producer.idempotence is None  # not explicitly asked for: turned off by acks=0
        handles = [await producer.send("fire", b"%05d" % i) for i in range(3000)]
        bulk = await producer.send_many("fire", [b"bulk"] * 2000)
        await producer.flush()
    assert all(h.result().offset == -1 for h in handles)  # acks=0: offsets unknown
    assert bulk.done and bulk.error is None
    with trio.fail_after(10):
        while True:  # the broker appends without answering: poll until all landed
            records = await read_partition(broker.bootstrap, "fire", 0)
            if len(records) >= 5000:
                break
            await trio.sleep(0.05)
    assert [r.value for r in records[:3000]] == [b"%05d" % i for i in range(3000)]


async def test_message_too_large_from_the_broker_splits_batches(broker):
    await broker.create_topic("big", partitions=1, **{"max.message.bytes": "2000"})
    values = [b"%04d" % i + b"." * 96 for i in range(400)]
    async with Producer(broker.bootstrap, linger_ms=20, batch_size=16384) as producer:
        bulk = await producer.send_many("big", values[:200])
        handles = [await producer.send("big", v) for v in values[200:]]
        bulk_results = await bulk.wait()
        results = await wait_all([h.record_handle for h in handles])
        assert producer.sender.split_count > 0
    assert [r.offset for r in bulk_results + results] == list(range(400))
    records = await read_partition(broker.bootstrap, "big", 0)
    assert [r.value for r in records] == values


@pytest.mark.parametrize("compression_type", ["none", "lz4"])
async def test_send_encoded_batches_round_trip_and_split(broker, compression_type):
    """send_encoded (the Spark writer's path): records encoded by the caller, keys/values
    kept as Arrow columns; a batch the broker refuses as too large is split from them."""
    pa = pytest.importorskip("pyarrow")
    from spark.record_encoding import encode_records

    await broker.create_topic("enc", partitions=2, **{"max.message.bytes": "2000"})
    keys = pa.array([None if i % 5 == 0 else b"k%d" % i for i in range(300)], pa.binary())
    values = pa.array([b"%04d" % i + b"." * 96 for i in range(300)], pa.binary())
    async with Producer(broker.bootstrap, compression_type=compression_type) as producer:
        small = await producer.send_encoded(
            "enc", 1, keys[:10], values[:10], encode_records(keys[:10], values[:10])
        )
        big = await producer.send_encoded("enc", 0, keys, values, encode_records(keys, values))
        assert [r.offset for r in await small.wait()] == list(range(10))
        assert [r.offset for r in await big.wait()] == list(range(300))
        assert producer.sender.split_count > 0 or compression_type != "none"
    records = await read_partition(broker.bootstrap, "enc", 0)
    assert [(r.key, r.value) for r in records] == list(
        zip(keys.to_pylist(), values.to_pylist(), strict=True)
    )
    assert [r.value for r in await read_partition(broker.bootstrap, "enc", 1)] == values[
        :10
    ].to_pylist()


@pytest.mark.parametrize("compression_type", ["lz4", "zstd", "gzip", "snappy"])
async def test_compressed_batches_round_trip(broker, compression_type):
    await broker.create_topic("zip", partitions=1)
    values = [b"%05d " % i + b"compressible " * 8 for i in range(1500)]
    async with Producer(broker.bootstrap, compression_type=compression_type) as producer:
        handles = [await producer.send("zip", v, key=b"k") for v in values[:500]]
        bulk = await producer.send_many("zip", values[500:], partition=0)
        await producer.flush()
    assert bulk.error is None and [h.result().offset for h in handles] == list(range(500))
    records = await read_partition(broker.bootstrap, "zip", 0)
    assert [r.value for r in records] == values
