"""The batch's timestamp type reaches the fetch client's records: a LogAppendTime topic reports
type 1 and the broker's append time (not the producer's timestamps), a CreateTime topic type 0
and the producer's timestamps. Against the real in-process KafkaServer."""

from __future__ import annotations

from producer.fetch_client import FetchClient
from producer.producer import Producer
from tests.broker.conftest import no_server_errors, start_broker  # noqa: F401 (autouse)

PRODUCER_TIMESTAMP_MS = 1_000_000  # 1970: far from any append time


async def test_fetch_client_reports_log_append_time(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path)
    await broker.create_topic("appended", 1, **{"message.timestamp.type": "LogAppendTime"})
    await broker.create_topic("created", 1)
    results = {}
    async with Producer(broker.bootstrap, linger_ms=2, seed=1) as producer:
        for topic in ("appended", "created"):
            handles = [
                await producer.send(
                    topic, b"v%d" % i, partition=0, timestamp_ms=PRODUCER_TIMESTAMP_MS + i
                )
                for i in range(20)
            ]
            await producer.flush()
            results[topic] = [h.result() for h in handles]
    async with FetchClient(broker.bootstrap) as client:
        appended = await client.read_all("appended", 0, 0, 20)
        created = await client.read_all("created", 0, 0, 20)
    assert [r.value for r in appended] == [b"v%d" % i for i in range(20)]
    assert {r.timestamp_type for r in appended} == {1}
    # Every record carries its batch's append time, which the broker also acknowledged.
    acknowledged = {r.offset: r.timestamp_ms for r in results["appended"]}
    assert all(ms > PRODUCER_TIMESTAMP_MS + 20 for ms in acknowledged.values())
    assert [r.timestamp_ms for r in appended] == [acknowledged[r.offset] for r in appended]
    assert [(r.timestamp_ms, r.timestamp_type) for r in created] == [
        (PRODUCER_TIMESTAMP_MS + i, 0) for i in range(20)
    ]
