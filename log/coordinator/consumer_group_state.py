"""A KIP-848 consumer group: members, epochs, target assignment and reconciliation. Sans-IO.

Vocabulary and rules are Kafka's (group-coordinator module, modern consumer groups):

- The **group epoch** goes up whenever what the assignment depends on changes: a member joins
  or leaves (or is fenced: session timeout, revocation timeout), a member's subscription or
  server assignor changes, or the subscribed topics' metadata (partition counts) changes.
- The **target assignment** is the assignor's answer for a group epoch; its epoch, the
  **assignment epoch**, catches up with the group epoch on the next heartbeat.
- Each member reconciles towards its target one heartbeat at a time (Kafka's
  CurrentAssignmentBuilder): partitions it keeps stay assigned; partitions it loses are
  *pending revocation* (state UNREVOKED_PARTITIONS, its epoch unchanged) until a heartbeat
  reports it no longer owns them; only then does it move to the target epoch and get the new
  partitions -- and only those no other member still owns (UNRELEASED_PARTITIONS until they
  are released). So a partition is never handed to two members at once.
- **Member epochs** fence zombies: a heartbeat with a larger epoch than the member's, or a
  smaller one that is not its previous epoch with owned partitions within its assignment, is
  FENCED_MEMBER_EPOCH (the client drops its partitions and rejoins with epoch 0). OffsetCommit
  with another epoch is STALE_MEMBER_EPOCH.
- Members heartbeat every group.consumer.heartbeat.interval.ms; one silent for
  group.consumer.session.timeout.ms is removed, and one that does not revoke within its
  rebalance timeout is fenced.

Every change comes back as __consumer_offsets records (consumer_group_records.py, Kafka's
record types and order), which `replay` applies to rebuild the group after a fail-over.
Static members (an instance id): leaving with epoch -2 keeps the member and its partitions until
its session times out; joining again with the same instance id (a new member id) takes them
over without a rebalance; joining while the old one is still active is UNRELEASED_INSTANCE_ID.
Regex subscriptions (a member's SubscribedTopicRegex, heartbeat v1): the coordinator resolves
each regex the group's members subscribe to against the cluster's topics (topic_regex.py: RE2,
whole-name matches) and keeps the result as a ConsumerGroupRegularExpression record; a member's
subscription is its topic names plus what its regex resolved to. A regex that RE2 refuses is
INVALID_REGULAR_EXPRESSION and changes nothing; a new one is resolved in the same heartbeat
(Kafka resolves off the request thread and rebalances when that finishes: the same assignment, a
heartbeat sooner). Regexes are resolved again on a heartbeat once the metadata moved past what
they were resolved at, at most every 10 s per group (Kafka's REGEX_BATCH_REFRESH_INTERVAL_MS),
so a topic created later that matches joins the assignment; a deleted one leaves it on the next
heartbeat (the subscription metadata no longer finds it). The resolved topics are not filtered by
the member's DESCRIBE rights (Kafka 4.0 does not either; 4.1 does).
Not done: rack-aware assignment, classic members in a consumer group.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from log.common.errors import CorruptRecordError, ErrorCode
from log.coordinator import consumer_group_records as cgr
from log.coordinator.assignors import UNIFORM, assign
from log.coordinator.topic_regex import InvalidRegularExpression, compile_topic_regex, resolve

TopicAssignment = dict[uuid.UUID, frozenset[int]]
Record = tuple[bytes, bytes | None]
TopicLookup = Callable[[str], "tuple[uuid.UUID, int] | None"]  # name -> (id, partition count)

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(enum.IntEnum):
    """Kafka's MemberState, with its record byte."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclasses.dataclass(frozen=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    assignors: tuple[str, ...] = (UNIFORM, "range")  # group.consumer.assignors, default first
    regex_refresh_interval_ms: int = 10_000  # Kafka's REGEX_BATCH_REFRESH_INTERVAL_MS (no config)


@dataclasses.dataclass(frozen=True)
class TopicListing:
    """The cluster's topic names as of a metadata offset, for resolving regexes."""

    version: int  # the metadata offset `names` are of
    names: Callable[[], Iterable[str]]


