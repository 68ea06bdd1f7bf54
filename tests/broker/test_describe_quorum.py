"""DescribeQuorum (55) on the broker listener, forwarded to the controller (here the
in-process LocalQuorum: one voter, this node): what kafka-metadata-quorum.sh
--bootstrap-server and kafka-python's describe_metadata_quorum read."""

from __future__ import annotations

from log.common.errors import ErrorCode
from log.protocol.apis import APIS
from log.protocol.metadata_quorum import DESCRIBE_QUORUM_REQUEST
from tests.broker.conftest import WireClient

Q = DESCRIBE_QUORUM_REQUEST.cls


def _ask(*topics: tuple[str, list[int]]):
    return Q(topics=[Q.TopicData(topic_name=name, partitions=[
        Q.TopicData.PartitionData(partition_index=p) for p in partitions])
        for name, partitions in topics])  # fmt: skip


async def test_describe_quorum_of_the_metadata_log(broker):
    assert APIS[55].advertised_versions() == (0, 2)
    await broker.create_topic("t")
    client = await WireClient.connect(broker.port)
    offset = broker.quorum.offset
    for version in (2, 0):
        body = await client.call(55, version, _ask(("__cluster_metadata", [0])))
        assert body.error_code == 0
        [topic] = body.topics
        [partition] = topic.partitions
        assert (topic.topic_name, partition.partition_index, partition.error_code) == (
            "__cluster_metadata", 0, 0)  # fmt: skip
        assert (partition.leader_id, partition.leader_epoch, partition.high_watermark) == (
            1, 1, offset)  # fmt: skip
        assert [(v.replica_id, v.log_end_offset, v.last_fetch_timestamp)
                for v in partition.current_voters] == [(1, offset, -1)]  # fmt: skip
        assert partition.observers == []
    # v2's nodes: the voters' CONTROLLER endpoints (bench/local_quorum.py's node_config)
    body = await client.call(55, 2, _ask(("__cluster_metadata", [0])))
    assert [(n.node_id, [(li.name, li.host, li.port) for li in n.listeners])
            for n in body.nodes] == [(1, [("CONTROLLER", "127.0.0.1", 1)])]  # fmt: skip
    other = await client.call(55, 2, _ask(("t", [0]), ("__cluster_metadata", [0, 1])))
    assert [(t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in other.topics] == [
        ("t", [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]),
        ("__cluster_metadata", [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                (1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])]  # fmt: skip
    await client.aclose()
