"""Producer against KafkaPeer: broker behaviour the mock cluster lacks (dedup, size limit)."""

from __future__ import annotations

from producer.fetch_client import FetchClient
from producer.producer import Producer, wait_all
from tests.producer.kafka_peer import batches_of


async def read_values(bootstrap, topic, partition):
    async with FetchClient(bootstrap) as client:
        return [r.value for r in await client.read_all(topic, partition)]


async def test_idempotent_retries_after_lost_responses_write_no_duplicates(kafka_peer):
    count = 1500
    async with Producer(
        kafka_peer.bootstrap, linger_ms=0, batch_size=512, retry_backoff_ms=5, seed=11
    ) as producer:
        handles = []
        for i in range(count):
            handles.append((await producer.send("idem", b"%06d" % i, partition=2)).record_handle)
            if i % 400 == 100:
                # The broker appends the next produce request, then drops the connection
                # instead of answering: the producer must retry it with the same sequences.
                kafka_peer.drop_responses = 1
        results = await wait_all(handles)
        producer_id = producer.idempotence.producer_id
        assert producer.sender.retry_count > 0
    assert kafka_peer.duplicate_count > 0  # retries of written batches were recognised
    assert await read_values(kafka_peer.bootstrap, "idem", 2) == [b"%06d" % i for i in range(count)]
    assert [r.offset for r in results] == list(range(count))
    headers = batches_of(kafka_peer, "idem", 2)
    assert {h.producer_id for h in headers} == {producer_id}
    expected_sequence = 0
    for header in headers:
        assert header.base_sequence == expected_sequence
        expected_sequence += header.record_count


async def test_message_too_large_splits_the_batch(kafka_peer):
    kafka_peer.max_message_bytes = 1500  # below batch.size: whole batches are refused
    values = [b"%04d" % i + b"." * 96 for i in range(300)]
    async with Producer(
        kafka_peer.bootstrap,
        linger_ms=50,
        batch_size=16384,
        enable_idempotence=False,
        acks=1,
        max_in_flight_requests_per_connection=1,  # order across retries without sequences
    ) as producer:
        delivery = await producer.send_many("big", values, partition=0)
        results = await delivery.wait()
        assert producer.sender.split_count > 0
    assert kafka_peer.refused_too_large > 0
    assert [r.offset for r in results] == list(range(300))
    assert await read_values(kafka_peer.bootstrap, "big", 0) == values
    assert all(h.size_bytes <= 1500 for h in batches_of(kafka_peer, "big", 0))


async def test_idempotent_split_keeps_sequences_contiguous(kafka_peer):
    kafka_peer.max_message_bytes = 2000
    values = [b"%05d" % i + b"-" * 60 for i in range(500)]
    async with Producer(kafka_peer.bootstrap, linger_ms=20, batch_size=8192) as producer:
        results = await (await producer.send_many("bigidem", values, partition=1)).wait()
    assert [r.offset for r in results] == list(range(500))
    expected_sequence = 0
    for header in batches_of(kafka_peer, "bigidem", 1):
        assert header.base_sequence == expected_sequence
        expected_sequence += header.record_count
    assert expected_sequence == 500
