"""The request versions Kafka 4.x clients send (issue 19), each on the wire at its top version
against a real in-process broker, its new fields exercised.

ListOffsets v10 (v7 max timestamp, v8 earliest local, v9 latest tiered, v10 timeout_ms) and
OffsetForLeaderEpoch v4 (flexible).
"""

from __future__ import annotations

from log.common.errors import ErrorCode
from log.protocol.apis import APIS
from log.protocol.offsets import LIST_OFFSETS_REQUEST, OFFSET_FOR_LEADER_EPOCH_REQUEST
from log.records.builder import Record, build_batch
from tests.broker.conftest import WireClient, produce_body

TOPIC = "versions"


def _advertised(api_key: int) -> tuple[int, int]:
    return APIS[api_key].advertised_versions()


async def test_list_offsets_v10_special_timestamps(broker):
    """v10 with every special timestamp: -1 latest, -2 earliest, -3 max timestamp, -4 earliest
    local (= earliest: nothing is tiered), -5 latest tiered (offset -1, epoch -1, as Kafka answers
    without remote storage); the same -4 at v7 is UNSUPPORTED_VERSION for its partition."""
    assert _advertised(2) == (1, 10)
    L = LIST_OFFSETS_REQUEST.cls
    await broker.create_topic(TOPIC)
    client = await WireClient.connect(broker.port)
    batch = build_batch([Record(b"a", timestamp_ms=300), Record(b"b", timestamp_ms=900),
                         Record(b"c", timestamp_ms=500)])  # fmt: skip
    produced = await client.call(0, 9, produce_body(TOPIC, 0, batch))
    assert produced.responses[0].partition_responses[0].error_code == 0

    async def ask(version: int, *timestamps: int) -> list:
        partitions = [L.ListOffsetsPartition(partition_index=0, timestamp=t) for t in timestamps]
        body = L(replica_id=-1, isolation_level=0, timeout_ms=1000,
                 topics=[L.ListOffsetsTopic(name=TOPIC, partitions=partitions)])  # fmt: skip
        response = await client.call(2, version, body)
        return [(p.error_code, p.offset, p.timestamp, p.leader_epoch)
                for p in response.topics[0].partitions]  # fmt: skip

    latest, earliest, max_ts, earliest_local, latest_tiered = await ask(10, -1, -2, -3, -4, -5)
    assert latest[:3] == (0, 3, -1) and latest[3] >= 0
    assert earliest[:3] == (0, 0, -1)
    assert max_ts[:3] == (0, 1, 900)
    assert earliest_local == earliest
    assert latest_tiered == (0, -1, -1, -1)
    assert await ask(7, -4, -3) == [(ErrorCode.UNSUPPORTED_VERSION, -1, -1, -1), max_ts]
    assert (await ask(8, -5, -4))[0][0] == ErrorCode.UNSUPPORTED_VERSION
    assert (await ask(10, -6))[0][0] == ErrorCode.UNSUPPORTED_VERSION
    await client.aclose()


async def test_offset_for_leader_epoch_v4(broker):
    """v4 (flexible): a client asks for the end offset of the current epoch."""
    assert _advertised(23) == (2, 4)
    E = OFFSET_FOR_LEADER_EPOCH_REQUEST.cls
    await broker.create_topic(TOPIC)
    client = await WireClient.connect(broker.port)
    produced = await client.call(0, 9, produce_body(TOPIC, 0, build_batch([Record(b"x")])))
    assert produced.responses[0].partition_responses[0].error_code == 0
    body = E(replica_id=-1, topics=[E.OffsetForLeaderTopic(topic=TOPIC, partitions=[
        E.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)])])  # fmt: skip
    response = await client.call(23, 4, body)
    answer = response.topics[0].partitions[0]
    assert (answer.error_code, answer.end_offset) == (0, 1)
    await client.aclose()
