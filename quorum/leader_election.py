"""Leader elections an operator asks for (ElectLeaders: kafka-leader-election.sh,
AdminClient.elect_leaders) and the active controller's leader balancing
(auto.leader.rebalance.enable), sans-IO. Kafka's ReplicationControlManager.electLeaders and
maybeBalancePartitionLeaders.

A partition's *preferred* leader is the first of its replicas; topics are placed so that
preferred leaders are spread evenly over the brokers, and a broker that restarts comes back as
a follower everywhere, so leadership piles up on the brokers that stayed. A PREFERRED election
moves leadership back to the preferred replica when it is in the ISR and live (not fenced); an
UNCLEAN election elects a leader for a leaderless partition, from the ISR, the ELR or, failing
both, any live replica (the operator accepts losing what only the dead replicas held). Errors
per partition are Kafka's: ELECTION_NOT_NEEDED when the partition already has the preferred leader
(PREFERRED) or any leader (UNCLEAN), PREFERRED_LEADER_NOT_AVAILABLE / ELIGIBLE_LEADERS_NOT_AVAILABLE
when no change is possible, UNKNOWN_TOPIC_OR_PARTITION.

With no partitions named (null in the request) every partition is tried and only those that did
not answer ELECTION_NOT_NEEDED are listed. Balancing elects preferred leaders of imbalanced
partitions, at most MAX_ELECTIONS_PER_IMBALANCE per batch (the controller runs it again at once
while more remain).
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from log.common.errors import ErrorCode
from quorum.image import MetadataImage, PartitionRegistration
from quorum.partition_change import ElectionPolicy, change_record, partition_change
from quorum.records import NO_LEADER, MetadataRecord, PartitionChangeRecord

MAX_ELECTIONS_PER_IMBALANCE = 1000  # Kafka's maxElectionsPerImbalance


class ElectionType(enum.IntEnum):
    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True)
class ElectLeadersTopic:
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class ElectLeadersRequest:
    election_type: int
    topics: tuple[ElectLeadersTopic, ...] | None  # None: every partition


@dataclass(frozen=True)
class PartitionElectionResult:
    partition: int
    error_code: ErrorCode
    error_message: str | None = None


@dataclass(frozen=True)
class TopicElectionResults:
    topic: str
    partitions: tuple[PartitionElectionResult, ...]


@dataclass(frozen=True)
class ElectLeadersResponse:
    error_code: ErrorCode
    results: tuple[TopicElectionResults, ...] = ()
    error_message: str | None = None


def preferred_leader_change(
    state: PartitionRegistration, is_live: Callable[[int], bool]
) -> PartitionRegistration | None:
    """The registration with the preferred replica leading, or None when it cannot lead
    (not in the ISR, or fenced). The ISR and ELR are unchanged: the preferred replica is an ISR
    member, so it holds every acknowledged record."""
    preferred = state.replicas[0] if state.replicas else NO_LEADER
    if preferred == NO_LEADER or preferred not in state.isr or not is_live(preferred):
        return None
    return dataclasses.replace(
        state,
        leader=preferred,
        leader_epoch=state.leader_epoch + 1,
        partition_epoch=state.partition_epoch + 1,
    )


def _elect(
    image: MetadataImage,
    topic_id: uuid.UUID,
    partition: int,
    state: PartitionRegistration,
    election: ElectionType,
    policy: ElectionPolicy,
) -> tuple[ErrorCode, PartitionChangeRecord | None]:
    if election == ElectionType.PREFERRED:
        if state.replicas and state.leader == state.replicas[0]:
            return ErrorCode.ELECTION_NOT_NEEDED, None
        new = preferred_leader_change(state, image.is_live)
        if new is None:
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, None
    else:
        if state.leader != NO_LEADER:
            return ErrorCode.ELECTION_NOT_NEEDED, None
        unclean = dataclasses.replace(policy, unclean_leader_election_enable=True)
        new = partition_change(state, state.isr, image.is_live, unclean)
        if new.leader == NO_LEADER:
            return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, None
    return ErrorCode.NONE, change_record(topic_id, partition, state, new)


def elect_leaders(
    image: MetadataImage,
    request: ElectLeadersRequest,
    policy_for: Callable[[str], ElectionPolicy],
) -> tuple[list[MetadataRecord], ElectLeadersResponse]:
    """ElectLeaders: the records of every election made and each partition's result.
    `policy_for(topic)` is the topic's effective election policy (its min.insync.replicas)."""
    try:
        election = ElectionType(request.election_type)
    except ValueError:
        return [], ElectLeadersResponse(
            ErrorCode.INVALID_REQUEST,
            error_message=f"unknown election type {request.election_type}",
        )
    records: list[MetadataRecord] = []

    def one(name: str, partition: int) -> PartitionElectionResult:
        topic = image.topic(name)
        state = None if topic is None else topic.partitions.get(partition)
        if topic is None or state is None:
            return PartitionElectionResult(
                partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {name}-{partition}"
            )
        code, record = _elect(image, topic.topic_id, partition, state, election, policy_for(name))
        if record is not None:
            records.append(record)
        return PartitionElectionResult(partition, code)

    results = []
    if request.topics is None:
        for name in sorted(image.topic_ids_by_name):
            topic = image.topics[image.topic_ids_by_name[name]]
            tried = (one(name, p) for p in sorted(topic.partitions))
            listed = tuple(r for r in tried if r.error_code != ErrorCode.ELECTION_NOT_NEEDED)
            results.append(TopicElectionResults(name, listed))
    else:
        for item in request.topics:
            results.append(
                TopicElectionResults(item.topic, tuple(one(item.topic, p) for p in item.partitions))
            )
    return records, ElectLeadersResponse(ErrorCode.NONE, tuple(results))


def imbalanced_partition_count(image: MetadataImage) -> int:
    """Partitions led by a replica other than their preferred one (or leaderless)."""
    return sum(
        1
        for _, _, state in image.iter_partitions()
        if state.replicas and state.leader != state.replicas[0]
    )


def balance_leaders(
    image: MetadataImage, limit: int = MAX_ELECTIONS_PER_IMBALANCE
) -> list[MetadataRecord]:
    """Preferred-leader elections for imbalanced partitions whose preferred replica can lead,
    at most `limit` of them (in the image's partition order)."""
    records: list[MetadataRecord] = []
    for topic_id, partition, state in image.iter_partitions():
        if len(records) >= limit:
            break
        if not state.replicas or state.leader == state.replicas[0]:
            continue
        new = preferred_leader_change(state, image.is_live)
        record = None if new is None else change_record(topic_id, partition, state, new)
        if record is not None:
            records.append(record)
    return records
