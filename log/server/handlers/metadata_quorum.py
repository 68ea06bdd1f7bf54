"""DescribeQuorum (55) on the broker listener: `kafka-metadata-quorum.sh --bootstrap-server`
(and kafka-python's describe_metadata_quorum) ask a broker, which forwards the question to the
active controller, as Kafka's brokers do.

Authorization: DESCRIBE on the cluster (Kafka's ControllerApis). The request must name the
metadata log alone, __cluster_metadata partition 0, else every partition it names is
UNKNOWN_TOPIC_OR_PARTITION (Kafka's KafkaRaftClient). The answer maps the controller's
`quorum.metadata_quorum.DescribeQuorumResponse`: the leader, its Raft term as the epoch, the
committed metadata offset as the high watermark, and per voter the offset the leader knows it
holds (its own commit index, a follower's match index) as log_end_offset. Fetch and catch-up
times and observers (brokers following the log) are not tracked: -1 and an empty list. v2's
`nodes` are the voters' CONTROLLER endpoints.
"""

from __future__ import annotations

from typing import Any

from log.common.acl import AclOperation
from log.common.errors import ErrorCode
from log.protocol.connection import Request
from log.protocol.metadata_quorum import DESCRIBE_QUORUM_RESPONSE
from log.server.authorization import require_cluster
from log.server.broker_context import BrokerContext
from quorum.metadata_quorum import parse_endpoint

METADATA_TOPIC = "__cluster_metadata"
CONTROLLER_LISTENER = "CONTROLLER"
D: Any = DESCRIBE_QUORUM_RESPONSE.cls  # made at run time by schema.py: untyped


async def handle_describe_quorum(ctx: BrokerContext, request: Request) -> object:
    require_cluster(ctx, request, AclOperation.DESCRIBE)  # authorization
    asked = [(t.topic_name, p.partition_index) for t in request.body.topics for p in t.partitions]
    if asked != [(METADATA_TOPIC, 0)]:
        return D(error_code=0, topics=[
            D.TopicData(topic_name=t.topic_name, partitions=[
                D.TopicData.PartitionData(
                    partition_index=p.partition_index,
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                for p in t.partitions])
            for t in request.body.topics])  # fmt: skip
    quorum = await ctx.controller.describe_quorum()
    if quorum.error_code:
        return D(error_code=quorum.error_code, error_message=quorum.error_message or None)
    state = D.TopicData.PartitionData.ReplicaState
    voters = [state(replica_id=v.voter_id, log_end_offset=v.match_index) for v in quorum.voters]
    nodes = []
    for v in quorum.voters:
        endpoint = parse_endpoint(v.controller_endpoint)
        if v.voter_id >= 0 and endpoint is not None:
            host, port = endpoint
            nodes.append(D.Node(node_id=v.voter_id, listeners=[
                D.Node.Listener(name=CONTROLLER_LISTENER, host=host, port=port)]))  # fmt: skip
    return D(
        error_code=0,
        topics=[D.TopicData(topic_name=METADATA_TOPIC, partitions=[D.TopicData.PartitionData(
            partition_index=0, error_code=0, leader_id=quorum.leader_id,
            leader_epoch=quorum.leader_epoch, high_watermark=quorum.high_watermark,
            current_voters=voters, observers=[])])],
        nodes=nodes,
    )  # fmt: skip
