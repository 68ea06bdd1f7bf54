"""queued.max.request.bytes: requests being received share one node-wide memory budget, so
clients announcing large requests and sending them slowly cannot make the broker hold more."""

from __future__ import annotations

import trio

from log.common.errors import ErrorCode
from tests.broker.conftest import WireClient, produce_body, start_broker

FRAME_LIMIT = 1 << 20


async def test_a_half_sent_request_holds_the_memory_another_one_waits_for(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **{
        "socket.request.max.bytes": FRAME_LIMIT, "queued.max.request.bytes": FRAME_LIMIT,
    })  # fmt: skip
    memory = broker.server.request_memory
    a, b = await WireClient.connect(broker.port), await WireClient.connect(broker.port)
    big = produce_body("missing", 0, b"\0" * (FRAME_LIMIT // 2 + 1000))
    frame_a = a.codec.encode_request(0, 8, big)
    frame_b = b.codec.encode_request(0, 8, big)
    await a.stream.send_all(frame_a[: len(frame_a) // 2])  # A announces its frame, sends half
    with trio.fail_after(5):
        while memory.used_bytes < len(frame_a):
            await trio.sleep(0.01)
    # B's whole frame: it must wait, unread, for memory (so its send may block: a task)
    nursery.start_soon(b.stream.send_all, frame_b)
    with trio.fail_after(5):
        while memory.waiting == 0:
            await trio.sleep(0.01)
    with trio.move_on_after(0.5):
        await b.receive()
        raise AssertionError("B was answered while A held the memory")
    await a.stream.send_all(frame_a[len(frame_a) // 2 :])
    with trio.fail_after(10):
        answer_a = await a.receive()
        answer_b = await b.receive()
    for answer in (answer_a, answer_b):
        code = answer.responses[0].partition_responses[0].error_code
        assert code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    await a.aclose()
    await b.aclose()
    with trio.fail_after(5):
        while memory.used_bytes:
            await trio.sleep(0.01)  # every connection gave its share back
