"""GroupCoordinator: every group this broker coordinates, and their committed offsets. Sans-IO.

Groups live here by group id (`GroupMetadata`, group_state.py); committed offsets by (group,
topic, partition) as `OffsetAndMetadata` (offset, leader_epoch, metadata, commit_timestamp_ms).
The driver (log/coordinator/group_driver.py) turns requests into calls, parks delayed JoinGroup and
SyncGroup requests on their tokens, and calls `poll(now_ms)` at `next_deadline_ms()`.

Only groups of the __consumer_offsets partitions this broker leads are *loaded*; `load` and
`unload` follow partition leadership (`partition_for(group_id)` is Kafka's rule:
abs(java_hashCode(group_id)) % offsets.topic.num.partitions). A group of a partition we do not
lead is NOT_COORDINATOR; of one still loading, COORDINATOR_LOAD_IN_PROGRESS.

Records: `group_metadata_value(group)` is what the driver writes when a group's
`metadata_changed` is set (`take_changed_groups`); `load_group` restores a group from it.

Offset expiry (Kafka >= 2.1, KIP-211), run every offsets.retention.check.interval.ms by
`expire_offsets(now_ms)`: a group's offsets expire only while it is Empty, offsets.retention.ms
after it became Empty (after the commit when the state timestamp is unknown); a standalone
group (no protocol type: assign() consumers, admin tools) loses each offset offsets.retention.ms
after its commit; a Stable consumer group loses, offsets.retention.ms after their commit, the
offsets of topics none of its members subscribes to any more (KIP-496); a KIP-848 consumer
group, as Kafka's ConsumerGroup, loses each offset of a topic its members do not subscribe to
offsets.retention.ms after its commit, and once it has neither members nor offsets it is
removed (the tombstones of its records are in the GroupCleanup). An offset committed with an explicit expiry (OffsetCommit v2-v4
retention_time_ms) expires at that time instead, under the same conditions. Offsets with a
commit in flight never expire. An Empty group left without offsets is removed (Dead). The
caller writes tombstones for what `expire_offsets` returns.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

from log.common.errors import CorruptRecordError, ErrorCode
from log.coordinator import consumer_group_records as cgr
from log.coordinator.consumer_group_state import (
    ConsumerGroup,
    ConsumerGroupConfig,
    HeartbeatRequest,
    HeartbeatResult,
    TopicListing,
    TopicLookup,
    validate_heartbeat,
)
from log.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from log.coordinator.group_state import (
    GroupConfig,
    GroupMetadata,
    GroupState,
    MemberMetadata,
    Reply,
)
from log.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    encode_key,
)

OFFSETS_TOPIC = "__consumer_offsets"
MAX_GROUP_ID_BYTES = 249 * 4  # Kafka bounds nothing; one frame bounds everything anyway
OFFSET_METADATA_MAX_BYTES = 4096  # Kafka's offset.metadata.max.bytes default


def java_string_hash_code(value: str) -> int:
    """Java's String.hashCode (UTF-16 code units, 32-bit signed overflow)."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount`."""
    assert num_partitions > 0
    h = java_string_hash_code(group_id)
    return (h & 0x7FFFFFFF) % num_partitions  # Utils.abs maps MIN_VALUE to 0, not to itself


@dataclasses.dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int = -1  # -1: offsets.retention.ms decides


@dataclasses.dataclass(frozen=True)
class GroupCleanup:
    """What one `expire_offsets` pass removed from a group: tombstones to write."""

    group_id: str
    expired: tuple[tuple[str, int], ...]  # (topic, partition) of expired offsets
    group_removed: bool  # the group went Dead: its GroupMetadataKey gets a tombstone too
    # a KIP-848 group removed: the tombstones of its records (instead of GroupMetadataKey's)
    group_records: tuple[tuple[bytes, bytes | None], ...] = ()


CLASSIC_GROUP_TYPE = "classic"
CONSUMER_GROUP_TYPE = "consumer"  # KIP-848 groups (consumer_group_state.py)


