"""KIP-848 consumer group APIs: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

Thin: the heartbeat becomes a `HeartbeatRequest` for the GroupCoordinatorDriver, whose sans-IO
core (log/coordinator/consumer_group_state.py) decides; assignments travel as topic ids, as on
the wire. Authorization as Kafka's KafkaApis: READ on the group and DESCRIBE on each subscribed
topic name for the heartbeat (a regex's topics are not checked, as in Kafka 4.0), DESCRIBE on the
group for the describe (topic names in a description are those the image knows).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from log.common.acl import AclOperation, ResourceType
from log.common.errors import ErrorCode
from log.coordinator.consumer_group_state import HeartbeatRequest
from log.coordinator.group_coordinator import CoordinatorError
from log.protocol.connection import Request
from log.protocol.consumer_group import (
    CONSUMER_GROUP_DESCRIBE_RESPONSE,
    CONSUMER_GROUP_HEARTBEAT_RESPONSE,
)
from log.server.authorization import allowed, authorized_operations
from log.server.broker_context import BrokerContext

if TYPE_CHECKING:
    from log.coordinator.group_driver import GroupCoordinatorDriver

HB = CONSUMER_GROUP_HEARTBEAT_RESPONSE.cls
CD = CONSUMER_GROUP_DESCRIBE_RESPONSE.cls
MAX_DESCRIBE_GROUPS = 1_000
# ConsumerGroupDescribe v1's member_type (KIP-1099): 0 a classic member of an upgraded group,
# 1 a consumer member; our consumer groups hold consumer members only.
CONSUMER_MEMBER_TYPE = 1


def _driver(ctx: BrokerContext) -> GroupCoordinatorDriver:
    assert ctx.group_coordinator is not None, "KafkaServer sets the group coordinator"
    return ctx.group_coordinator


async def handle_consumer_group_heartbeat(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    if not allowed(ctx, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return HB(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, member_epoch=-1,
                  heartbeat_interval_ms=0)  # fmt: skip
    denied = [
        name
        for name in body.subscribed_topic_names or ()
        if not allowed(ctx, request, AclOperation.DESCRIBE, ResourceType.TOPIC, name)
    ]
    if denied:  # Kafka: DESCRIBE on every subscribed topic
        return HB(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, member_epoch=-1,
                  heartbeat_interval_ms=0,
                  error_message=f"not authorized to describe {', '.join(sorted(denied))}")  # fmt: skip
    owned = None
    if body.topic_partitions is not None:
        owned = [(tp.topic_id, list(tp.partitions)) for tp in body.topic_partitions]
    hb = HeartbeatRequest(
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=body.rebalance_timeout_ms,
        subscribed_topic_names=body.subscribed_topic_names,
        subscribed_topic_regex=body.subscribed_topic_regex,  # v1+; "": none any more
        server_assignor=body.server_assignor,
        owned=owned,
        client_id=request.header.client_id or "",
        client_host="/127.0.0.1",
    )
    result = await _driver(ctx).consumer_heartbeat(body.group_id, hb, request.api_version)
    assignment = None
    if result.assignment is not None:
        assignment = HB.Assignment(
            topic_partitions=[
                HB.Assignment.TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
                for topic_id, partitions in sorted(
                    result.assignment.items(), key=lambda item: str(item[0])
                )  # fmt: skip
            ]
        )
    return HB(
        throttle_time_ms=0,
        error_code=result.error_code,
        error_message=result.error_message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=assignment,
    )


def _assignment(partitions: dict, names: dict) -> Any:
    return CD.DescribedGroup.Member.Assignment(
        topic_partitions=[
            CD.DescribedGroup.Member.Assignment.TopicPartitions(
                topic_id=topic_id, topic_name=names.get(topic_id, ""), partitions=sorted(p)
            )
            for topic_id, p in sorted(partitions.items(), key=lambda item: str(item[0]))
        ]
    )


async def handle_consumer_group_describe(ctx: BrokerContext, request: Request) -> object:
    groups = _driver(ctx)
    described = []
    for group_id in request.body.group_ids[:MAX_DESCRIBE_GROUPS]:
        try:
            if not allowed(ctx, request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
                raise CoordinatorError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
            groups.check_group(group_id)
            group = groups.core.consumer_groups.get(group_id)
            if group is None:
                raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND)
        except CoordinatorError as exc:
            described.append(CD.DescribedGroup(error_code=exc.error_code, group_id=group_id,
                                               group_state="", group_epoch=-1,
                                               assignment_epoch=-1, assignor_name="",
                                               members=[]))  # fmt: skip
            continue
        image = ctx.replica_manager.sync()
        names = {topic_id: topic.name for topic_id, topic in image.topics.items()}
        described.append(
            CD.DescribedGroup(
                error_code=ErrorCode.NONE,
                group_id=group_id,
                group_state=group.state.value,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=group.preferred_assignor(),
                members=[
                    CD.DescribedGroup.Member(
                        member_id=m.member_id,
                        instance_id=m.instance_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=list(m.subscribed_topic_names),
                        subscribed_topic_regex=m.subscribed_topic_regex,
                        assignment=_assignment(m.assigned, names),
                        target_assignment=_assignment(group.target.get(m.member_id, {}), names),
                        member_type=CONSUMER_MEMBER_TYPE,
                    )
                    for m in group.members.values()
                ],
                authorized_operations=authorized_operations(
                    ctx, request, ResourceType.GROUP, group_id
                )
                if request.body.include_authorized_operations
                else -2147483648,
            )
        )
    return CD(throttle_time_ms=0, groups=described)
