"""DescribeLogDirs (35) on the wire: every version 1-5 against a real KafkaServer (v0 went in
Kafka 4.0, KIP-896: tests/broker/test_kip896.py), null vs named topics, sizes matching the logs
on disk, and kafka-python's KafkaAdminClient.describe_log_dirs."""

from __future__ import annotations

import pytest
import trio

from log.protocol.api_versions import API_VERSIONS_REQUEST
from log.protocol.log_dirs import DESCRIBE_LOG_DIRS_REQUEST
from log.records.builder import Record, build_batch
from tests.broker.conftest import WireClient, produce_body

D = DESCRIBE_LOG_DIRS_REQUEST.cls


def describable(topic: str, partitions: list[int]):
    return D.DescribableLogDirTopic(topic=topic, partitions=partitions)


def partitions_of(body) -> dict[tuple[str, int], object]:
    assert len(body.results) == 1
    return {(t.name, p.partition_index): p for t in body.results[0].topics for p in t.partitions}


async def test_api_versions_advertises_describe_log_dirs(broker):
    client = await WireClient.connect(broker.port)
    body = await client.call(18, 2, API_VERSIONS_REQUEST.cls())
    ranges = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert ranges[35] == (1, 5)


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
async def test_describe_log_dirs_every_version(broker, version):
    await broker.create_topic("ld", 2)
    batch = build_batch([Record(b"v%d" % i) for i in range(10)])
    client = await WireClient.connect(broker.port)
    produced = await client.call(0, 8, produce_body("ld", 1, batch))
    assert produced.responses[0].partition_responses[0].error_code == 0

    body = await client.call(35, version, D(topics=None))
    result = body.results[0]
    assert result.error_code == 0
    assert result.log_dir == str(broker.server.ctx.log_manager.log_dir.resolve())
    found = partitions_of(body)
    assert found[("ld", 0)].partition_size == 0
    assert found[("ld", 1)].partition_size == len(batch)
    assert all(p.offset_lag == 0 and not p.is_future_key for p in found.values())
    if version >= 4:
        assert 0 <= result.usable_bytes <= result.total_bytes and result.total_bytes > 0
    else:  # not on the wire: the declared default
        assert result.total_bytes == -1


async def test_describe_log_dirs_named_partitions(broker):
    await broker.create_topic("a", 3)
    await broker.create_topic("b", 1)
    client = await WireClient.connect(broker.port)
    body = await client.call(
        35, 2, D(topics=[describable("a", [0, 2, 7]), describable("nope", [0])])
    )
    assert sorted(partitions_of(body)) == [("a", 0), ("a", 2)]  # unknown ones left out
    body = await client.call(35, 2, D(topics=[]))
    assert partitions_of(body) == {}


def _kafka_python_describe_log_dirs(bootstrap: str) -> list:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return admin.describe_log_dirs()
    finally:
        admin.close()


@pytest.mark.interop
async def test_kafka_python_describe_log_dirs(broker):
    await broker.create_topic("kpl", 2)
    client = await WireClient.connect(broker.port)
    batch = build_batch([Record(b"x")])
    await client.call(0, 8, produce_body("kpl", 0, batch))
    answers = await trio.to_thread.run_sync(_kafka_python_describe_log_dirs, broker.bootstrap)
    [answer] = answers
    assert answer["broker"] == 1
    [log_dir] = answer["log_dirs"]
    sizes = {
        p["partition_index"]: p["partition_size"]
        for t in log_dir["topics"]
        if t["name"] == "kpl"
        for p in t["partitions"]
    }
    assert sizes == {0: len(batch), 1: 0}


async def test_status_lag_from_a_broker_and_a_dead_one(broker):
    """`quorumlog status`'s lag: 0 and the log's size from a live broker; None (`?`) for a
    replica whose broker does not answer (a closed port stands in for a stopped broker)."""
    from tools.admin_client import AdminClient, BrokerInfo
    from tools.status_cmd import add_lag, cluster_status, replica_logs

    await broker.create_topic("st", 2)
    batch = build_batch([Record(b"s")])
    client = await WireClient.connect(broker.port)
    await client.call(0, 8, produce_body("st", 1, batch))
    state = await cluster_status(broker.bootstrap)
    (st,) = [t for t in state["topics"] if t["name"] == "st"]
    assert [p["lag"] for p in st["partitions"]] == [0, 0]
    assert [p["replica_logs"] for p in st["partitions"]] == [
        [{"broker": 1, "offset_lag": 0, "partition_size": 0}],
        [{"broker": 1, "offset_lag": 0, "partition_size": len(batch)}],
    ]

    listener = await trio.open_tcp_listeners(0, host="127.0.0.1")
    dead_port = listener[0].socket.getsockname()[1]
    await listener[0].aclose()
    async with AdminClient(broker.bootstrap, request_timeout_ms=1000) as admin:
        live = BrokerInfo(1, "127.0.0.1", broker.port)
        logs = await replica_logs(admin, (live, BrokerInfo(2, "127.0.0.1", dead_port)))
    assert logs[2] is None and ("st", 1) in logs[1]
    partition = {"partition": 1, "replicas": [1, 2]}
    add_lag("st", partition, logs)
    assert partition["lag"] is None
    assert partition["replica_logs"][1] == {"broker": 2, "offset_lag": None, "partition_size": None}


def test_status_lag_of_a_follower_with_no_fetch_answer_is_unknown():
    """A follower whose fetcher never got an answer reports offset_lag -1; status shows `?`,
    not 0 (a replica that is not fetching is not in sync)."""
    from tools.admin_client import ReplicaLogInfo
    from tools.status_cmd import add_lag

    logs = {1: {("st", 0): ReplicaLogInfo("st", 0, 100, 0, False)},
            2: {("st", 0): ReplicaLogInfo("st", 0, 0, -1, False)}}  # fmt: skip
    partition = {"partition": 0, "replicas": [1, 2]}
    add_lag("st", partition, logs)
    assert partition["lag"] is None
    assert partition["replica_logs"][1] == {"broker": 2, "offset_lag": None, "partition_size": 0}