@dataclasses.dataclass(frozen=True)
class ResolvedRegex:
    """What a subscribed regex matched (Kafka's ResolvedRegularExpression)."""

    topics: frozenset[str]
    version: int  # the metadata offset the topics were listed at
    timestamp_ms: int


@dataclasses.dataclass
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None  # None: no regex ("" on the wire)
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: TopicAssignment = dataclasses.field(default_factory=dict)
    pending_revocation: TopicAssignment = dataclasses.field(default_factory=dict)
    session_deadline_ms: int = 0
    revocation_deadline_ms: int | None = None

    def metadata(self) -> tuple:
        return (self.instance_id, self.rack_id, self.client_id, self.client_host,
                self.subscribed_topic_names, self.subscribed_topic_regex,
                self.rebalance_timeout_ms, self.server_assignor)  # fmt: skip

    def current(self) -> tuple:
        return (self.member_epoch, self.previous_member_epoch, self.state,
                self.assigned, self.pending_revocation)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class HeartbeatRequest:
    """ConsumerGroupHeartbeat's fields (None: unchanged since the last heartbeat)."""

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: Sequence[str] | None = None
    subscribed_topic_regex: str | None = None  # "": none any more
    server_assignor: str | None = None
    owned: Sequence[tuple[uuid.UUID, Sequence[int]]] | None = None  # topic_partitions
    client_id: str = ""
    client_host: str = ""


@dataclasses.dataclass(frozen=True)
class HeartbeatResult:
    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: TopicAssignment | None = None


def _owned_map(owned: Sequence[tuple[uuid.UUID, Sequence[int]]]) -> TopicAssignment:
    result: dict[uuid.UUID, frozenset[int]] = {}
    for topic_id, partitions in owned:
        result[topic_id] = result.get(topic_id, frozenset()) | frozenset(partitions)
    return {t: p for t, p in result.items() if p}


def _is_subset(owned: Sequence[tuple[uuid.UUID, Sequence[int]]] | None, assigned: TopicAssignment
               ) -> bool:  # fmt: skip
    if owned is None:
        return False
    return all(p <= assigned.get(t, frozenset()) for t, p in _owned_map(owned).items())


def _owns_any(owned: Sequence[tuple[uuid.UUID, Sequence[int]]] | None, revoke: TopicAssignment
              ) -> bool:  # fmt: skip
    if owned is None:  # unknown: assume it still does
        return True
    return any(p & revoke.get(t, frozenset()) for t, p in _owned_map(owned).items())


