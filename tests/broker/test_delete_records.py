"""DeleteRecords (21) against an in-process broker: the log start offset moves, reads below it
are out of range, and every partition-level refusal has Kafka's error code."""

from __future__ import annotations

from log.common.errors import ErrorCode
from log.protocol.admin import DELETE_RECORDS_REQUEST
from log.records.builder import Record, build_batch
from tests.broker.conftest import WireClient, fetch_body, produce_body

D = DELETE_RECORDS_REQUEST.cls


def delete_body(topic: str, offsets: dict[int, int], timeout_ms: int = 5000):
    return D(
        topics=[D.DeleteRecordsTopic(name=topic, partitions=[
            D.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in offsets.items()
        ])],
        timeout_ms=timeout_ms,
    )  # fmt: skip


async def test_delete_records_moves_the_log_start_offset(broker):
    await broker.create_topic("dr", 3)
    await broker.create_topic("compacted", 1, **{"cleanup.policy": "compact"})
    client = await WireClient.connect(broker.port)
    for i in range(3):  # offsets 0-2, 3-5, 6-8 in partition 0; one batch in partition 1
        await client.call(0, 8, produce_body("dr", 0, build_batch(
            [Record(b"v%d" % j, key=b"k") for j in range(3 * i, 3 * i + 3)])))  # fmt: skip
    await client.call(0, 8, produce_body("dr", 1, build_batch([Record(b"one")])))
    for version in (0, 1, 2):
        response = await client.call(21, version, delete_body("dr", {0: 4, 1: -1, 2: 5, 7: 0}))
        results = {p.partition_index: (p.low_watermark, p.error_code)
                   for p in response.topics[0].partitions}  # fmt: skip
        assert results == {
            0: (4, ErrorCode.NONE),
            1: (1, ErrorCode.NONE),  # -1: up to the high watermark
            2: (-1, ErrorCode.OFFSET_OUT_OF_RANGE),  # above the high watermark (0)
            7: (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        }
    # Below the log start offset is gone; from it on, reads go on (mid-batch: whole batch).
    below = await client.call(1, 11, fetch_body("dr", 0, 3))
    assert below.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    at = (await client.call(1, 11, fetch_body("dr", 0, 4))).responses[0].partitions[0]
    assert at.error_code == ErrorCode.NONE and at.log_start_offset == 4 and at.records
    # Never backwards, and a compacted topic's records are not deleted by offset.
    response = await client.call(21, 2, delete_body("dr", {0: 2}))
    assert (response.topics[0].partitions[0].low_watermark, response.topics[0].partitions[0]
            .error_code) == (4, ErrorCode.NONE)  # fmt: skip
    response = await client.call(21, 2, delete_body("compacted", {0: 0}))
    assert response.topics[0].partitions[0].error_code == ErrorCode.POLICY_VIOLATION
    await client.aclose()
