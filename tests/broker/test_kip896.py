"""KIP-896: the request versions Kafka 4.0 removed, refused and not advertised by default.

The removed ranges in log/protocol/apis.py are checked against Kafka 4's own JSON message
definitions (kafka-python 3.x ships them as data, kafka/protocol/schemas/resources: their
`validVersions` start where Kafka 4 starts). A real in-process broker answers a removed version
with UNSUPPORTED_VERSION in that version's response layout and keeps the connection; a node with
`quorumlog.legacy.request.versions = true` answers and advertises them again.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from log.common.errors import ErrorCode
from log.protocol.admin import CREATE_TOPICS_REQUEST, DESCRIBE_CONFIGS_REQUEST
from log.protocol.api_versions import API_VERSIONS_REQUEST
from log.protocol.apis import APIS, KEEP_ADVERTISED_LOW
from log.protocol.groups import OFFSET_COMMIT_REQUEST
from tests.broker.conftest import WireClient, start_broker

LEGACY = {"quorumlog.legacy.request.versions": True}
# Removed in Kafka 4 but still sent by our own transaction coordinator (apis.py says so).
KEPT_FOR_OUR_OWN_USE = {27}  # WriteTxnMarkers v0


def kafka4_min_versions() -> dict[int, int]:
    """{api key: the lowest request version Kafka 4 accepts}, from its JSON definitions."""
    kafka = pytest.importorskip("kafka")
    resources = Path(kafka.__file__).parent / "protocol" / "schemas" / "resources"
    if not resources.is_dir():
        pytest.skip(f"{resources}: this kafka-python ships no Kafka JSON definitions")
    found = {}
    for path in resources.glob("*Request.json"):
        text = re.sub(r"^\s*//.*$", "", path.read_text(), flags=re.MULTILINE)
        spec = json.loads(text)
        found[spec["apiKey"]] = int(spec["validVersions"].split("-")[0])
    return found


def test_removed_ranges_are_kafka_4s():
    kafka4 = kafka4_min_versions()
    assert kafka4[1] == 4 and kafka4[3] == 0  # the definitions are Kafka 4's: Fetch v0-3 gone
    for key, api in APIS.items():
        if key not in kafka4 or key in KEPT_FOR_OUR_OWN_USE:
            continue
        first_kept = 0 if api.removed is None else api.removed[1] + 1
        assert first_kept == kafka4[key], api.name


async def advertised(port: int) -> dict[int, tuple[int, int]]:
    client = await WireClient.connect(port)
    body = await client.call(18, 3, API_VERSIONS_REQUEST.cls())
    await client.aclose()
    return {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}


def create_topics(name: str):
    C = CREATE_TOPICS_REQUEST.cls
    topic = C.CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=[],
                             configs=[])  # fmt: skip
    return C(topics=[topic], timeout_ms=5000)


async def test_removed_versions_are_refused_and_not_advertised(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path)
    ranges = await advertised(broker.port)
    for key, (low, high) in ranges.items():
        api = APIS[key]
        assert high == api.implemented[1]
        if key in KEEP_ADVERTISED_LOW:
            assert low == 0, api.name
        else:
            assert low == api.answered()[0] and api.is_implemented(low), api.name
    assert ranges[1][0] == 4 and ranges[8][0] == 2 and ranges[19][0] == 2 and ranges[0][0] == 0

    client = await WireClient.connect(broker.port)
    refused = await client.call(19, 1, create_topics("old"))  # v1's layout: error_message
    assert [(t.name, t.error_code) for t in refused.topics] == [
        ("old", ErrorCode.UNSUPPORTED_VERSION)
    ]
    C = OFFSET_COMMIT_REQUEST.cls  # noqa: N806
    commit = C(group_id="g", topics=[C.OffsetCommitRequestTopic(name="t", partitions=[
        C.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])])  # fmt: skip
    answer = await client.call(8, 1, commit)
    assert answer.topics[0].partitions[0].error_code == ErrorCode.UNSUPPORTED_VERSION
    D = DESCRIBE_CONFIGS_REQUEST.cls  # noqa: N806
    described = await client.call(32, 0, D(resources=[D.DescribeConfigsResource(
        resource_type=2, resource_name="old", configuration_keys=None)]))  # fmt: skip
    assert described.results[0].error_code == ErrorCode.UNSUPPORTED_VERSION
    created = await client.call(19, 2, create_topics("new"))  # the connection still serves
    assert [(t.name, t.error_code) for t in created.topics] == [("new", ErrorCode.NONE)]
    await client.aclose()


async def test_legacy_node_answers_and_advertises_them(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **LEGACY)
    ranges = await advertised(broker.port)
    assert ranges[19] == (0, 7) and ranges[32] == (0, 4) and ranges[8] == (2, 10)  # never had 0-1
    client = await WireClient.connect(broker.port)
    created = await client.call(19, 0, create_topics("old"))
    assert [(t.name, t.error_code) for t in created.topics] == [("old", ErrorCode.NONE)]
    await client.aclose()
