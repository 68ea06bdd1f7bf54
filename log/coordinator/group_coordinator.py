"""GroupCoordinator: every group this broker coordinates, and their committed offsets. Sans-IO.

Groups live here by group id (`GroupMetadata`, group_state.py); committed offsets by (group,
topic, partition) as `OffsetAndMetadata` (offset, leader_epoch, metadata, commit_timestamp_ms).
The driver (log/server/group_driver.py) turns requests into calls, parks delayed JoinGroup and
SyncGroup requests on their tokens, and calls `poll(now_ms)` at `next_deadline_ms()`.

Only groups of the __consumer_offsets partitions this broker leads are *loaded*; `load` and
`unload` follow partition leadership (`partition_for(group_id)` is Kafka's rule:
abs(java_hashCode(group_id)) % offsets.topic.num.partitions). A group of a partition we do not
lead is NOT_COORDINATOR; of one still loading, COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

from log.coordinator.group_state import (
    GroupConfig,
    GroupMetadata,
    GroupState,
    Reply,
)
from log.protocol.errors import ErrorCode

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


@dataclasses.dataclass(frozen=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str


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
    ) -> None:
        self.config = config
        self.num_partitions = num_partitions
        counter = itertools.count(1)
        self.new_member_id = new_member_id or (lambda client_id: f"{client_id}-{next(counter)}")
        self.groups: dict[str, GroupMetadata] = {}
        self.offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}
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
            g for g in self.offsets if partition_for(g, self.num_partitions) == partition
        ]:
            del self.offsets[group_id]
        return replies

    def group(self, group_id: str, now_ms: int, create: bool) -> GroupMetadata | None:
        group = self.groups.get(group_id)
        if group is None and create:
            group = GroupMetadata(group_id, self.config, self.new_member_id, now_ms)
            self.groups[group_id] = group
        return group

    # -- offsets -------------------------------------------------------------------------------

    def check_commit(self, group_id: str, member_id: str, generation_id: int, now_ms: int) -> int:
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                return ErrorCode.NONE  # simple (non-member) commit creates no group
            return ErrorCode.ILLEGAL_GENERATION
        return group.check_commit(member_id=member_id, generation_id=generation_id)

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
        names = sorted(set(self.groups) | set(self.offsets))
        overviews = []
        for name in names:
            group = self.groups.get(name)
            if group is None:
                overviews.append(GroupOverview(name, "", GroupState.EMPTY.value))
            else:
                overviews.append(GroupOverview(name, group.protocol_type or "", group.state.value))
        return overviews

    def delete_group(self, group_id: str) -> tuple[int, list[Reply]]:
        group = self.groups.get(group_id)
        if group is None and group_id not in self.offsets:
            return ErrorCode.GROUP_ID_NOT_FOUND, []
        if group is not None and not group.is_empty():
            return ErrorCode.NON_EMPTY_GROUP, []
        replies = group.mark_dead() if group is not None else []
        self.groups.pop(group_id, None)
        self.offsets.pop(group_id, None)
        return ErrorCode.NONE, replies

    # -- time ----------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for g in self.groups.values() if (d := g.next_deadline_ms()) is not None]
        return min(deadlines) if deadlines else None

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