class ConsumerGroup:
    def __init__(self, group_id: str, config: ConsumerGroupConfig) -> None:
        self.group_id = group_id
        self.config = config
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target: dict[str, TopicAssignment] = {}
        # subscribed topic name -> (topic id, partition count), as the last heartbeat saw them
        self.subscription_metadata: dict[str, tuple[uuid.UUID, int]] = {}
        self.resolved_regexes: dict[str, ResolvedRegex] = {}  # of the members' regexes

    # -- views -----------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):  # fmt: skip
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def preferred_assignor(self) -> str:
        """The server assignor most members ask for (ties: the configured order); else the
        configured default."""
        counts: dict[str, int] = {}
        for member in self.members.values():
            if member.server_assignor:
                counts[member.server_assignor] = counts.get(member.server_assignor, 0) + 1
        if not counts:
            return self.config.assignors[0]
        order = {name: i for i, name in enumerate(self.config.assignors)}
        return min(counts, key=lambda name: (-counts[name], order.get(name, len(order)), name))

    def member_topics(self, member: ConsumerGroupMember) -> frozenset[str]:
        """The member's topic names and what its regex resolved to."""
        topics = frozenset(member.subscribed_topic_names)
        resolved = self.resolved_regexes.get(member.subscribed_topic_regex or "")
        return topics | resolved.topics if resolved is not None else topics

    def subscribed_topics(self) -> frozenset[str]:
        return frozenset(t for m in self.members.values() for t in self.member_topics(m))

    def subscribed_regexes(self) -> frozenset[str]:
        return frozenset(m.subscribed_topic_regex for m in self.members.values()
                         if m.subscribed_topic_regex)  # fmt: skip

    def topic_names(self) -> dict[uuid.UUID, str]:
        return {topic_id: name for name, (topic_id, _) in self.subscription_metadata.items()}

    def partition_epochs(self, excluding: str | None = None) -> dict[tuple[uuid.UUID, int], int]:
        """(topic id, partition) -> the epoch of the member owning it (assigned or pending
        revocation)."""
        epochs = {}
        for member in self.members.values():
            if member.member_id == excluding:
                continue
            for assignment in (member.assigned, member.pending_revocation):
                for topic_id, partitions in assignment.items():
                    for partition in partitions:
                        epochs[(topic_id, partition)] = member.member_epoch
        return epochs

    def validate_offset_commit(self, member_id: str, member_epoch: int, api_version: int) -> int:
        """Kafka's ConsumerGroup.validateOffsetCommit: an error code."""
        if member_epoch < 0 and not self.members:
            return ErrorCode.NONE  # admin tools, assign() consumers: the group is empty
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION  # members of this protocol commit with v9+
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int:
        """Kafka's ConsumerGroup.validateOffsetFetch: no member id and a negative epoch (admin
        tools, OffsetFetch before v9) pass; otherwise the member and its epoch must match."""
        if member_id is None and member_epoch < 0:
            return ErrorCode.NONE
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    # -- heartbeat -------------------------------------------------------------------------------

    def heartbeat(
        self,
        request: HeartbeatRequest,
        now_ms: int,
        lookup: TopicLookup,
        new_member_id: str,
        topics: TopicListing | None = None,
    ) -> tuple[HeartbeatResult, list[Record]]:
        """One ConsumerGroupHeartbeat (validated by the caller: `validate_heartbeat`);
        `topics` lists the cluster's topics for regex subscriptions (None: no topic matches)."""
        records: list[Record] = []
        epoch = request.member_epoch
        if epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            member = self.members.get(request.member_id)
            if member is None:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID, "unknown member"), []
            if epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
                # a static member leaves for a while: it keeps its partitions (nobody else
                # gets them, no rebalance) until its session times out or it comes back
                self._set_epoch(member, STATIC_LEAVE_EPOCH)
                records.append(self._current_record(member))
            else:
                records += self._remove_member(request.member_id, lookup)
            return HeartbeatResult(ErrorCode.NONE, member_id=request.member_id,
                                   member_epoch=epoch), records  # fmt: skip
        if epoch == JOIN_EPOCH and request.instance_id is not None:
            static = next((m for m in self.members.values()
                           if m.instance_id == request.instance_id), None)  # fmt: skip
            member_id = request.member_id or new_member_id
            if static is not None and static.member_id != member_id:
                if static.member_epoch != STATIC_LEAVE_EPOCH:
                    return HeartbeatResult(
                        ErrorCode.UNRELEASED_INSTANCE_ID,
                        f"static member {request.instance_id} is still active",
                    ), []
                return self._replace_static_member(static, member_id, request, now_ms, topics)
        if epoch == JOIN_EPOCH:
            member_id = request.member_id or new_member_id
            old = self.members.get(member_id)
            if old is not None and (old.assigned or old.pending_revocation):
                # a member that lost its state rejoins: it starts over with nothing
                records += self._remove_member(member_id, lookup, bump=False)
            member = self.members.get(member_id) or ConsumerGroupMember(member_id)
            is_new = member_id not in self.members
        else:
            member_id = request.member_id
            found = self.members.get(member_id)
            if found is None:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID, "unknown member"), []
            member = found
            is_new = False
            if epoch > member.member_epoch or (
                epoch < member.member_epoch
                and (
                    epoch != member.previous_member_epoch
                    or not _is_subset(request.owned, member.assigned)
                )  # fmt: skip
            ):
                return HeartbeatResult(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"epoch {epoch} is not the member's {member.member_epoch}",
                ), []
        before = member.metadata()
        if request.instance_id is not None:
            member.instance_id = request.instance_id
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.subscribed_topic_names is not None:
            member.subscribed_topic_names = tuple(sorted(set(request.subscribed_topic_names)))
        if request.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = request.subscribed_topic_regex or None
        if request.server_assignor is not None:
            member.server_assignor = request.server_assignor or None
        if is_new:
            member.client_id = request.client_id
            member.client_host = request.client_host
        member.session_deadline_ms = now_ms + self.config.session_timeout_ms
        bump = is_new
        if is_new or member.metadata() != before:
            self.members[member_id] = member
            records.append(self._member_record(member))
            bump = True
        regex_records, regexes_changed = self._refresh_regexes(now_ms, topics)
        records += regex_records
        records += self._refresh_metadata(lookup, bump or regexes_changed)
        records += self._update_target()
        old_assigned = dict(member.assigned)
        old_epoch = member.member_epoch
        records += self._reconcile(member, request.owned, now_ms)
        full = epoch == JOIN_EPOCH or (
            request.rebalance_timeout_ms != -1
            and request.subscribed_topic_names is not None
            and request.owned is not None
        )
        send = full or member.assigned != old_assigned or member.member_epoch != old_epoch
        return HeartbeatResult(
            ErrorCode.NONE,
            member_id=member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment=dict(member.assigned) if send else None,
        ), records

    def _replace_static_member(
        self,
        old: ConsumerGroupMember,
        member_id: str,
        request: HeartbeatRequest,
        now_ms: int,
        topics: TopicListing | None = None,
    ) -> tuple[HeartbeatResult, list[Record]]:
        """A static member comes back (a new member id, its instance id): it takes over the
        old member's partitions and target, with no new group epoch (Kafka's static join)."""
        target = self.target.get(old.member_id)
        records = self._remove_member(old.member_id, None, bump=False)
        member = dataclasses.replace(
            old,
            member_id=member_id,
            member_epoch=old.previous_member_epoch,  # its epoch before it left (-2)
            session_deadline_ms=now_ms + self.config.session_timeout_ms,
            revocation_deadline_ms=None,
        )
        if request.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.subscribed_topic_names is not None:
            member.subscribed_topic_names = tuple(sorted(set(request.subscribed_topic_names)))
        if request.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = request.subscribed_topic_regex or None
        member.client_id, member.client_host = request.client_id, request.client_host
        self.members[member_id] = member
        if target is not None:
            self.target[member_id] = target
            records.append(self._target_member_record(member_id, target))
        records.append(self._member_record(member))
        # a new regex is resolved; like changed topic names, it does not start a rebalance here
        records += self._refresh_regexes(now_ms, topics)[0]
        self._reconcile(member, [], now_ms)  # it owns nothing yet: pending revocations go
        records.append(self._current_record(member))
        return HeartbeatResult(
            ErrorCode.NONE,
            member_id=member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment=dict(member.assigned),
        ), records

    def _member_record(self, member: ConsumerGroupMember) -> Record:
        key = cgr.encode_key(cgr.ConsumerGroupRecordKey(cgr.MEMBER_METADATA, self.group_id,
                                                        member.member_id))  # fmt: skip
        value = cgr.encode_value(
            cgr.MEMBER_METADATA,
            instance_id=member.instance_id,
            rack_id=member.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=list(member.subscribed_topic_names),
            subscribed_topic_regex=member.subscribed_topic_regex,
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            server_assignor=member.server_assignor,
        )
        return key, value

    def _epoch_record(self) -> Record:
        key = cgr.encode_key(cgr.ConsumerGroupRecordKey(cgr.GROUP_METADATA, self.group_id))
        return key, cgr.encode_value(cgr.GROUP_METADATA, epoch=self.group_epoch)

    def _refresh_regexes(
        self, now_ms: int, topics: TopicListing | None
    ) -> tuple[list[Record], bool]:
        """Resolve the members' regexes when one is new, or when the metadata moved past their
        resolution and the last one is regex_refresh_interval_ms old; drop those no member
        uses. (records, whether a regex now matches other topics). Records are written for the
        regexes whose topics changed (Kafka writes one per regex at every resolution: the same
        state, fewer records)."""
        records = self._drop_unused_regexes()
        wanted = self.subscribed_regexes()
        if not wanted:
            return records, False
        resolved = self.resolved_regexes
        version = -1 if topics is None else topics.version
        if wanted <= set(resolved):
            last_version = min(r.version for r in resolved.values())
            last_ms = max(r.timestamp_ms for r in resolved.values())
            if version <= last_version or now_ms <= last_ms + self.config.regex_refresh_interval_ms:
                return records, False
        names = () if topics is None else topics.names()
        changed = False
        for pattern, matched in sorted(resolve(wanted, names).items()):
            old = resolved.get(pattern)
            resolved[pattern] = ResolvedRegex(matched, version, now_ms)
            if old is None or old.topics != matched:
                changed = changed or matched != (old.topics if old else frozenset())
                records.append(self._regex_record(pattern))
        return records, changed

    def _drop_unused_regexes(self) -> list[Record]:
        records: list[Record] = []
        for pattern in sorted(set(self.resolved_regexes) - self.subscribed_regexes()):
            del self.resolved_regexes[pattern]
            records.append((self._regex_key(pattern), None))
        return records

    def _regex_key(self, pattern: str) -> bytes:
        return cgr.encode_key(cgr.ConsumerGroupRecordKey(
            cgr.REGULAR_EXPRESSION, self.group_id, regular_expression=pattern))  # fmt: skip

    def _regex_record(self, pattern: str) -> Record:
        resolved = self.resolved_regexes[pattern]
        value = cgr.encode_value(cgr.REGULAR_EXPRESSION, topics=sorted(resolved.topics),
                                 version=resolved.version, timestamp=resolved.timestamp_ms)  # fmt: skip
        return self._regex_key(pattern), value

    def _refresh_metadata(self, lookup: TopicLookup, bump: bool) -> list[Record]:
        """Re-read the subscribed topics' metadata; bump the group epoch if it or (`bump`) the
        members changed: the records."""
        metadata = {}
        for name in sorted(self.subscribed_topics()):
            found = lookup(name)
            if found is not None:
                metadata[name] = found
        records: list[Record] = []
        if metadata != self.subscription_metadata:
            self.subscription_metadata = metadata
            records.append(self._partition_metadata_record())
            bump = True
        if bump:
            self.group_epoch += 1
            records.append(self._epoch_record())
        return records

    def _partition_metadata_record(self) -> Record:
        key = cgr.encode_key(cgr.ConsumerGroupRecordKey(cgr.PARTITION_METADATA, self.group_id))
        topic = cgr.value_class(cgr.PARTITION_METADATA, "TopicMetadata")
        value = cgr.encode_value(
            cgr.PARTITION_METADATA,
            topics=[
                topic(
                    topic_id=topic_id, topic_name=name, num_partitions=count, partition_metadata=[]
                )  # fmt: skip
                for name, (topic_id, count) in sorted(self.subscription_metadata.items())
            ],
        )
        return key, value

    def _update_target(self) -> list[Record]:
        """A new target assignment when the group epoch moved past it: the records."""
        if self.group_epoch <= self.assignment_epoch:
            return []
        ids = {name: topic_id for name, (topic_id, _) in self.subscription_metadata.items()}
        counts = {topic_id: count for topic_id, count in self.subscription_metadata.values()}
        subscriptions = {
            m.member_id: frozenset(ids[t] for t in self.member_topics(m) if t in ids)
            for m in self.members.values()
        }
        target = assign(self.preferred_assignor(), subscriptions, counts, self.target)
        records: list[Record] = []
        for member_id in sorted(target):
            assignment = {t: p for t, p in target[member_id].items() if p}
            if assignment != self.target.get(member_id):
                self.target[member_id] = assignment
                records.append(self._target_member_record(member_id, assignment))
        self.assignment_epoch = self.group_epoch
        key = cgr.encode_key(
            cgr.ConsumerGroupRecordKey(cgr.TARGET_ASSIGNMENT_METADATA, self.group_id)
        )
        value = cgr.encode_value(cgr.TARGET_ASSIGNMENT_METADATA,
                                 assignment_epoch=self.assignment_epoch)  # fmt: skip
        records.append((key, value))
        return records

    def _target_member_record(self, member_id: str, assignment: TopicAssignment) -> Record:
        key = cgr.encode_key(
            cgr.ConsumerGroupRecordKey(cgr.TARGET_ASSIGNMENT_MEMBER, self.group_id, member_id)
        )
        value = cgr.encode_value(
            cgr.TARGET_ASSIGNMENT_MEMBER, topic_partitions=_wire(cgr.TARGET_ASSIGNMENT_MEMBER,
                                                                  "TopicPartition", assignment),
        )  # fmt: skip
        return key, value

    def _current_record(self, member: ConsumerGroupMember) -> Record:
        key = cgr.encode_key(cgr.ConsumerGroupRecordKey(cgr.CURRENT_MEMBER_ASSIGNMENT,
                                                        self.group_id, member.member_id))  # fmt: skip
        v = cgr.CURRENT_MEMBER_ASSIGNMENT
        value = cgr.encode_value(
            v,
            member_epoch=member.member_epoch,
            previous_member_epoch=member.previous_member_epoch,
            state=int(member.state),
            assigned_partitions=_wire(v, "TopicPartitions", member.assigned),
            partitions_pending_revocation=_wire(v, "TopicPartitions", member.pending_revocation),
        )
        return key, value

    # -- reconciliation (Kafka's CurrentAssignmentBuilder) ----------------------------------------

    def _reconcile(
        self,
        member: ConsumerGroupMember,
        owned: Sequence[tuple[uuid.UUID, Sequence[int]]] | None,
        now_ms: int,
    ) -> list[Record]:
        before = member.current()
        was_unrevoked = member.state is MemberState.UNREVOKED_PARTITIONS
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if not _owns_any(owned, member.pending_revocation):
                self._next_assignment(member, member.member_epoch + 1, owned)
        elif member.state is MemberState.UNRELEASED_PARTITIONS or (
            member.member_epoch != self.assignment_epoch
        ):
            self._next_assignment(member, member.member_epoch, owned)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if not was_unrevoked or member.revocation_deadline_ms is None:
                timeout = member.rebalance_timeout_ms
                member.revocation_deadline_ms = now_ms + (timeout if timeout > 0 else 300_000)
        else:
            member.revocation_deadline_ms = None
        if member.current() == before:
            return []
        return [self._current_record(member)]

    def _next_assignment(
        self,
        member: ConsumerGroupMember,
        epoch: int,
        owned: Sequence[tuple[uuid.UUID, Sequence[int]]] | None,
    ) -> None:
        target = self.target.get(member.member_id, {})
        taken = self.partition_epochs(excluding=member.member_id)
        assigned: dict[uuid.UUID, frozenset[int]] = {}
        revoke: dict[uuid.UUID, frozenset[int]] = {}
        adding: dict[uuid.UUID, frozenset[int]] = {}
        unreleased = False
        for topic_id in set(target) | set(member.assigned):
            wanted = target.get(topic_id, frozenset())
            current = member.assigned.get(topic_id, frozenset())
            keep = current & wanted
            lost = current - keep
            new = wanted - keep
            free = frozenset(p for p in new if (topic_id, p) not in taken)
            unreleased = unreleased or free != new
            if keep:
                assigned[topic_id] = keep
            if lost:
                revoke[topic_id] = lost
            if free:
                adding[topic_id] = free
        if revoke and _owns_any(owned, revoke):
            self._set_epoch(member, epoch)
            member.state = MemberState.UNREVOKED_PARTITIONS
            member.assigned = assigned
            member.pending_revocation = revoke
            return
        for topic_id, partitions in adding.items():
            assigned[topic_id] = assigned.get(topic_id, frozenset()) | partitions
        self._set_epoch(member, self.assignment_epoch)
        member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        member.assigned = assigned
        member.pending_revocation = {}

    @staticmethod
    def _set_epoch(member: ConsumerGroupMember, epoch: int) -> None:
        if epoch != member.member_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = epoch

    # -- leaving ---------------------------------------------------------------------------------

    def _remove_member(self, member_id: str, lookup: TopicLookup | None, bump: bool = True
                       ) -> list[Record]:  # fmt: skip
        """Tombstones of the member's records (Kafka's order), then the new group epoch."""
        self.members.pop(member_id, None)
        self.target.pop(member_id, None)
        records: list[Record] = [
            (cgr.encode_key(cgr.ConsumerGroupRecordKey(version, self.group_id, member_id)), None)
            for version in (
                cgr.CURRENT_MEMBER_ASSIGNMENT,
                cgr.TARGET_ASSIGNMENT_MEMBER,
                cgr.MEMBER_METADATA,
            )  # fmt: skip
        ]
        records += self._drop_unused_regexes()
        if lookup is not None:
            return records + self._refresh_metadata(lookup, bump)
        if bump:
            self.group_epoch += 1
            records.append(self._epoch_record())
        return records

    def remove_all_records(self) -> list[Record]:
        """Tombstones deleting the whole group (DeleteGroups of an empty group)."""
        records: list[Record] = []
        for member_id in list(self.members):
            records += self._remove_member(member_id, None, bump=False)
        for version in (cgr.TARGET_ASSIGNMENT_METADATA, cgr.PARTITION_METADATA,
                        cgr.GROUP_METADATA):  # fmt: skip
            records.append((cgr.encode_key(cgr.ConsumerGroupRecordKey(version, self.group_id)),
                            None))  # fmt: skip
        return records

    # -- time ------------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        deadlines = [m.session_deadline_ms for m in self.members.values()]
        deadlines += [m.revocation_deadline_ms for m in self.members.values()
                      if m.revocation_deadline_ms is not None]  # fmt: skip
        return min(deadlines) if deadlines else None

    def poll(self, now_ms: int) -> tuple[list[str], list[Record]]:
        """Remove members whose session or revocation timed out: (their ids, records). The
        subscription metadata is left as it is: the next heartbeat refreshes it."""
        expired = sorted(
            m.member_id for m in self.members.values()
            if m.session_deadline_ms <= now_ms
            or (m.revocation_deadline_ms is not None and m.revocation_deadline_ms <= now_ms)
        )  # fmt: skip
        records: list[Record] = []
        for member_id in expired:
            records += self._remove_member(member_id, None)
        return expired, records

    # -- replay ----------------------------------------------------------------------------------

    def replay(self, key: cgr.ConsumerGroupRecordKey, value: Any, now_ms: int) -> None:
        """Apply one record of this group (`value` None: a tombstone) read back from the log."""
        version = key.version
        if version == cgr.GROUP_METADATA:
            self.group_epoch = value.epoch if value is not None else 0
        elif version == cgr.PARTITION_METADATA:
            self.subscription_metadata = {} if value is None else {
                t.topic_name: (t.topic_id, t.num_partitions) for t in value.topics
            }  # fmt: skip
        elif version == cgr.TARGET_ASSIGNMENT_METADATA:
            self.assignment_epoch = value.assignment_epoch if value is not None else 0
        elif version == cgr.REGULAR_EXPRESSION:
            assert key.regular_expression is not None
            if value is None:
                self.resolved_regexes.pop(key.regular_expression, None)
            else:
                self.resolved_regexes[key.regular_expression] = ResolvedRegex(
                    frozenset(value.topics), value.version, value.timestamp
                )
        else:
            assert key.member_id is not None
            self._replay_member(key.version, key.member_id, value, now_ms)

    def _replay_member(self, version: int, member_id: str, value: Any, now_ms: int) -> None:
        if version == cgr.TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.target.pop(member_id, None)
            else:
                self.target[member_id] = _from_wire(value.topic_partitions)
            return
        if value is None:
            if version == cgr.MEMBER_METADATA:
                self.members.pop(member_id, None)
            elif member_id in self.members:
                member = self.members[member_id]
                member.member_epoch, member.previous_member_epoch = 0, -1
                member.state = MemberState.STABLE
                member.assigned, member.pending_revocation = {}, {}
            return
        member = self.members.setdefault(member_id, ConsumerGroupMember(member_id))
        # a member restored from the log gets a full session to heartbeat the new coordinator
        member.session_deadline_ms = now_ms + self.config.session_timeout_ms
        if version == cgr.MEMBER_METADATA:
            member.instance_id = value.instance_id
            member.rack_id = value.rack_id
            member.client_id = value.client_id
            member.client_host = value.client_host
            member.subscribed_topic_names = tuple(value.subscribed_topic_names)
            member.subscribed_topic_regex = value.subscribed_topic_regex or None
            member.rebalance_timeout_ms = value.rebalance_timeout_ms
            member.server_assignor = value.server_assignor
        elif version == cgr.CURRENT_MEMBER_ASSIGNMENT:
            try:
                member.state = MemberState(value.state)
            except ValueError:
                member.state = MemberState.UNKNOWN
            member.member_epoch = value.member_epoch
            member.previous_member_epoch = value.previous_member_epoch
            member.assigned = _from_wire(value.assigned_partitions)
            member.pending_revocation = _from_wire(value.partitions_pending_revocation)
            member.revocation_deadline_ms = None
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                timeout = member.rebalance_timeout_ms
                member.revocation_deadline_ms = now_ms + (timeout if timeout > 0 else 300_000)
        else:
            raise CorruptRecordError(f"unexpected consumer group record version {version}")


