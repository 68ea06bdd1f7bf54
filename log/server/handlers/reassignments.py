"""AlterPartitionReassignments (45) and ListPartitionReassignments (46): move partitions'
replicas to other brokers (kafka-reassign-partitions.sh, AdminClient.alter_partition_
reassignments), decided by the active controller (quorum/reassignment.py).

v1 (KIP-860) may disallow replication factor changes (the controller answers
INVALID_REPLICATION_FACTOR per partition then). Alter answers once this broker's image shows
each started (or cancelled) reassignment, at most
timeout_ms (REQUEST_TIMED_OUT for one committed but not visible yet); the move itself finishes
later, when the new replicas are in sync. List reads the ongoing reassignments from this
broker's image: null topics means all of them; named partitions not being reassigned, and
unknown topics, are left out (as Kafka's controller does).
"""

from __future__ import annotations

from typing import Any

from log.common.acl import AclOperation
from log.common.errors import ErrorCode
from log.protocol.admin import (
    ALTER_PARTITION_REASSIGNMENTS_RESPONSE,
    LIST_PARTITION_REASSIGNMENTS_RESPONSE,
)
from log.protocol.connection import Request
from log.server.authorization import require_cluster
from log.server.broker_context import BrokerContext
from quorum.image import PartitionRegistration
from quorum.reassignment import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)

A: Any = ALTER_PARTITION_REASSIGNMENTS_RESPONSE.cls  # made at run time by schema.py: untyped
L: Any = LIST_PARTITION_REASSIGNMENTS_RESPONSE.cls


async def handle_alter_partition_reassignments(ctx: BrokerContext, request: Request) -> object:
    require_cluster(ctx, request, AclOperation.ALTER)  # authorization
    body = request.body
    wanted = AlterPartitionReassignmentsRequest(
        tuple(
            ReassignableTopic(
                t.name,
                tuple(
                    ReassignablePartition(
                        p.partition_index, None if p.replicas is None else tuple(p.replicas)
                    )
                    for p in t.partitions
                ),
            )
            for t in body.topics
        ),
        body.allow_replication_factor_change,  # v0: always true
    )
    response = await ctx.controller.alter_partition_reassignments(wanted)
    targets = {(t.name, p.partition): p.replicas for t in wanted.topics for p in t.partitions}
    changed = [
        (topic.name, result.partition)
        for topic in response.topics
        for result in topic.partitions
        if result.error_code == ErrorCode.NONE
    ]

    def ready(topic: str, partition: int, state: PartitionRegistration) -> bool:
        target = targets.get((topic, partition))
        if target is None:  # a cancel: the added replicas are gone
            return not state.adding_replicas
        return state.target_replicas == target

    late = not await ctx.wait_for_partitions(changed, ready, body.timeout_ms)
    return A(
        throttle_time_ms=0,
        allow_replication_factor_change=body.allow_replication_factor_change,
        error_code=response.error_code,
        error_message=response.error_message,
        responses=[
            A.ReassignableTopicResponse(
                name=topic.name,
                partitions=[
                    A.ReassignablePartitionResponse(
                        partition_index=result.partition,
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
            for topic in response.topics
        ],
    )


async def handle_list_partition_reassignments(ctx: BrokerContext, request: Request) -> object:
    require_cluster(ctx, request, AclOperation.DESCRIBE)  # authorization
    body = request.body
    image = ctx.replica_manager.sync()
    asked: dict[str, set[int] | None]
    if body.topics is None:
        asked = {name: None for name in sorted(image.topic_ids_by_name)}
    else:
        asked = {t.name: set(t.partition_indexes) for t in body.topics}
    topics = []
    for name, partitions in asked.items():
        topic = image.topic(name)
        if topic is None:
            continue
        ongoing = [
            L.OngoingPartitionReassignment(
                partition_index=index,
                replicas=list(state.replicas),
                adding_replicas=list(state.adding_replicas),
                removing_replicas=list(state.removing_replicas),
            )
            for index, state in sorted(topic.partitions.items())
            if state.is_reassigning and (partitions is None or index in partitions)
        ]
        if ongoing:
            topics.append(L.OngoingTopicReassignment(name=name, partitions=ongoing))
    return L(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, topics=topics)
