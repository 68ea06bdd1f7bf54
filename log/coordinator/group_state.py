"""One consumer group under Kafka's classic group protocol, sans-IO.

A group moves through these states (Kafka's GroupState); the legal transitions are:

    Empty               -> PreparingRebalance (a member joins), Dead (deleted, unloaded, or
                           its offsets expired)
    PreparingRebalance  -> CompletingRebalance (every member rejoined, or the rebalance timed
                           out: laggards are removed), Empty (nobody left), Dead
    CompletingRebalance -> Stable (the leader's SyncGroup), PreparingRebalance (a member joins,
                           leaves or expires), Dead
    Stable              -> PreparingRebalance (a member joins with new metadata, leaves or
                           expires), Dead
    Dead                -> (final)

JoinGroup and SyncGroup responses are *delayed*: the caller passes an opaque `token` with each
request and gets `Reply(token, result)` values back -- from that call or from a later call
(another member's join, `poll(now_ms)` when a timeout passes). The driver parks each request on
its token. Every generation bump fences the previous one: a request with an older
`generation_id` gets ILLEGAL_GENERATION, an unknown member UNKNOWN_MEMBER_ID, a SyncGroup or
commit while members are re-joining REBALANCE_IN_PROGRESS.

The protocol (assignor) is chosen by vote: among the protocols every member supports, each
member votes for the first of them in its own preference order; most votes wins, ties go to the
earliest in the leader's order. The leader (the previous leader if it rejoined, else the first
member to join) gets every member's metadata and sends back the assignment in SyncGroup.

The initial rebalance delay (group.initial.rebalance.delay.ms, Kafka's InitialDelayedJoin):
when a member joins an Empty group the join phase waits that long; while a brand-new group
(generation 0) is waiting, every further new member extends the wait by the delay again, up to
the rebalance timeout in all.

Durability: at the end of a rebalance (the leader's SyncGroup makes the group Stable) and when
the group becomes Empty, `metadata_changed` is set; the driver then writes the group's
GroupMetadataValue (generation, protocol, leader, members with their assignments) to
__consumer_offsets. `GroupMetadata.restore` rebuilds a group from that record when another
broker takes over: Stable with the stored generation and members whose session timers restart
(a member keeps heartbeating and committing with its generation), or Empty without members.
The protocol type stays while the group is Empty (Kafka keeps it too): offset expiry tells a
consumer group gone empty from a standalone committer (no protocol type) by it.

Static membership (group.instance.id, KIP-345): a member that joins with a known instance id
and no member id *replaces* the member of that instance -- it gets a new member id and the old
one's assignment, and a Stable group whose chosen protocol stays does not rebalance (the join
answers the current generation with the current leader, so nobody reassigns; a restarted
consumer comes back without moving any partition; a JoinGroup v9+ leader instead hears it leads
with `skip_assignment`, KIP-814). A CompletingRebalance group rebalances again.
A request naming an instance id with a member id other than the instance's current one is
FENCED_INSTANCE_ID (the replaced process). Static members need no MEMBER_ID_REQUIRED round.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Hashable

from log.common.errors import ErrorCode

NO_GENERATION = -1
UNKNOWN_MEMBER_ID = ""
MAX_PROTOCOLS_PER_MEMBER = 64  # a member's assignor list; more is a malformed client


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclasses.dataclass(frozen=True)
class GroupConfig:
    """Kafka's broker group settings (names verbatim, defaults Kafka's except where noted)."""

    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = 1_000  # Kafka: unbounded; a limit on everything
    offsets_retention_ms: int = 604_800_000  # 7 days, counted from when the group went Empty
    offsets_retention_check_interval_ms: int = 600_000

    def __post_init__(self) -> None:
        assert 0 < self.group_min_session_timeout_ms <= self.group_max_session_timeout_ms
        assert self.group_initial_rebalance_delay_ms >= 0 and self.group_max_size > 0
        assert self.offsets_retention_ms > 0 and self.offsets_retention_check_interval_ms > 0


@dataclasses.dataclass(frozen=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclasses.dataclass(frozen=True)
class JoinResult:
    error_code: int
    generation_id: int = NO_GENERATION
    protocol_name: str = ""
    leader: str = ""
    member_id: str = UNKNOWN_MEMBER_ID
    members: tuple[JoinedMember, ...] = ()
    protocol_type: str | None = None  # JoinGroup v7+
    skip_assignment: bool = False  # JoinGroup v9+ (KIP-814): a static leader's rejoin


@dataclasses.dataclass(frozen=True)
class SyncResult:
    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None  # SyncGroup v5+
    protocol_name: str | None = None


@dataclasses.dataclass(frozen=True)
class Reply:
    token: Hashable
    result: JoinResult | SyncResult


@dataclasses.dataclass
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    last_heartbeat_ms: int
    assignment: bytes = b""
    join_token: Hashable | None = None  # a JoinGroup waiting for the join phase to end
    sync_token: Hashable | None = None  # a SyncGroup waiting for the leader's assignment

    def metadata_for(self, protocol_name: str) -> bytes:
        return next(m for name, m in self.protocols if name == protocol_name)

    def same_protocols(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        return self.protocols == protocols


class GroupMetadata:
    """The state of one group; every method takes `now_ms` and returns replies, never waits."""

    def __init__(
        self,
        group_id: str,
        config: GroupConfig,
        new_member_id: Callable[[str], str],
        now_ms: int,
    ) -> None:
        self.group_id = group_id
        self.config = config
        self.new_member_id = new_member_id
        self.state = GroupState.EMPTY
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        # member ids handed out with MEMBER_ID_REQUIRED, not joined yet: id -> expiry deadline
        self.pending_member_ids: dict[str, int] = {}
        self.static_members: dict[str, str] = {}  # group_instance_id -> member_id
        self.rebalance_deadline_ms: int | None = None
        self.join_ready_ms = now_ms  # initial rebalance delay: no join completes before this
        self.initial_delay_remaining_ms = 0  # how much longer new members may extend it
        self.new_member_added = False  # a new member joined during the initial delay
        self.state_changed_ms = now_ms  # Kafka's current_state_timestamp; -1: unknown
        self.metadata_changed = False  # the stored GroupMetadataValue is out of date

    @classmethod
    def restore(
        cls,
        group_id: str,
        config: GroupConfig,
        new_member_id: Callable[[str], str],
        *,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        leader_id: str | None,
        state_changed_ms: int,
        members: list[MemberMetadata],
    ) -> GroupMetadata:
        """A group as its last GroupMetadataValue stored it (Kafka's GroupMetadata.loadGroup):
        Stable with those members, or Empty without any. Members' session timers restart from
        their `last_heartbeat_ms` (the load time)."""
        group = cls(group_id, config, new_member_id, state_changed_ms)
        group.generation_id = generation_id
        group.protocol_type = protocol_type or None
        if members:
            assert protocol_name is not None, "a group with members has a protocol"
            group.state = GroupState.STABLE
            group.protocol_name = protocol_name
            group.members = {m.member_id: m for m in members}
            group.static_members = {
                m.group_instance_id: m.member_id for m in members if m.group_instance_id
            }
            group.leader_id = leader_id if leader_id in group.members else members[0].member_id
        return group

    # -- queries -------------------------------------------------------------------------------

    def is_empty(self) -> bool:
        return not self.members

    def next_deadline_ms(self) -> int | None:
        """When `poll` next has something to do (a session or rebalance timeout)."""
        deadlines = list(self.pending_member_ids.values())
        for member in self.members.values():
            if member.join_token is None and member.sync_token is None:
                deadlines.append(member.last_heartbeat_ms + member.session_timeout_ms)
        if self.rebalance_deadline_ms is not None:
            deadlines.append(self.rebalance_deadline_ms)
        if self.state is GroupState.PREPARING_REBALANCE and all(
            m.join_token is not None for m in self.members.values()
        ):
            deadlines.append(self.join_ready_ms)  # only the initial delay holds the join back
        return min(deadlines) if deadlines else None

    # -- JoinGroup -----------------------------------------------------------------------------

    def join(
        self,
        token: Hashable,
        *,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: tuple[tuple[str, bytes], ...],
        require_known_member_id: bool,
        now_ms: int,
        supports_skip_assignment: bool = False,
    ) -> list[Reply]:
        def refuse(code: int, member: str = member_id) -> list[Reply]:
            return [Reply(token, JoinResult(code, member_id=member))]

        if self.state is GroupState.DEAD:
            return refuse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not (
            self.config.group_min_session_timeout_ms
            <= session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            return refuse(ErrorCode.INVALID_SESSION_TIMEOUT)
        if not protocols or len(protocols) > MAX_PROTOCOLS_PER_MEMBER or not protocol_type:
            return refuse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if not self._supports(protocol_type, protocols):
            return refuse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if rebalance_timeout_ms < 0:  # JoinGroup v0 has none: Kafka uses the session timeout
            rebalance_timeout_ms = session_timeout_ms
        if self._fenced(group_instance_id, member_id):
            return refuse(ErrorCode.FENCED_INSTANCE_ID)
        if member_id == UNKNOWN_MEMBER_ID and group_instance_id in self.static_members:
            return self._replace_static_member(
                token, group_instance_id, client_id, session_timeout_ms, rebalance_timeout_ms,
                protocols, now_ms, supports_skip_assignment,
            )  # fmt: skip
        if member_id == UNKNOWN_MEMBER_ID:
            if len(self.members) + len(self.pending_member_ids) >= self.config.group_max_size:
                return refuse(ErrorCode.GROUP_MAX_SIZE_REACHED)
            new_id = self.new_member_id(client_id)
            assert new_id not in self.members and new_id not in self.pending_member_ids
            if require_known_member_id and group_instance_id is None:  # JoinGroup v4+: KIP-394
                self.pending_member_ids[new_id] = now_ms + session_timeout_ms
                return refuse(ErrorCode.MEMBER_ID_REQUIRED, new_id)
            member_id = new_id
        elif member_id in self.pending_member_ids:
            del self.pending_member_ids[member_id]
        elif member_id not in self.members:
            return refuse(ErrorCode.UNKNOWN_MEMBER_ID)

        member = self.members.get(member_id)
        if member is not None and self.state in (
            GroupState.STABLE,
            GroupState.COMPLETING_REBALANCE,
        ):
            if member.same_protocols(protocols) and (
                self.state is GroupState.COMPLETING_REBALANCE or member_id != self.leader_id
            ):
                # Nothing changed: answer with the current generation (Kafka does the same).
                member.last_heartbeat_ms = now_ms
                return [Reply(token, self._join_result(member_id))]
        replies: list[Reply] = []
        if member is None:
            member = MemberMetadata(
                member_id, group_instance_id, client_id, client_host, session_timeout_ms,
                rebalance_timeout_ms, protocols, now_ms,
            )  # fmt: skip
            if not self.members:
                self.protocol_type = protocol_type
            self.members[member_id] = member
            if group_instance_id is not None:
                self.static_members[group_instance_id] = member_id
            if self.leader_id is None:
                self.leader_id = member_id
            if self.state is GroupState.PREPARING_REBALANCE and self.generation_id == 0:
                self.new_member_added = True  # extends the initial rebalance delay
        else:
            if member.join_token is not None:  # a retried join replaces the older one
                replies.append(Reply(member.join_token, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID)))
            member.protocols = protocols
            member.session_timeout_ms = session_timeout_ms
            member.rebalance_timeout_ms = rebalance_timeout_ms
            member.last_heartbeat_ms = now_ms
        member.join_token = token
        if self.state is not GroupState.PREPARING_REBALANCE:
            replies += self._prepare_rebalance(now_ms)
        return replies + self._maybe_complete_join(now_ms)

    def _fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        """Does this request come from a static member's replaced (older) process?"""
        if group_instance_id is None or member_id == UNKNOWN_MEMBER_ID:
            return False
        current = self.static_members.get(group_instance_id)
        return current is not None and current != member_id

    def _replace_static_member(
        self,
        token: Hashable,
        group_instance_id: str,
        client_id: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocols: tuple[tuple[str, bytes], ...],
        now_ms: int,
        supports_skip_assignment: bool,
    ) -> list[Reply]:
        """KIP-345: a known instance joins again (a restart): new member id, same member.

        In a Stable group whose protocol stays, nobody reassigns. A JoinGroup v9+ client
        (KIP-814) that was the leader hears it is the leader, with the members' metadata, and
        `skip_assignment`: it keeps watching metadata without running the assignor. An older
        client hears the old leader id, so it does not think it leads."""
        old_id = self.static_members[group_instance_id]
        old_leader = self.leader_id
        member = self.members.pop(old_id)
        replies = []
        if member.join_token is not None:
            replies.append(Reply(member.join_token, JoinResult(ErrorCode.FENCED_INSTANCE_ID)))
        if member.sync_token is not None:
            replies.append(Reply(member.sync_token, SyncResult(ErrorCode.FENCED_INSTANCE_ID)))
        member.join_token = member.sync_token = None
        member.member_id = self.new_member_id(client_id)
        assert member.member_id not in self.members
        self.members[member.member_id] = member
        self.static_members[group_instance_id] = member.member_id
        if self.leader_id == old_id:
            self.leader_id = member.member_id
        member.protocols = protocols
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.last_heartbeat_ms = now_ms
        if self.state is GroupState.STABLE and self._select_protocol() == self.protocol_name:
            self.metadata_changed = True  # the stored members name the new member id
            result = self._join_result(member.member_id)
            if supports_skip_assignment:
                result = dataclasses.replace(result, skip_assignment=bool(result.members))
            else:  # the old leader id keeps everyone from reassigning
                result = dataclasses.replace(result, leader=old_leader or "", members=())
            return replies + [Reply(token, result)]
        member.join_token = token
        if self.state is not GroupState.PREPARING_REBALANCE:
            replies += self._prepare_rebalance(now_ms)
        return replies + self._maybe_complete_join(now_ms)

    def _supports(self, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        if not self.members:
            return True
        if protocol_type != self.protocol_type:
            return False
        return bool(self._candidates() & {name for name, _ in protocols})

    def _candidates(self) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def _select_protocol(self) -> str:
        candidates = self._candidates()
        assert candidates, "members were admitted only with a common protocol"
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = next(name for name, _ in member.protocols if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        leader = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        order = [name for name, _ in leader.protocols if name in candidates]
        return max(order, key=lambda name: (votes.get(name, 0), -order.index(name)))

    def _prepare_rebalance(self, now_ms: int) -> list[Reply]:
        replies = []
        if self.state is GroupState.COMPLETING_REBALANCE:
            for member in self.members.values():
                if member.sync_token is not None:
                    replies.append(
                        Reply(member.sync_token, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
                    )
                    member.sync_token = None
        timeout_ms = max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        self.rebalance_deadline_ms = now_ms + timeout_ms
        self.new_member_added = False
        if self.state is GroupState.EMPTY:
            delay_ms = min(self.config.group_initial_rebalance_delay_ms, timeout_ms)
            self.join_ready_ms = now_ms + delay_ms
            self.initial_delay_remaining_ms = max(timeout_ms - delay_ms, 0)
        else:
            self.join_ready_ms = now_ms
            self.initial_delay_remaining_ms = 0
        self._transition(GroupState.PREPARING_REBALANCE, now_ms)
        return replies

    def _maybe_complete_join(self, now_ms: int) -> list[Reply]:
        if self.state is not GroupState.PREPARING_REBALANCE:
            return []
        all_joined = all(m.join_token is not None for m in self.members.values())
        timed_out = self.rebalance_deadline_ms is not None and now_ms >= self.rebalance_deadline_ms
        if all_joined and now_ms >= self.join_ready_ms and not timed_out:
            if self.new_member_added and self.initial_delay_remaining_ms > 0:
                # Kafka's InitialDelayedJoin: someone new came during the delay, wait again
                delay_ms = min(
                    self.config.group_initial_rebalance_delay_ms, self.initial_delay_remaining_ms
                )
                self.new_member_added = False
                self.join_ready_ms = now_ms + delay_ms
                self.initial_delay_remaining_ms -= delay_ms
                return []
        elif not timed_out:
            return []
        for member_id in [m for m, v in self.members.items() if v.join_token is None]:
            self._remove_member(member_id)
        self.rebalance_deadline_ms = None
        self.generation_id += 1
        if not self.members:
            self.protocol_name = None
            self.leader_id = None
            self._transition(GroupState.EMPTY, now_ms)
            return []
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members))
        self.protocol_name = self._select_protocol()
        self._transition(GroupState.COMPLETING_REBALANCE, now_ms)
        replies = []
        for member in self.members.values():
            assert member.join_token is not None
            member.assignment = b""
            member.last_heartbeat_ms = now_ms
            replies.append(Reply(member.join_token, self._join_result(member.member_id)))
            member.join_token = None
        return replies

    def _join_result(self, member_id: str) -> JoinResult:
        assert self.protocol_name is not None and self.leader_id is not None
        members: tuple[JoinedMember, ...] = ()
        if member_id == self.leader_id:
            members = tuple(
                JoinedMember(m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
                for m in self.members.values()
            )
        return JoinResult(
            ErrorCode.NONE, self.generation_id, self.protocol_name, self.leader_id, member_id,
            members, self.protocol_type,
        )  # fmt: skip

    # -- SyncGroup, Heartbeat, LeaveGroup ------------------------------------------------------

    def sync(
        self,
        token: Hashable,
        *,
        member_id: str,
        generation_id: int,
        assignments: dict[str, bytes],
        now_ms: int,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> list[Reply]:
        """`protocol_type`/`protocol_name` (SyncGroup v5+) must be the group's when given."""
        code = self._check_member(member_id, generation_id, group_instance_id)
        if code == ErrorCode.NONE and (
            (protocol_type is not None and protocol_type != self.protocol_type)
            or (protocol_name is not None and protocol_name != self.protocol_name)
        ):
            code = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if code != ErrorCode.NONE:
            return [Reply(token, SyncResult(code))]
        if self.state is GroupState.PREPARING_REBALANCE:
            return [Reply(token, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))]
        member = self.members[member_id]
        member.last_heartbeat_ms = now_ms
        if self.state is GroupState.STABLE:
            return [Reply(token, self._synced(member.assignment))]
        assert self.state is GroupState.COMPLETING_REBALANCE
        replies = []
        if member.sync_token is not None:
            replies.append(Reply(member.sync_token, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)))
        member.sync_token = token
        if member_id != self.leader_id:
            return replies
        for m in self.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        self._transition(GroupState.STABLE, now_ms)
        for m in self.members.values():
            if m.sync_token is not None:
                replies.append(Reply(m.sync_token, self._synced(m.assignment)))
                m.sync_token = None
        return replies

    def _synced(self, assignment: bytes) -> SyncResult:
        return SyncResult(ErrorCode.NONE, assignment, self.protocol_type, self.protocol_name)

    def heartbeat(
        self,
        *,
        member_id: str,
        generation_id: int,
        now_ms: int,
        group_instance_id: str | None = None,
    ) -> int:
        code = self._check_member(member_id, generation_id, group_instance_id)
        if code != ErrorCode.NONE:
            return code
        self.members[member_id].last_heartbeat_ms = now_ms
        if self.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(
        self, *, member_id: str, now_ms: int, group_instance_id: str | None = None
    ) -> tuple[int, list[Reply]]:
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        if group_instance_id is not None:  # LeaveGroup v3+: members named by instance id
            current = self.static_members.get(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID, []
            if member_id not in (UNKNOWN_MEMBER_ID, current):
                return ErrorCode.FENCED_INSTANCE_ID, []
            member_id = current
        if member_id in self.pending_member_ids:
            del self.pending_member_ids[member_id]
            return ErrorCode.NONE, []
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID, []
        return ErrorCode.NONE, self._member_gone(member_id, now_ms)

    def _check_member(
        self, member_id: str, generation_id: int, group_instance_id: str | None = None
    ) -> int:
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self._fenced(group_instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != self.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def _member_gone(self, member_id: str, now_ms: int) -> list[Reply]:
        member = self.members[member_id]
        replies = []
        if member.join_token is not None:
            replies.append(Reply(member.join_token, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID)))
        if member.sync_token is not None:
            replies.append(Reply(member.sync_token, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)))
        self._remove_member(member_id)
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            replies += self._prepare_rebalance(now_ms)
        return replies + self._maybe_complete_join(now_ms)

    def _remove_member(self, member_id: str) -> None:
        member = self.members.pop(member_id)
        if member.group_instance_id is not None:
            if self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)

    # -- time ----------------------------------------------------------------------------------

    def poll(self, now_ms: int) -> tuple[list[Reply], list[str]]:
        """Expire sessions and time out rebalances: (replies, expired member ids)."""
        for member_id, deadline_ms in list(self.pending_member_ids.items()):
            if now_ms >= deadline_ms:
                del self.pending_member_ids[member_id]
        replies: list[Reply] = []
        expired = [
            m.member_id
            for m in self.members.values()
            if m.join_token is None
            and m.sync_token is None
            and now_ms >= m.last_heartbeat_ms + m.session_timeout_ms
        ]
        for member_id in expired:
            if member_id in self.members:
                replies += self._member_gone(member_id, now_ms)
        replies += self._maybe_complete_join(now_ms)
        return replies, expired

    # -- offsets, admin ------------------------------------------------------------------------

    def check_commit(
        self, *, member_id: str, generation_id: int, group_instance_id: str | None = None
    ) -> int:
        """May this member commit offsets now? Kafka's rules for the classic protocol."""
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and member_id == UNKNOWN_MEMBER_ID:
            # a commit from outside the group (assign() consumers, admin tools)
            return ErrorCode.NONE if self.is_empty() else ErrorCode.UNKNOWN_MEMBER_ID
        code = self._check_member(member_id, generation_id, group_instance_id)
        if code == ErrorCode.NONE and self.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return code

    def mark_dead(self) -> list[Reply]:
        """The group is deleted or unloaded: every waiting request learns NOT_COORDINATOR."""
        replies = []
        for member in self.members.values():
            if member.join_token is not None:
                replies.append(Reply(member.join_token, JoinResult(ErrorCode.NOT_COORDINATOR)))
            if member.sync_token is not None:
                replies.append(Reply(member.sync_token, SyncResult(ErrorCode.NOT_COORDINATOR)))
            member.join_token = member.sync_token = None
        self.state = GroupState.DEAD
        return replies

    def _transition(self, state: GroupState, now_ms: int) -> None:
        assert self.state is not GroupState.DEAD
        self.state = state
        self.state_changed_ms = now_ms
        if state in (GroupState.STABLE, GroupState.EMPTY):
            self.metadata_changed = True  # a rebalance ended: the driver stores the group