def validate_heartbeat(request: HeartbeatRequest, assignors: Sequence[str], api_version: int
                       ) -> tuple[int, str] | None:  # fmt: skip
    """Kafka's request checks: (error code, message) when the request is refused."""
    epoch = request.member_epoch
    if request.instance_id is not None and not request.instance_id:
        return ErrorCode.INVALID_REQUEST, "InstanceId can't be empty."
    if request.rack_id is not None and not request.rack_id:
        return ErrorCode.INVALID_REQUEST, "RackId can't be empty."
    if epoch < STATIC_LEAVE_EPOCH:
        return ErrorCode.INVALID_REQUEST, f"MemberEpoch {epoch} is invalid."
    if epoch == JOIN_EPOCH:
        if request.rebalance_timeout_ms == -1:
            return (
                ErrorCode.INVALID_REQUEST,
                "RebalanceTimeoutMs must be provided in first request.",
            )
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            return (
                ErrorCode.INVALID_REQUEST,
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when"
                " (re-)joining.",
            )
        if request.owned:
            return ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."
        if api_version >= 1 and not request.member_id:
            return ErrorCode.INVALID_REQUEST, "MemberId can't be empty."
    elif not request.member_id:
        return ErrorCode.INVALID_REQUEST, "MemberId can't be empty."
    if request.server_assignor is not None and request.server_assignor not in assignors:
        return ErrorCode.UNSUPPORTED_ASSIGNOR, f"assignor {request.server_assignor!r} is unknown"
    if request.subscribed_topic_regex:  # before the group changes (Kafka: before any record)
        try:
            compile_topic_regex(request.subscribed_topic_regex)
        except InvalidRegularExpression as exc:
            return ErrorCode.INVALID_REGULAR_EXPRESSION, str(exc)
    return None


def _wire(version: int, struct_name: str, assignment: Mapping[uuid.UUID, frozenset[int]]
          ) -> list:  # fmt: skip
    cls = cgr.value_class(version, struct_name)
    return [
        cls(topic_id=t, partitions=sorted(p))
        for t, p in sorted(assignment.items(), key=lambda i: str(i[0]))
    ]


def _from_wire(topic_partitions: Sequence[Any]) -> TopicAssignment:
    return {tp.topic_id: frozenset(tp.partitions) for tp in topic_partitions if tp.partitions}
