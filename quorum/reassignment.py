"""Partition reassignment (KIP-455: AlterPartitionReassignments, kafka-reassign-partitions.sh),
sans-IO. Kafka's ReplicationControlManager and PartitionReassignmentReplicas.

Moving a partition from its replicas R to a target T happens in two metadata changes:

1. Start: the replicas become T followed by the members of R not in T, with
   `adding_replicas` = T - R and `removing_replicas` = R - T. The new replicas create the log and
   fetch from the leader like any follower; the leader takes them into the ISR once they have
   caught up (AlterPartition). Writes go on meanwhile, acknowledged by the whole ISR.
2. Completion, in the AlterPartition that brings the last replica of T into the ISR (or at
   once when T is already in sync): the replicas become T, the ISR loses the removed replicas, both
   lists are cleared, and a leader that was removed hands over to the first ISR member of T.
   The removed replicas stop following and delete their logs when they see the change.

No acknowledged record is lost: a record acknowledged with acks=all is on every ISR member, and
an adding replica joins the ISR only once it holds everything up to the high watermark, so the
final ISR (the old ISR's members in T plus every added replica) holds it.

A new target replaces an ongoing reassignment (computed from the replicas before it started:
those not being added); a null target cancels it (the added replicas go, the removed stay).
Errors per partition are Kafka's: INVALID_REPLICA_ASSIGNMENT (empty, duplicate or unregistered
brokers), UNKNOWN_TOPIC_OR_PARTITION, NO_REASSIGNMENT_IN_PROGRESS (a cancel with nothing to
cancel), and INVALID_REPLICATION_FACTOR when the request disallows replication factor changes
(KIP-860, AlterPartitionReassignments v1) and the target's size differs from the replica set
the partition is headed for (its replicas, less those being removed), with Kafka's message.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from log.common.errors import ErrorCode
from quorum.image import MetadataImage, PartitionRegistration
from quorum.partition_change import ElectionPolicy, change_record, partition_change
from quorum.records import MetadataRecord


@dataclass(frozen=True)
class ReassignablePartition:
    partition: int
    replicas: tuple[int, ...] | None  # None: cancel the ongoing reassignment


@dataclass(frozen=True)
class ReassignableTopic:
    name: str
    partitions: tuple[ReassignablePartition, ...]


@dataclass(frozen=True)
class AlterPartitionReassignmentsRequest:
    topics: tuple[ReassignableTopic, ...]
    allow_replication_factor_change: bool = True  # KIP-860


@dataclass(frozen=True)
class ReassignmentResult:
    partition: int
    error_code: ErrorCode
    error_message: str | None = None


@dataclass(frozen=True)
class ReassignmentTopicResult:
    name: str
    partitions: tuple[ReassignmentResult, ...]


@dataclass(frozen=True)
class AlterPartitionReassignmentsResponse:
    error_code: ErrorCode
    topics: tuple[ReassignmentTopicResult, ...] = ()
    error_message: str | None = None


def original_replicas(state: PartitionRegistration) -> tuple[int, ...]:
    """The replicas before the ongoing reassignment started (those not being added)."""
    return tuple(r for r in state.replicas if r not in state.adding_replicas)


def one_change(old: PartitionRegistration, new: PartitionRegistration) -> PartitionRegistration:
    """`new` as one change from `old`: partition epoch + 1, leader epoch + 1 if the leader
    changed (however many steps computed it)."""
    if new == old:
        return old
    return dataclasses.replace(
        new,
        partition_epoch=old.partition_epoch + 1,
        leader_epoch=old.leader_epoch + (1 if new.leader != old.leader else 0),
    )


def maybe_complete(
    state: PartitionRegistration, may_lead: Callable[[int], bool], policy: ElectionPolicy
) -> PartitionRegistration:
    """`state` with its reassignment completed, once every target replica is in the ISR (as
    Kafka's), else `state`: replicas = the target, the removed replicas out of the ISR and the
    ELR, a removed leader replaced by the first ISR member of the target that may lead.
    Epochs: see `one_change`."""
    if not state.is_reassigning:
        return state
    target = state.target_replicas
    removed = set(state.removing_replicas)
    isr = tuple(r for r in state.isr if r not in removed)
    if not set(target) <= set(isr):
        return state  # as Kafka: every target replica in sync first
    shrunk = dataclasses.replace(
        state,
        replicas=target,
        adding_replicas=(),
        removing_replicas=(),
        elr=tuple(r for r in state.elr if r not in removed),
        last_known_elr=tuple(r for r in state.last_known_elr if r not in removed),
    )
    # partition_change elects anew when the leader may not lead any more (it left the ISR)
    return partition_change(shrunk, isr, lambda r: r not in removed and may_lead(r), policy)


def _start(
    state: PartitionRegistration,
    target: tuple[int, ...],
    may_lead: Callable[[int], bool],
    policy: ElectionPolicy,
) -> PartitionRegistration:
    original = original_replicas(state)
    if target == original and not state.is_reassigning:
        return state
    replicas = target + tuple(r for r in original if r not in target)
    adding = tuple(r for r in target if r not in original)
    removing = tuple(r for r in original if r not in target)
    # a replica added by a replaced reassignment and not in the new target leaves at once
    dropped = set(state.replicas) - set(replicas)
    isr = tuple(r for r in state.isr if r not in dropped)
    started = dataclasses.replace(
        state,
        replicas=replicas,
        adding_replicas=adding,
        removing_replicas=removing,
        elr=tuple(r for r in state.elr if r not in dropped),
        last_known_elr=tuple(r for r in state.last_known_elr if r not in dropped),
    )
    if dropped:
        started = partition_change(started, isr, lambda r: r not in dropped and may_lead(r), policy)
    return one_change(state, maybe_complete(started, may_lead, policy))


def _cancel(
    state: PartitionRegistration, may_lead: Callable[[int], bool], policy: ElectionPolicy
) -> PartitionRegistration:
    adding = set(state.adding_replicas)
    cancelled = dataclasses.replace(
        state,
        replicas=original_replicas(state),
        adding_replicas=(),
        removing_replicas=(),
        elr=tuple(r for r in state.elr if r not in adding),
        last_known_elr=tuple(r for r in state.last_known_elr if r not in adding),
    )
    isr = tuple(r for r in state.isr if r not in adding)
    new = partition_change(cancelled, isr, lambda r: r not in adding and may_lead(r), policy)
    return one_change(state, new)


def alter_partition_reassignments(
    image: MetadataImage,
    request: AlterPartitionReassignmentsRequest,
    policy_for: Callable[[str], ElectionPolicy],
) -> tuple[list[MetadataRecord], AlterPartitionReassignmentsResponse]:
    records: list[MetadataRecord] = []
    topics = []
    for item in request.topics:
        topic = image.topic(item.name)
        results = []
        for wanted in item.partitions:
            state = None if topic is None else topic.partitions.get(wanted.partition)
            if topic is None or state is None:
                results.append(
                    ReassignmentResult(wanted.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                )
                continue
            code, message, record = _reassign(
                image, topic.topic_id, wanted, state, policy_for(item.name),
                request.allow_replication_factor_change,
            )  # fmt: skip
            if record is not None:
                records.append(record)
            results.append(ReassignmentResult(wanted.partition, code, message))
        topics.append(ReassignmentTopicResult(item.name, tuple(results)))
    return records, AlterPartitionReassignmentsResponse(ErrorCode.NONE, tuple(topics))


def _reassign(
    image: MetadataImage,
    topic_id: uuid.UUID,
    wanted: ReassignablePartition,
    state: PartitionRegistration,
    policy: ElectionPolicy,
    allow_replication_factor_change: bool = True,
) -> tuple[ErrorCode, str | None, MetadataRecord | None]:
    if wanted.replicas is None:
        if not state.is_reassigning:
            return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "no reassignment to cancel", None
        new = _cancel(state, image.is_live, policy)
    else:
        target = tuple(wanted.replicas)
        problem = None
        if not target:
            problem = "the target replica list is empty"
        elif len(set(target)) != len(target):
            problem = f"duplicate brokers in {list(target)}"
        elif any(r not in image.brokers for r in target):
            problem = f"unregistered brokers in {list(target)}"
        if problem is not None:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem, None
        heading = len(set(state.replicas) - set(state.removing_replicas))
        if not allow_replication_factor_change and len(target) != heading:
            message = f"The replication factor is changed from {heading} to {len(target)}"
            return ErrorCode.INVALID_REPLICATION_FACTOR, message, None
        new = _start(state, target, image.is_live, policy)
    return ErrorCode.NONE, None, change_record(topic_id, wanted.partition, state, new)
