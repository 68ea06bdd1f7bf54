"""DescribeConfigs sources and synonyms as Kafka's ConfigHelper gives them, on an in-process
broker whose properties set `log.retention.ms` and `num.partitions` explicitly: a node key its
properties set is STATIC_BROKER_CONFIG, one they leave out DEFAULT_CONFIG; a
topic config lists, with include_synonyms, its override then its broker-level name's layers
(dynamic, static, default), and takes its source from the first."""

from __future__ import annotations

import pytest

from log.protocol.admin import DESCRIBE_CONFIGS_REQUEST
from tests.broker.conftest import WireClient, start_broker

pytestmark = pytest.mark.timeout(60)

TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC, STATIC_BROKER, DEFAULT = 1, 4, 5
D = DESCRIBE_CONFIGS_REQUEST.cls


async def _describe(client: WireClient, kind: int, name: str, keys: list[str]) -> dict:
    body = D(include_synonyms=True, resources=[
        D.DescribeConfigsResource(resource_type=kind, resource_name=name, configuration_keys=keys)
    ])  # fmt: skip
    answer = await client.call(32, 2, body)
    (result,) = answer.results
    assert result.error_code == 0, result.error_message
    return {c.name: c for c in result.configs}


async def test_static_default_and_topic_synonyms(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **{"log.retention.ms": 3_600_000})
    await broker.create_topic("t", 1, **{"retention.bytes": "1000"})
    client = await WireClient.connect(broker.port)
    try:
        keys = ["num.partitions", "num.replica.fetchers"]  # the first set by the node's properties
        node = await _describe(client, BROKER, "1", keys)
        partitions, fetchers = node["num.partitions"], node["num.replica.fetchers"]
        assert (partitions.value, partitions.config_source) == ("2", STATIC_BROKER)
        assert (fetchers.value, fetchers.config_source) == ("1", DEFAULT)

        topic = await _describe(client, TOPIC, "t", ["retention.ms", "retention.bytes"])
        ms, size = topic["retention.ms"], topic["retention.bytes"]
        assert (ms.value, ms.config_source) == ("3600000", STATIC_BROKER)
        assert [(s.name, s.value, s.source) for s in ms.synonyms] == [
            ("log.retention.ms", "3600000", STATIC_BROKER),
            ("log.retention.ms", str(7 * 24 * 3600 * 1000), DEFAULT),
        ]
        assert (size.value, size.config_source) == ("1000", DYNAMIC_TOPIC)
        assert not ms.read_only and not size.read_only  # a topic's configs: never read-only
        assert [(s.name, s.source) for s in size.synonyms] == [
            ("retention.bytes", DYNAMIC_TOPIC), ("log.retention.bytes", DEFAULT)]  # fmt: skip
    finally:
        await client.aclose()
