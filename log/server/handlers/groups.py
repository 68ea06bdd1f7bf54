"""FindCoordinator and the consumer group APIs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups.

Thin: each handler turns the request body into calls on the broker's GroupCoordinatorDriver
(log/coordinator/group_driver.py) and its results into the response body.

FindCoordinator (key_type 0, group): creates __consumer_offsets on first use (answering
COORDINATOR_NOT_AVAILABLE until it exists, clients retry), then answers the leader of partition
`partition_for(group_id)`. Transaction coordinators (key_type 1): handlers/transactions.py.
v4+ (KIP-699) batches: every key of `coordinator_keys` is looked up as a v0-3 key is and
answered as one `coordinators` entry.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from log.common.acl import AclOperation, ResourceType
from log.common.errors import ErrorCode
from log.coordinator.group_coordinator import (
    OFFSET_METADATA_MAX_BYTES,
    OFFSETS_TOPIC,
    CoordinatorError,
    OffsetAndMetadata,
    partition_for,
)
from log.coordinator.group_state import GroupState
from log.protocol.admin import OFFSET_DELETE_RESPONSE
from log.protocol.connection import Request
from log.protocol.coordinator import FIND_COORDINATOR_RESPONSE
from log.protocol.groups import (
    DELETE_GROUPS_RESPONSE,
    DESCRIBE_GROUPS_RESPONSE,
    HEARTBEAT_RESPONSE,
    JOIN_GROUP_RESPONSE,
    LEAVE_GROUP_RESPONSE,
    LIST_GROUPS_RESPONSE,
    OFFSET_COMMIT_RESPONSE,
    OFFSET_FETCH_RESPONSE,
    SYNC_GROUP_RESPONSE,
)
from log.server.authorization import (
    allowed,
    allowed_cluster,
    authorized_operations,
    require_group,
)
from log.server.broker_context import BrokerContext
from log.server.handlers.metadata import listener_of, live_brokers
from log.server.handlers.transactions import find_transaction_coordinator
from quorum.records import NO_LEADER

if TYPE_CHECKING:
    from log.coordinator.group_driver import GroupCoordinatorDriver

FC = FIND_COORDINATOR_RESPONSE.cls
JG = JOIN_GROUP_RESPONSE.cls
OC = OFFSET_COMMIT_RESPONSE.cls
OF = OFFSET_FETCH_RESPONSE.cls
DG = DESCRIBE_GROUPS_RESPONSE.cls
LG = LEAVE_GROUP_RESPONSE.cls
KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
DESCRIBE, GROUP = AclOperation.DESCRIBE, ResourceType.GROUP
MAX_DESCRIBE_GROUPS = 1_000
logger = logging.getLogger(__name__)


def driver(ctx: BrokerContext) -> GroupCoordinatorDriver:
    assert ctx.group_coordinator is not None, "KafkaServer sets the group coordinator"
    return ctx.group_coordinator


def _no_coordinator(code: int, message: str) -> object:
    return FC(error_code=code, error_message=message, node_id=-1, host="", port=-1)


async def handle_find_coordinator(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    key_type = getattr(body, "key_type", KEY_TYPE_GROUP)
    if request.api_version < 4:
        return await _find_one(ctx, request, key_type, body.key)
    coordinators = []
    for key in body.coordinator_keys:
        one = await _find_one(ctx, request, key_type, key)
        coordinators.append(
            FC.Coordinator(
                key=key,
                node_id=one.node_id,
                host=one.host,
                port=one.port,
                error_code=one.error_code,
                error_message=one.error_message,
            )
        )
    return FC(coordinators=coordinators)


async def _find_one(ctx: BrokerContext, request: Request, key_type: int, key: str) -> Any:
    """One key's coordinator, in the v0-3 body's fields."""
    if key_type == KEY_TYPE_TRANSACTION:
        return await find_transaction_coordinator(ctx, request, key)
    if key_type != KEY_TYPE_GROUP:
        return _no_coordinator(ErrorCode.INVALID_REQUEST, f"unknown key_type {key_type}")
    if not key:
        return _no_coordinator(ErrorCode.INVALID_GROUP_ID, "empty group id")
    if not allowed(ctx, request, AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return _no_coordinator(ErrorCode.GROUP_AUTHORIZATION_FAILED, "group DESCRIBE refused")
    groups = driver(ctx)
    if not await groups.ensure_offsets_topic():
        return _no_coordinator(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"creating {OFFSETS_TOPIC}")
    image = ctx.replica_manager.sync()
    topic = image.topic(OFFSETS_TOPIC)
    assert topic is not None
    state = topic.partitions.get(partition_for(key, groups.num_partitions))
    if state is None or state.leader == NO_LEADER:
        return _no_coordinator(ErrorCode.COORDINATOR_NOT_AVAILABLE, "no leader")
    for broker_id, host, port, _rack in live_brokers(image, listener_of(request)):
        if broker_id == state.leader:
            return FC(error_code=0, error_message=None, node_id=broker_id, host=host, port=port)
    return _no_coordinator(ErrorCode.COORDINATOR_NOT_AVAILABLE, "coordinator not live")


async def handle_join_group(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    # authorization: READ on the group (Kafka's KafkaApis)
    require_group(ctx, request, AclOperation.READ, body.group_id)
    if body.reason:  # v8+: why the client (re)joins, logged as Kafka does
        logger.info("group %s: member %r joins, client reason: %.255s",
                    body.group_id, body.member_id, body.reason)  # fmt: skip
    result = await driver(ctx).join(
        body.group_id,
        member_id=body.member_id,
        group_instance_id=body.group_instance_id,
        client_id=request.header.client_id or "",
        client_host="/127.0.0.1",
        session_timeout_ms=body.session_timeout_ms,
        rebalance_timeout_ms=body.rebalance_timeout_ms,
        protocol_type=body.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in body.protocols),
        require_known_member_id=request.api_version >= 4,
        supports_skip_assignment=request.api_version >= 9,
    )
    return JG(
        error_code=result.error_code,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            JG.JoinGroupResponseMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
            )
            for m in result.members
        ],
    )


async def handle_sync_group(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    SG: Any = SYNC_GROUP_RESPONSE.cls  # made at run time by schema.py: untyped
    if request.api_version >= 5 and (body.protocol_type is None or body.protocol_name is None):
        # v5+: both are mandatory (Kafka's areMandatoryProtocolTypeAndNamePresent)
        return SG(error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    # authorization: READ on the group (Kafka's KafkaApis)
    require_group(ctx, request, AclOperation.READ, body.group_id)
    result = await driver(ctx).sync(
        body.group_id,
        member_id=body.member_id,
        generation_id=body.generation_id,
        assignments={a.member_id: bytes(a.assignment) for a in body.assignments},
        group_instance_id=body.group_instance_id,
        protocol_type=body.protocol_type,
        protocol_name=body.protocol_name,
    )
    return SG(
        error_code=result.error_code,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


async def handle_heartbeat(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    # authorization: READ on the group (Kafka's KafkaApis)
    require_group(ctx, request, AclOperation.READ, body.group_id)
    code = driver(ctx).heartbeat(
        body.group_id, body.member_id, body.generation_id, body.group_instance_id
    )
    return HEARTBEAT_RESPONSE.cls(error_code=code)


async def handle_leave_group(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    # authorization: READ on the group (Kafka's KafkaApis)
    require_group(ctx, request, AclOperation.READ, body.group_id)
    if request.api_version >= 3:
        members = body.members
        for m in members:
            if m.reason:  # v5+: why the member leaves, logged as Kafka does
                logger.info("group %s: member %r (instance %r) leaves, client reason: %.255s",
                            body.group_id, m.member_id, m.group_instance_id, m.reason)  # fmt: skip
        code, codes = driver(ctx).leave(
            body.group_id, [(m.member_id, m.group_instance_id) for m in members]
        )
        return LG(
            error_code=code,
            members=[
                LG.MemberResponse(
                    member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=c
                )
                for m, c in zip(members, codes, strict=True)
            ],
        )
    code, codes = driver(ctx).leave(body.group_id, [(body.member_id, None)])
    return LG(error_code=code or codes[0])


async def handle_offset_commit(ctx: BrokerContext, request: Request) -> object:
    """v1's per-partition commit_timestamp and v2-v4's retention_time_ms are honoured as Kafka
    does: -1 means now / offsets.retention.ms, else the offset expires retention_time_ms from
    now (written as OffsetCommitValue version 1). v10 names topics by id: resolved through this
    broker's image, an id it does not know is UNKNOWN_TOPIC_ID for each of its partitions
    (before topic authorization, as Kafka's KafkaApis), and the answer names them by id."""
    body = request.body
    by_id = request.api_version >= 10
    # authorization: READ on the group, and on each topic (TOPIC_AUTHORIZATION_FAILED)
    require_group(ctx, request, AclOperation.READ, body.group_id)
    image = ctx.replica_manager.sync()
    names = [_topic_name(image, t, by_id) for t in body.topics]
    may_read = {name: allowed(ctx, request, AclOperation.READ, ResourceType.TOPIC, name)
                for name in names if name is not None}  # fmt: skip
    now_ms = ctx.clock_ms()
    retention_time_ms = body.retention_time_ms
    expire_timestamp_ms = -1 if retention_time_ms == -1 else now_ms + retention_time_ms
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    codes: dict[tuple[Any, int], int] = {}
    max_metadata_bytes = ctx.config.props.get(
        "offset.metadata.max.bytes", OFFSET_METADATA_MAX_BYTES
    )
    for name, t in zip(names, body.topics, strict=True):
        known = image.topic(name) if name is not None else None
        for p in t.partitions:
            tp = (name, p.partition_index)
            metadata = p.committed_metadata or ""
            if name is None:
                codes[tp] = ErrorCode.UNKNOWN_TOPIC_ID
            elif not may_read[name]:
                codes[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif known is None or p.partition_index not in known.partitions:
                codes[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif len(metadata) > max_metadata_bytes:
                codes[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                commit_timestamp_ms = p.commit_timestamp
                offsets[(name, p.partition_index)] = OffsetAndMetadata(
                    p.committed_offset,
                    p.committed_leader_epoch,
                    metadata,
                    now_ms if commit_timestamp_ms == -1 else commit_timestamp_ms,
                    expire_timestamp_ms,
                )
    code = await driver(ctx).commit_offsets(
        body.group_id,
        body.member_id,
        body.generation_id_or_member_epoch,
        offsets,
        body.group_instance_id,
        request.api_version,
    )
    for tp in offsets:
        codes[tp] = code
    return OC(
        topics=[
            OC.OffsetCommitResponseTopic(
                **({"topic_id": t.topic_id} if by_id else {"name": t.name}),
                partitions=[
                    OC.OffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=codes[(name, p.partition_index)],
                    )
                    for p in t.partitions
                ],
            )
            for name, t in zip(names, body.topics, strict=True)
        ]
    )


def _topic_name(image: Any, topic: Any, by_id: bool) -> str | None:
    """A request topic's name: its own, or (v10+ OffsetCommit/OffsetFetch, named by id) the
    name this broker's image has for its id, None when the image does not know the id."""
    return image.topic_name(topic.topic_id) if by_id else topic.name


async def handle_offset_fetch(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    if request.api_version >= 8:  # a batch of groups, each answered on its own
        return OF(groups=[await _fetch_group(ctx, request, g) for g in body.groups])
    # authorization: DESCRIBE on the group
    require_group(ctx, request, AclOperation.DESCRIBE, body.group_id)
    wanted = None
    if body.topics is not None:
        wanted = [(t.name, p) for t in body.topics for p in t.partition_indexes]
    code, rows = _fetch_offsets(ctx, request, body.group_id, wanted, None, -1)
    if code and request.api_version >= 2:
        return OF(topics=[], error_code=code)
    return OF(
        topics=[
            OF.OffsetFetchResponseTopic(
                name=name,
                partitions=[OF.OffsetFetchResponsePartition(**row) for row in parts],
            )
            for name, parts in rows.items()
        ],
        error_code=0,
    )


async def _fetch_group(ctx: BrokerContext, request: Request, group: object) -> object:
    """One group of an OffsetFetch v8+ batch. v10 names topics by id: an id this broker's image
    does not know is UNKNOWN_TOPIC_ID for each partition asked; fetching all of a group's
    offsets answers the topics the image has an id for (a deleted topic's offsets, which no id
    names any more, are left out)."""
    G = OF.OffsetFetchResponseGroup  # noqa: N806
    P = G.OffsetFetchResponseTopics.OffsetFetchResponsePartitions  # noqa: N806
    group_id = group.group_id  # type: ignore[attr-defined]
    if not allowed(ctx, request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return G(group_id=group_id, topics=[], error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    by_id = request.api_version >= 10
    image = ctx.replica_manager.sync()
    topics = group.topics  # type: ignore[attr-defined]
    wanted = None
    unknown_ids: list[Any] = []
    if topics is not None:
        named = [(_topic_name(image, t, by_id), t) for t in topics]
        unknown_ids = [t for name, t in named if name is None]
        wanted = [(name, p) for name, t in named if name is not None
                  for p in t.partition_indexes]  # fmt: skip
    code, rows = _fetch_offsets(
        ctx, request, group_id, wanted,
        getattr(group, "member_id", None), getattr(group, "member_epoch", -1),
    )  # fmt: skip
    if code:
        return G(group_id=group_id, topics=[], error_code=code)
    if not by_id:
        answered = [
            G.OffsetFetchResponseTopics(name=name, partitions=[P(**row) for row in parts])
            for name, parts in rows.items()
        ]
    else:
        ids = image.topic_ids_by_name
        answered = [
            G.OffsetFetchResponseTopics(topic_id=ids[name], partitions=[P(**row) for row in parts])
            for name, parts in rows.items()
            if name in ids
        ] + [
            G.OffsetFetchResponseTopics(topic_id=t.topic_id, partitions=[
                P(partition_index=p, committed_offset=-1, metadata="",
                  error_code=ErrorCode.UNKNOWN_TOPIC_ID)
                for p in t.partition_indexes])
            for t in unknown_ids
        ]  # fmt: skip
    return G(group_id=group_id, topics=answered, error_code=0)


def _fetch_offsets(
    ctx: BrokerContext,
    request: Request,
    group_id: str,
    wanted: list[tuple[str, int]] | None,
    member_id: str | None,
    member_epoch: int,
) -> tuple[int, dict[str, list[dict]]]:
    """(group error, topic -> partition rows) of one group's committed offsets. v0-1 have no
    group error: each partition carries it."""
    try:
        found = driver(ctx).fetch_offsets(group_id, wanted, member_id, member_epoch)
    except CoordinatorError as exc:
        if request.api_version >= 2:
            return exc.error_code, {}
        rows = {tp: {"committed_offset": -1, "metadata": "", "error_code": exc.error_code}
                for tp in wanted or []}  # fmt: skip
        return ErrorCode.NONE, _rows_by_topic(rows)
    # KIP-447: a consumer that asks for stable offsets waits (retries) while a transaction's
    # offset commit for the partition awaits its marker, instead of reading the older offset
    unstable = (
        driver(ctx).core.pending_txn_partitions(group_id)
        if getattr(request.body, "require_stable", False)
        else set()
    )
    # authorization: DESCRIBE on each topic; a listing of all leaves the others out
    denied = {tp[0] for tp in found
              if not allowed(ctx, request, DESCRIBE, ResourceType.TOPIC, tp[0], count=bool(wanted))}  # fmt: skip
    found = {tp: (None if tp[0] in denied else o) for tp, o in found.items()
             if wanted is not None or tp[0] not in denied}  # fmt: skip
    rows = {
        tp: {
            "committed_offset": -1 if o is None or tp in unstable else o.offset,
            "committed_leader_epoch": -1 if o is None else o.leader_epoch,
            "metadata": "" if o is None else o.metadata,
            "error_code": (
                ErrorCode.TOPIC_AUTHORIZATION_FAILED
                if tp[0] in denied
                else ErrorCode.UNSTABLE_OFFSET_COMMIT
                if tp in unstable
                else 0
            ),
        }
        for tp, o in found.items()
    }
    return ErrorCode.NONE, _rows_by_topic(rows)


def _rows_by_topic(rows: dict[tuple[str, int], dict]) -> dict[str, list[dict]]:
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition), row in rows.items():
        by_topic.setdefault(topic, []).append({"partition_index": partition, **row})
    return by_topic


async def handle_list_groups(ctx: BrokerContext, request: Request) -> object:
    """Groups this coordinator owns; v4 filters by state (KIP-518, case-insensitive, as
    Kafka's parse), v5 by type (classic, consumer: KIP-848)."""
    groups = driver(ctx)
    groups.sync_ownership()
    overviews = groups.core.list_groups()
    body = request.body
    states = {s.lower() for s in getattr(body, "states_filter", None) or ()}
    types = {t.lower() for t in getattr(body, "types_filter", None) or ()}
    if types:
        overviews = [o for o in overviews if o.group_type in types]
    L = LIST_GROUPS_RESPONSE.cls
    may_list_all = allowed_cluster(ctx, request, AclOperation.DESCRIBE, count=False)
    return L(
        error_code=0,
        groups=[
            L.ListedGroup(
                group_id=o.group_id,
                protocol_type=o.protocol_type,
                group_state=o.state,
                group_type=o.group_type,
            )  # fmt: skip
            for o in overviews
            if not states or o.state.lower() in states
            # authorization: every group with DESCRIBE on the cluster, else those described
            if may_list_all or allowed(ctx, request, DESCRIBE, GROUP, o.group_id, count=False)
        ],
    )


async def handle_describe_groups(ctx: BrokerContext, request: Request) -> object:
    """A classic group's state and members. A group that does not exist (or is a KIP-848
    consumer group: ConsumerGroupDescribe describes those) is Dead without an error before v6,
    GROUP_ID_NOT_FOUND with Kafka's message from v6 (KIP-1043)."""
    groups = driver(ctx)
    described = []
    for group_id in request.body.groups[:MAX_DESCRIBE_GROUPS]:
        try:
            if not allowed(ctx, request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
                raise CoordinatorError(ErrorCode.GROUP_AUTHORIZATION_FAILED)  # authorization
            groups.check_group(group_id)
        except CoordinatorError as exc:
            described.append(
                DG.DescribedGroup(
                    error_code=exc.error_code,
                    group_id=group_id,
                    group_state="",
                    protocol_type="",
                    protocol_data="",
                    members=[],
                )  # fmt: skip
            )
            continue
        group = groups.core.groups.get(group_id)
        if group is None:
            state = GroupState.DEAD.value if group_id not in groups.core.offsets else "Empty"
            if group_id in groups.core.consumer_groups:
                state = GroupState.DEAD.value  # Kafka: not a classic group (ConsumerGroupDescribe)
            if state == GroupState.DEAD.value and request.api_version >= 6:
                # KIP-1043: v6 says so instead of describing a Dead group (Kafka's messages)
                message = (f"Group {group_id} is not a classic group."
                           if group_id in groups.core.consumer_groups
                           else f"Group {group_id} not found.")  # fmt: skip
                described.append(DG.DescribedGroup(
                    error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=message,
                    group_id=group_id, group_state="", protocol_type="", protocol_data="",
                    members=[]))  # fmt: skip
                continue
            described.append(
                DG.DescribedGroup(
                    error_code=0,
                    group_id=group_id,
                    group_state=state,
                    protocol_type="",
                    protocol_data="",
                    members=[],
                )  # fmt: skip
            )
            continue
        stable = group.state is GroupState.STABLE
        members = [
            DG.DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata_for(group.protocol_name)
                if stable and group.protocol_name
                else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        described.append(
            DG.DescribedGroup(
                error_code=0,
                group_id=group_id,
                group_state=group.state.value,
                protocol_type=group.protocol_type or "",
                protocol_data=group.protocol_name or "",
                members=members,
                authorized_operations=authorized_operations(ctx, request, GROUP, group_id)
                if getattr(request.body, "include_authorized_operations", False)
                else -2147483648,  # KIP-430; INT32 min: not asked
            )
        )
    return DG(groups=described)


async def handle_delete_groups(ctx: BrokerContext, request: Request) -> object:
    D = DELETE_GROUPS_RESPONSE.cls
    results = []
    for group_id in request.body.groups_names[:MAX_DESCRIBE_GROUPS]:
        if allowed(ctx, request, AclOperation.DELETE, ResourceType.GROUP, group_id):
            code = await driver(ctx).delete_group(group_id)
        else:  # authorization: DELETE on the group
            code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        results.append(D.DeletableGroupResult(group_id=group_id, error_code=code))
    return D(throttle_time_ms=0, results=results)


async def handle_offset_delete(ctx: BrokerContext, request: Request) -> object:
    """OffsetDelete (47): a group's committed offsets of some partitions; partitions of
    unknown topics are UNKNOWN_TOPIC_OR_PARTITION, as in Kafka."""
    O = OFFSET_DELETE_RESPONSE.cls  # noqa: N806, E741
    body = request.body
    # authorization: DELETE on the group
    require_group(ctx, request, AclOperation.DELETE, body.group_id)
    image = ctx.replica_manager.sync()
    known = []
    unknown = set()
    for topic in body.topics:
        described = image.topic(topic.name)
        for p in topic.partitions:
            if described is None or p.partition_index not in described.partitions:
                unknown.add((topic.name, p.partition_index))
            else:
                known.append((topic.name, p.partition_index))
    code, results = await driver(ctx).delete_offsets(body.group_id, known)
    if code:
        return O(error_code=code, throttle_time_ms=0, topics=[])
    return O(
        error_code=ErrorCode.NONE,
        throttle_time_ms=0,
        topics=[
            O.OffsetDeleteResponseTopic(
                name=topic.name,
                partitions=[
                    O.OffsetDeleteResponseTopic.OffsetDeleteResponsePartition(
                        partition_index=p.partition_index,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        if (topic.name, p.partition_index) in unknown
                        else results[(topic.name, p.partition_index)],
                    )
                    for p in topic.partitions
                ],
            )
            for topic in body.topics
        ],
    )
