"""ElectLeaders (43): preferred or unclean leader elections on request (kafka-leader-election.sh,
AdminClient.elect_leaders), forwarded to the active controller (quorum/leader_election.py).

v0 has no election type (preferred); null topic_partitions means every partition, answered with
only the partitions that needed an election. The answer waits (at most timeout_ms) until this
broker's image shows the elected leaders, so a Metadata request that follows sees them;
REQUEST_TIMED_OUT for a partition whose election committed but is not visible here yet.
"""

from __future__ import annotations

from log.common.acl import AclOperation
from log.common.errors import ErrorCode
from log.protocol.admin import ELECT_LEADERS_RESPONSE
from log.protocol.connection import Request
from log.server.authorization import require_cluster
from log.server.broker_context import BrokerContext
from quorum.image import PartitionRegistration
from quorum.leader_election import ElectionType, ElectLeadersRequest, ElectLeadersTopic
from quorum.records import NO_LEADER

R = ELECT_LEADERS_RESPONSE.cls


async def handle_elect_leaders(ctx: BrokerContext, request: Request) -> object:
    require_cluster(ctx, request, AclOperation.ALTER)  # authorization
    body = request.body
    election_type = body.election_type if request.header.api_version >= 1 else 0
    topics = (
        None
        if body.topic_partitions is None
        else tuple(ElectLeadersTopic(t.topic, tuple(t.partitions)) for t in body.topic_partitions)
    )
    response = await ctx.controller.elect_leaders(ElectLeadersRequest(election_type, topics))
    elected = [
        (topic.topic, result.partition)
        for topic in response.results
        for result in topic.partitions
        if result.error_code == ErrorCode.NONE
    ]

    def ready(_topic: str, _partition: int, state: PartitionRegistration) -> bool:
        if election_type == ElectionType.PREFERRED:
            return state.leader == state.replicas[0]
        return state.leader != NO_LEADER

    late = not await ctx.wait_for_partitions(elected, ready, body.timeout_ms)
    return R(
        throttle_time_ms=0,
        error_code=response.error_code,
        replica_election_results=[
            R.ReplicaElectionResult(
                topic=topic.topic,
                partition_result=[
                    R.PartitionResult(
                        partition_id=result.partition,
                        error_code=(
                            ErrorCode.REQUEST_TIMED_OUT
                            if late and result.error_code == ErrorCode.NONE
                            else result.error_code
                        ),
                        error_message=result.error_message,
                    )
                    for result in topic.partitions
                ],
            )
            for topic in response.results
        ],
    )
