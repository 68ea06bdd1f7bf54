"""Large produce requests, which the broker reads straight into their own buffer
(FrameDecoder.read_buffer), over a real socket: sent in pieces, and pipelined with small
requests in one write, each batch is appended whole and read back byte for byte; the
answers come in request order."""

from __future__ import annotations

import trio

from log.protocol.fetch import FETCH_REQUEST
from log.protocol.produce import PRODUCE_REQUEST
from log.records.batch_header import iter_batches
from log.records.builder import build_batch_from_columns
from tests.broker.conftest import WireClient, fetch_body, produce_body

PRODUCE_VERSION = 9
FETCH_VERSION = 12


def _batch(count: int, value_bytes: int, seed: int) -> bytes:
    values = [bytes([(seed + i) % 251]) * value_bytes for i in range(count)]
    return build_batch_from_columns(None, values, timestamp_ms=0)


async def _read_back(client: WireClient, topic: str, records_count: int) -> list[bytes]:
    """The batches of partition 0 from offset 0 on, as stored (base offsets set)."""
    batches: list[bytes] = []
    offset = 0
    while offset < records_count:
        body = await client.call(1, FETCH_VERSION, fetch_body(topic, 0, offset))
        data = bytes(body.responses[0].partitions[0].records)
        for position, header in iter_batches(data):
            batches.append(data[position : position + header.size_bytes])
            offset = header.next_offset
    return batches


async def test_large_produce_requests_read_directly_are_appended_whole(nursery, tmp_path):
    from tests.broker.conftest import start_broker

    broker = await start_broker(nursery, tmp_path)
    await broker.create_topic("big")
    client = await WireClient.connect(broker.port)
    sent = [_batch(6000, 100, 1), _batch(3, 10, 2), _batch(8000, 100, 3), _batch(1, 5, 4)]

    # 1. one large request written in small pieces, with checkpoints between them
    request = client.codec.encode_request(
        0, PRODUCE_VERSION, produce_body("big", 0, sent[0], acks=-1)
    )
    assert len(request) > 4 * 65536
    for start in range(0, len(request), 20_000):
        await client.stream.send_all(request[start : start + 20_000])
        await trio.sleep(0)
    with trio.fail_after(10):
        answer = await client.receive()
    assert answer.responses[0].partition_responses[0].error_code == 0

    # 2. small, large, small requests in one write: the large one's tail and the next
    # request arrive together
    pipelined = b"".join(
        client.codec.encode_request(0, PRODUCE_VERSION, produce_body("big", 0, batch, acks=-1))
        for batch in sent[1:]
    )
    await client.stream.send_all(pipelined)
    offsets = []
    with trio.fail_after(10):
        while len(offsets) < 3:
            data = await client.stream.receive_some(1 << 20)
            assert data, "the broker closed the connection"
            for response in client.codec.receive_data(data):
                partition = response.body.responses[0].partition_responses[0]
                assert partition.error_code == 0
                offsets.append(partition.base_offset)
    assert offsets == [6000, 6003, 14003]

    stored = await _read_back(client, "big", 14004)
    assert len(stored) == 4
    for original, kept in zip(sent, stored, strict=True):
        # the same batch but for the base offset the broker set (first 8 bytes) and the
        # partition leader epoch (bytes 12..16), which the CRC does not cover
        assert kept[8:12] == original[8:12] and kept[16:] == original[16:]
    await client.aclose()
    assert FETCH_REQUEST and PRODUCE_REQUEST  # the versions used exist