@dataclasses.dataclass(frozen=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = CLASSIC_GROUP_TYPE


class CoordinatorError(Exception):
    def __init__(self, error_code: int) -> None:
        super().__init__(ErrorCode(error_code).name)
        self.error_code = error_code


class GroupCoordinator:
    def __init__(
        self,
        config: GroupConfig,
        num_partitions: int,
        new_member_id: Callable[[str], str] | None = None,
        consumer_config: ConsumerGroupConfig | None = None,
    ) -> None:
        self.config = config
        self.consumer_config = consumer_config or ConsumerGroupConfig()
        # KIP-848 consumer groups by id; a group id is either here or in `groups`, never both
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.num_partitions = num_partitions
        counter = itertools.count(1)
        self.new_member_id = new_member_id or (lambda client_id: f"{client_id}-{next(counter)}")
        self.groups: dict[str, GroupMetadata] = {}
        self.offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}
        # (topic, partition)s with a commit appended but not yet replicated: never expired
        self.pending_commits: dict[str, dict[tuple[str, int], int]] = {}
        # TxnOffsetCommit: offsets written in a transaction, applied when its COMMIT marker
        # lands on their __consumer_offsets partition, dropped at ABORT (Kafka's
        # pendingTransactionalOffsetCommits). producer id -> group -> (topic, partition) -> offset
        self.pending_txn_offsets: dict[int, dict[str, dict[tuple[str, int], OffsetAndMetadata]]]
        self.pending_txn_offsets = {}
        self.loaded_partitions: set[int] = set()
        self.loading_partitions: set[int] = set()
        # every partition is ours when nobody drives leadership (tests, single-node use)
        self.owns_all = True

    # -- ownership -----------------------------------------------------------------------------

    def check_group(self, group_id: str) -> None:
        """Raise CoordinatorError unless we coordinate `group_id` right now."""
        if not group_id or len(group_id) > MAX_GROUP_ID_BYTES:
            raise CoordinatorError(ErrorCode.INVALID_GROUP_ID)
        if self.owns_all:
            return
        partition = partition_for(group_id, self.num_partitions)
        if partition in self.loading_partitions:
            raise CoordinatorError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        if partition not in self.loaded_partitions:
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR)

    def begin_load(self, partition: int) -> None:
        self.owns_all = False
        self.loaded_partitions.discard(partition)
        self.loading_partitions.add(partition)

    def complete_load(self, partition: int) -> None:
        self.loading_partitions.discard(partition)
        self.loaded_partitions.add(partition)

    def unload(self, partition: int) -> list[Reply]:
        """Leadership of `partition` moved away: drop its groups and offsets."""
        self.owns_all = False
        self.loading_partitions.discard(partition)
        self.loaded_partitions.discard(partition)
        replies: list[Reply] = []
        for group_id in [
            g for g in self.groups if partition_for(g, self.num_partitions) == partition
        ]:
            replies += self.groups.pop(group_id).mark_dead()
        for group_id in [
            g for g in self.consumer_groups if partition_for(g, self.num_partitions) == partition
        ]:
            del self.consumer_groups[group_id]
        for group_id in [
            g for g in self.offsets if partition_for(g, self.num_partitions) == partition
        ]:
            del self.offsets[group_id]
        for producer_id, groups in list(self.pending_txn_offsets.items()):
            for group_id in [
                g for g in groups if partition_for(g, self.num_partitions) == partition
            ]:
                del groups[group_id]
            if not groups:
                del self.pending_txn_offsets[producer_id]
        return replies

    # -- group records -------------------------------------------------------------------------

    def take_changed_groups(
        self, group_ids: list[str] | None = None
    ) -> list[tuple[str, GroupMetadataValue]]:
        """(group_id, value) to store for groups (of `group_ids`, else all) whose rebalance ended."""
        names = self.groups if group_ids is None else group_ids
        values = []
        for group_id in names:
            group = self.groups.get(group_id)
            if group is None or not group.metadata_changed:
                continue
            group.metadata_changed = False
            # a rebalance that already began again writes its own record when it ends
            if group.state in (GroupState.STABLE, GroupState.EMPTY):
                values.append((group_id, group_metadata_value(group)))
        return values

    def load_group(self, group_id: str, value: GroupMetadataValue | None, now_ms: int) -> None:
        """Replay one group record (None: a tombstone) from __consumer_offsets."""
        old = self.groups.pop(group_id, None)
        if old is not None:
            assert not old.mark_dead(), "nobody waits on a group that is being loaded"
        if value is None:
            return
        if value.members and value.protocol is None:
            raise CorruptRecordError(f"group {group_id!r}: members but no protocol")
        members = [
            MemberMetadata(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.session_timeout_ms,
                m.rebalance_timeout_ms if m.rebalance_timeout_ms >= 0 else m.session_timeout_ms,
                ((value.protocol or "", m.subscription),),
                now_ms,
                m.assignment,
            )  # fmt: skip
            for m in value.members
        ]
        self.groups[group_id] = GroupMetadata.restore(
            group_id, self.config, self.new_member_id,
            generation_id=value.generation, protocol_type=value.protocol_type,
            protocol_name=value.protocol, leader_id=value.leader,
            state_changed_ms=value.current_state_timestamp_ms, members=members,
        )  # fmt: skip

    def group(self, group_id: str, now_ms: int, create: bool) -> GroupMetadata | None:
        group = self.groups.get(group_id)
        if group is None and create:
            group = GroupMetadata(group_id, self.config, self.new_member_id, now_ms)
            self.groups[group_id] = group
        return group

    # -- offsets -------------------------------------------------------------------------------

    def check_commit(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        now_ms: int,
        group_instance_id: str | None = None,
        api_version: int = 9,
    ) -> int:
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            return consumer_group.validate_offset_commit(member_id, generation_id, api_version)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                return ErrorCode.NONE  # simple (non-member) commit creates no group
            return ErrorCode.ILLEGAL_GENERATION
        return group.check_commit(
            member_id=member_id, generation_id=generation_id, group_instance_id=group_instance_id
        )

    def store_offset(
        self, group_id: str, topic: str, partition: int, value: OffsetAndMetadata | None
    ) -> None:
        """Apply one committed offset (None: a tombstone) -- from a commit or from replay."""
        offsets = self.offsets.setdefault(group_id, {})
        if value is None:
            offsets.pop((topic, partition), None)
            if not offsets:
                del self.offsets[group_id]
        else:
            offsets[(topic, partition)] = value

    def store_pending_txn_offset(
        self, producer_id: int, group_id: str, topic: str, partition: int, value: OffsetAndMetadata
    ) -> None:
        """A transactional offset (TxnOffsetCommit, or its record on replay): invisible to
        OffsetFetch until `complete_txn` commits it."""
        groups = self.pending_txn_offsets.setdefault(producer_id, {})
        groups.setdefault(group_id, {})[(topic, partition)] = value

    def complete_txn(self, producer_id: int, offsets_partition: int, committed: bool) -> int:
        """The transaction marker of `producer_id` landed on __consumer_offsets partition
        `offsets_partition`: apply (COMMIT) or drop (ABORT) that producer's pending offsets of
        the groups on it. Returns how many offsets were applied or dropped."""
        groups = self.pending_txn_offsets.get(producer_id)
        if groups is None:
            return 0
        count = 0
        for group_id in [
            g for g in groups if partition_for(g, self.num_partitions) == offsets_partition
        ]:
            pending = groups.pop(group_id)
            count += len(pending)
            if committed:
                for (topic, partition), value in pending.items():
                    self.store_offset(group_id, topic, partition, value)
        if not groups:
            del self.pending_txn_offsets[producer_id]
        return count

    def pending_txn_partitions(self, group_id: str) -> set[tuple[str, int]]:
        """Partitions with a transactional offset commit of `group_id` awaiting its marker."""
        return {
            tp for groups in self.pending_txn_offsets.values() for tp in groups.get(group_id, {})
        }

    def has_pending_txn_offsets(self, group_id: str) -> bool:
        return any(group_id in groups for groups in self.pending_txn_offsets.values())

    def begin_commit(self, group_id: str, partitions: list[tuple[str, int]]) -> None:
        pending = self.pending_commits.setdefault(group_id, {})
        for tp in partitions:
            pending[tp] = pending.get(tp, 0) + 1

    def end_commit(self, group_id: str, partitions: list[tuple[str, int]]) -> None:
        pending = self.pending_commits[group_id]
        for tp in partitions:
            pending[tp] -= 1
            assert pending[tp] >= 0
            if not pending[tp]:
                del pending[tp]
        if not pending:
            del self.pending_commits[group_id]

    def expire_offsets(self, now_ms: int) -> list[GroupCleanup]:
        """Drop expired offsets and groups left Empty without offsets (see the docstring)."""
        cleanups = []
        for group_id in sorted(set(self.groups) | set(self.offsets) | set(self.consumer_groups)):
            group = self.groups.get(group_id)
            expired = self._expired(group_id, group, now_ms)
            for topic, partition in expired:
                self.store_offset(group_id, topic, partition, None)
            consumer_group = self.consumer_groups.get(group_id)
            removed = (
                (
                    (consumer_group is None or not consumer_group.members)
                    and (
                        group is None
                        or (group.state is GroupState.EMPTY and not group.pending_member_ids)
                    )
                )
                and group_id not in self.offsets
                and group_id not in self.pending_commits
                and not self.has_pending_txn_offsets(group_id)  # Kafka's hasOffsets counts them
            )
            records: tuple[tuple[bytes, bytes | None], ...] = ()
            if removed and group is not None:
                assert not group.mark_dead(), "an Empty group has nobody waiting"
                del self.groups[group_id]
            if removed and consumer_group is not None:
                records = tuple(consumer_group.remove_all_records())
                del self.consumer_groups[group_id]
            if expired or removed:
                cleanups.append(GroupCleanup(group_id, tuple(expired), removed, records))
        return cleanups

    def _expired(
        self, group_id: str, group: GroupMetadata | None, now_ms: int
    ) -> list[tuple[str, int]]:
        """The (topic, partition)s whose committed offset expired (Kafka's KIP-211 / KIP-496
        rules: the group's state says which offsets may expire and from when)."""
        offsets = self.offsets.get(group_id, {})
        consumer_group = self.consumer_groups.get(group_id)
        pending = self.pending_commits.get(group_id, {})
        base_ms: int | None = None  # None: from each offset's commit timestamp
        subscribed: frozenset[str] | None = None  # their offsets stay (KIP-496)
        if consumer_group is not None:  # Kafka's ConsumerGroup: from each commit, unsubscribed
            subscribed = consumer_group.subscribed_topics()
        elif group is None or group.protocol_type is None:
            pass  # standalone: each offset from its commit
        elif group.state is GroupState.EMPTY:
            if group.pending_member_ids:
                return []  # a member is about to join with the id it was handed
            base_ms = group.state_changed_ms if group.state_changed_ms >= 0 else None
        elif group.state is GroupState.STABLE and group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            subscribed = self._subscribed_topics(group)
            if subscribed is None:
                return []
        else:
            return []  # a rebalance is going on: members are about to use the offsets
        expired = []
        for tp, o in offsets.items():
            if tp in pending or (subscribed is not None and tp[0] in subscribed):
                continue
            if o.expire_timestamp_ms != -1:
                due = now_ms >= o.expire_timestamp_ms
            else:
                due = now_ms - (o.commit_timestamp_ms if base_ms is None else base_ms) >= (
                    self.config.offsets_retention_ms
                )
            if due:
                expired.append(tp)
        return expired

    @staticmethod
    def _subscribed_topics(group: GroupMetadata) -> frozenset[str] | None:
        """Every topic a Stable consumer group's members subscribe to (None: unreadable)."""
        assert group.protocol_name is not None
        topics: set[str] = set()
        try:
            for member in group.members.values():
                topics |= subscribed_topics(member.metadata_for(group.protocol_name))
        except CorruptRecordError:
            return None
        return frozenset(topics)

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], OffsetAndMetadata | None]:
        """Committed offsets of `partitions` (None: every committed partition of the group)."""
        offsets = self.offsets.get(group_id, {})
        if partitions is None:
            return dict(sorted(offsets.items()))
        return {tp: offsets.get(tp) for tp in partitions}

    # -- admin ---------------------------------------------------------------------------------

    def list_groups(self) -> list[GroupOverview]:
        names = sorted(set(self.groups) | set(self.offsets) | set(self.consumer_groups))
        overviews = []
        for name in names:
            group = self.groups.get(name)
            consumer_group = self.consumer_groups.get(name)
            if consumer_group is not None:
                overviews.append(GroupOverview(name, CONSUMER_PROTOCOL_TYPE,
                                               consumer_group.state.value, CONSUMER_GROUP_TYPE))  # fmt: skip
            elif group is None:
                overviews.append(GroupOverview(name, "", GroupState.EMPTY.value))
            else:
                overviews.append(GroupOverview(name, group.protocol_type or "", group.state.value))
        return overviews

    def delete_group(self, group_id: str) -> tuple[int, list[Reply]]:
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            if consumer_group.members:
                return ErrorCode.NON_EMPTY_GROUP, []
            del self.consumer_groups[group_id]
            self.offsets.pop(group_id, None)
            return ErrorCode.NONE, []
        group = self.groups.get(group_id)
        if group is None and group_id not in self.offsets:
            return ErrorCode.GROUP_ID_NOT_FOUND, []
        if group is not None and not group.is_empty():
            return ErrorCode.NON_EMPTY_GROUP, []
        replies = group.mark_dead() if group is not None else []
        self.groups.pop(group_id, None)
        self.offsets.pop(group_id, None)
        return ErrorCode.NONE, replies

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[int, dict[tuple[str, int], int]]:
        """OffsetDelete (Kafka's handleDeleteOffsets): (group error, per-partition errors).

        An Empty or standalone group loses the offsets asked for; a consumer group with
        members keeps those of topics it subscribes to (GROUP_SUBSCRIBED_TO_TOPIC; all of them
        while its subscriptions are not known yet); any other group with members is
        NON_EMPTY_GROUP. The caller writes tombstones for the partitions answered NONE."""
        group = self.groups.get(group_id)
        if group is None and group_id not in self.offsets and group_id not in self.consumer_groups:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        subscribed: frozenset[str] | None = frozenset()
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            subscribed = consumer_group.subscribed_topics()
        elif group is not None and group.protocol_type is not None and not group.is_empty():
            if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
                return ErrorCode.NON_EMPTY_GROUP, {}
            subscribed = self._subscribed_topics(group) if group.protocol_name else None
        results: dict[tuple[str, int], int] = {}
        for topic, partition in partitions:
            if subscribed is None or topic in subscribed:
                results[(topic, partition)] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                results[(topic, partition)] = ErrorCode.NONE
                if (topic, partition) in self.offsets.get(group_id, {}):
                    self.store_offset(group_id, topic, partition, None)
        return ErrorCode.NONE, results

    # -- time ----------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for g in self.groups.values() if (d := g.next_deadline_ms()) is not None]
        deadlines += [
            d for g in self.consumer_groups.values() if (d := g.next_deadline_ms()) is not None
        ]
        return min(deadlines) if deadlines else None

    def poll_consumer_groups(
        self, now_ms: int
    ) -> list[tuple[str, list[str], list[tuple[bytes, bytes | None]]]]:
        """(group id, expired member ids, records to append) of KIP-848 groups' timeouts."""
        results = []
        for group in list(self.consumer_groups.values()):
            deadline = group.next_deadline_ms()
            if deadline is None or deadline > now_ms:
                continue
            expired, records = group.poll(now_ms)
            if expired:
                results.append((group.group_id, expired, records))
        return results

    # -- KIP-848 consumer groups -------------------------------------------------------------------

    def consumer_heartbeat(
        self,
        group_id: str,
        request: HeartbeatRequest,
        now_ms: int,
        lookup: TopicLookup,
        api_version: int,
        topics: TopicListing | None = None,
    ) -> tuple[HeartbeatResult, list[tuple[bytes, bytes | None]]]:
        """ConsumerGroupHeartbeat: (result, records to append). A classic group of the same id
        with members is GROUP_ID_NOT_FOUND (Kafka: "not a consumer group"); an empty one is
        replaced (its GroupMetadataKey gets a tombstone, written by the caller)."""
        refused = validate_heartbeat(request, self.consumer_config.assignors, api_version)
        if refused is not None:
            return HeartbeatResult(refused[0], refused[1]), []
        group = self.consumer_groups.get(group_id)
        replaced: list[tuple[bytes, bytes | None]] = []
        if group is None:
            if request.member_epoch != 0:
                return HeartbeatResult(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} not found"
                ), []
            classic = self.groups.get(group_id)
            if classic is not None:
                if not classic.is_empty():
                    return HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND,
                                           f"group {group_id} is not a consumer group"), []  # fmt: skip
                assert not classic.mark_dead(), "an empty group has nobody waiting"
                del self.groups[group_id]
                replaced = [(encode_key(GroupMetadataKey(group_id)), None)]
            group = self.consumer_groups[group_id] = ConsumerGroup(group_id, self.consumer_config)
        new_member_id = self.new_member_id(request.client_id)
        result, records = group.heartbeat(request, now_ms, lookup, new_member_id, topics)
        return result, replaced + records

    def load_consumer_group_record(
        self, key: cgr.ConsumerGroupRecordKey, value: Any, now_ms: int
    ) -> None:
        """Replay one KIP-848 record (decoded value, None: a tombstone) from __consumer_offsets."""
        group = self.consumer_groups.get(key.group_id)
        if group is None:
            if value is None:
                return
            group = self.consumer_groups[key.group_id] = ConsumerGroup(
                key.group_id, self.consumer_config
            )
        group.replay(key, value, now_ms)
        if key.version == cgr.GROUP_METADATA and value is None:
            del self.consumer_groups[key.group_id]

    def poll(self, now_ms: int) -> tuple[list[Reply], list[tuple[str, str]]]:
        """(replies, expired (group_id, member_id)) of every group's due timeouts."""
        replies: list[Reply] = []
        expired: list[tuple[str, str]] = []
        for group in list(self.groups.values()):
            deadline = group.next_deadline_ms()
            if deadline is None or deadline > now_ms:
                continue
            group_replies, members = group.poll(now_ms)
            replies += group_replies
            expired += [(group.group_id, m) for m in members]
        return replies, expired


def group_metadata_value(group: GroupMetadata) -> GroupMetadataValue:
    """The GroupMetadataValue Kafka writes for `group` (members only once it is Stable)."""
    members: tuple[MemberMetadataValue, ...] = ()
    if group.state is GroupState.STABLE:
        assert group.protocol_name is not None
        members = tuple(
            MemberMetadataValue(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata_for(group.protocol_name),
                m.assignment,
            )  # fmt: skip
            for m in group.members.values()
        )
    return GroupMetadataValue(
        group.protocol_type or "",
        group.generation_id,
        group.protocol_name if members else None,
        group.leader_id if members else None,
        group.state_changed_ms,
        members,
    )
