"""GroupCoordinatorDriver: the trio driver around the sans-IO GroupCoordinator.

- Delayed requests: a JoinGroup/SyncGroup call registers a token, hands it to the core and
  waits on a trio.Event until the core's `Reply(token, result)` comes back (from this call,
  another member's request, or a timer).
- Timers: `run` sleeps until the core's next deadline (or until a request changed it) and
  calls `poll(now_ms)`; expirations answer the parked requests.
- Durability, Kafka's way: offset commits and group metadata are records in the internal topic
  __consumer_offsets (offsets.topic.num.partitions partitions, replication factor
  min(offsets.topic.replication.factor, live brokers)). A group lives on partition
  `partition_for(group_id)`; its coordinator is that partition's leader. Appends go through
  the ReplicaManager as leader and wait for the high watermark (acks=all), as a client's do. When this broker becomes
  leader of a partition it replays it (COORDINATOR_LOAD_IN_PROGRESS meanwhile); when it stops
  leading one it drops its groups (NOT_COORDINATOR).
- Group records: when a rebalance ends (the leader's SyncGroup; the group going Empty) the
  group's GroupMetadataValue with its members is appended; the leader's SyncGroup waits for the
  ISR, other changes (a leave, an expiry, timers) are appended without waiting. Replay restores
  the members, so after a fail-over they heartbeat and commit with the generation they had.
- KIP-848 consumer groups (`consumer_heartbeat`): the core decides (consumer_group_state.py)
  and hands back Kafka's consumer group records, appended before the heartbeat is answered
  (acks=all) and replayed at load, so a new coordinator knows every member, its epoch and its
  assignment. Session and revocation timeouts run on the same timer as the classic groups'.
- Offset expiry: every offsets.retention.check.interval.ms `expire_offsets` asks the core what
  expired and appends tombstones (offsets, then the group key of a group gone Dead).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import trio

from log.common.errors import CorruptRecordError, ErrorCode, KafkaError
from log.common.node_config import ConfigError, NodeConfig
from log.coordinator import consumer_group_records as cgr
from log.coordinator.append_errors import COORDINATOR_APPEND_ERRORS
from log.coordinator.assignors import parse_assignors
from log.coordinator.consumer_group_state import (
    ConsumerGroupConfig,
    HeartbeatRequest,
    HeartbeatResult,
    TopicListing,
)
from log.coordinator.group_coordinator import (
    OFFSETS_TOPIC,
    CoordinatorError,
    GroupCleanup,
    GroupCoordinator,
    OffsetAndMetadata,
    partition_for,
)
from log.coordinator.group_state import GroupConfig, GroupState, JoinResult, Reply, SyncResult
from log.coordinator.internal_topic import InternalTopic
from log.coordinator.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_key,
    encode_offset_value,
)
from log.records.batch_header import iter_batches
from log.records.builder import Record, build_batch
from log.records.control import ControlRecordType, read_end_txn_marker
from log.records.reader import iter_records
from log.replication.replica_manager import ReplicaManager
from log.storage.append_origin import AppendOrigin
from log.storage.producer_state import VerificationGuard
from quorum.broker_interface import ControllerChannel, MetadataSource

logger = logging.getLogger(__name__)

MAX_JOIN_WAIT_MS = 300_000  # Kafka's max rebalance timeout is 5 minutes
MAX_SYNC_WAIT_MS = 300_000
APPEND_TIMEOUT_MS = 5_000  # Kafka's offsets.commit.timeout.ms
LOAD_READ_BYTES = 1 << 20
MAX_MEMBER_ID_CLIENT_BYTES = 200

_APPEND_ERRORS = {
    **COORDINATOR_APPEND_ERRORS,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


def group_config_from(props: Mapping[str, Any]) -> GroupConfig:
    """The group settings of a node's (validated) properties; absent keys keep Kafka's."""
    defaults = GroupConfig()
    return GroupConfig(
        group_min_session_timeout_ms=props.get(
            "group.min.session.timeout.ms", defaults.group_min_session_timeout_ms
        ),
        group_max_session_timeout_ms=props.get(
            "group.max.session.timeout.ms", defaults.group_max_session_timeout_ms
        ),
        group_initial_rebalance_delay_ms=props.get(
            "group.initial.rebalance.delay.ms", defaults.group_initial_rebalance_delay_ms
        ),
        offsets_retention_ms=props.get("offsets.retention.ms", defaults.offsets_retention_ms),
        offsets_retention_check_interval_ms=props.get(
            "offsets.retention.check.interval.ms", defaults.offsets_retention_check_interval_ms
        ),
    )


def consumer_group_config_from(props: Mapping[str, Any]) -> ConsumerGroupConfig:
    """The KIP-848 group settings (group.consumer.*) of a node's properties."""
    defaults = ConsumerGroupConfig()
    try:
        assignors = parse_assignors(props.get("group.consumer.assignors", "uniform,range"))
    except ValueError as exc:
        raise ConfigError(f"group.consumer.assignors: {exc}") from exc
    return ConsumerGroupConfig(
        session_timeout_ms=props.get(
            "group.consumer.session.timeout.ms", defaults.session_timeout_ms
        ),
        heartbeat_interval_ms=props.get(
            "group.consumer.heartbeat.interval.ms", defaults.heartbeat_interval_ms
        ),
        assignors=assignors,
    )


def _new_member_id(client_id: str) -> str:
    return f"{client_id[:MAX_MEMBER_ID_CLIENT_BYTES]}-{uuid.uuid4()}"


class GroupCoordinatorDriver:
    def __init__(
        self,
        config: NodeConfig,
        replica_manager: ReplicaManager,
        metadata: MetadataSource,
        controller: ControllerChannel,
        clock_ms: Callable[[], int],
    ) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.metadata = metadata
        self.controller = controller
        self.clock_ms = clock_ms
        props = config.props
        self.num_partitions = props["offsets.topic.num.partitions"]
        self.core = GroupCoordinator(
            group_config_from(props), self.num_partitions, _new_member_id,
            consumer_group_config_from(props),
        )  # fmt: skip
        self.core.owns_all = False
        self._waiters: dict[Hashable, list] = {}  # token -> [Event, result]
        self._wakeup = trio.Event()
        self.internal_topic = InternalTopic(OFFSETS_TOPIC, metadata, controller)

    def partition_for(self, group_id: str) -> int:
        """The group's __consumer_offsets partition (AddOffsetsToTxn adds it to a transaction)."""
        return partition_for(group_id, self.num_partitions)

    # -- the internal topic and ownership --------------------------------------------------------

    async def ensure_offsets_topic(self) -> bool:
        """True when __consumer_offsets exists; else asks the controller to create it."""
        props = self.config.props
        return await self.internal_topic.ensure(
            self.num_partitions,
            props["offsets.topic.replication.factor"],
            lambda factor: {"segment.bytes": str(props["offsets.topic.segment.bytes"])},
        )

    def sync_ownership(self) -> None:
        """Load the partitions we now lead, unload those we no longer lead."""
        self.replica_manager.sync()
        led = {h.partition: h for h in self.replica_manager.leaders() if h.topic == OFFSETS_TOPIC}
        owned = self.core.loaded_partitions | self.core.loading_partitions
        for partition in sorted(owned - set(led)):
            self._dispatch(self.core.unload(partition))
        for partition in sorted(set(led) - owned):
            self.core.begin_load(partition)
            try:
                self._load(led[partition])
            except Exception:  # a corrupt partition must not take the coordinator down
                logger.exception("loading %s-%s failed", OFFSETS_TOPIC, partition)
            self.core.complete_load(partition)
            for group_id, group in sorted(self.core.consumer_groups.items()):
                if partition_for(group_id, self.num_partitions) == partition:
                    logger.info("consumer group %s loaded: group epoch %d, %d members",
                                group_id, group.group_epoch, len(group.members))  # fmt: skip

    def _load(self, hosted) -> None:  # noqa: ANN001
        log = hosted.log
        offset = log.log_start_offset
        now_ms = self.clock_ms()
        while offset < log.log_end_offset:
            data = log.read(offset, LOAD_READ_BYTES)
            if not data.records:
                break
            buf = bytes(data.records)
            for position, header in iter_batches(buf):
                if header.is_control:
                    try:
                        marker = read_end_txn_marker(buf, position)
                    except CorruptRecordError as exc:
                        logger.warning("%s-%s: %s", OFFSETS_TOPIC, hosted.partition, exc)
                        continue
                    if marker is not None:
                        committed = marker.control_type == ControlRecordType.COMMIT
                        self.core.complete_txn(header.producer_id, hosted.partition, committed)
                    continue
                producer_id = header.producer_id if header.is_transactional else None
                for record in iter_records(buf, position):
                    try:
                        self._replay(record.key, record.value, now_ms, producer_id)
                    except CorruptRecordError as exc:  # skip it: one bad record, not the rest
                        logger.warning("%s-%s: %s", OFFSETS_TOPIC, hosted.partition, exc)
            assert data.next_fetch_offset > offset
            offset = data.next_fetch_offset

    def _replay(
        self,
        key_bytes: bytes | None,
        value: bytes | None,
        now_ms: int,
        producer_id: int | None = None,
    ) -> None:
        """One record of __consumer_offsets; `producer_id` for a transactional batch's (its
        offsets wait for the transaction's marker)."""
        if key_bytes is None:
            return
        if cgr.key_version(key_bytes) in cgr.KEY_VERSIONS:
            cg_key = cgr.decode_key(key_bytes)
            decoded = None if value is None else cgr.decode_value(cg_key.version, value)
            self.core.load_consumer_group_record(cg_key, decoded, now_ms)
            return
        key = decode_key(key_bytes)
        if isinstance(key, OffsetCommitKey):
            stored = None
            if value is not None:
                v = decode_offset_value(value)
                stored = OffsetAndMetadata(
                    v.offset, v.leader_epoch, v.metadata, v.commit_timestamp_ms,
                    v.expire_timestamp_ms,
                )  # fmt: skip
            if producer_id is not None and stored is not None:
                self.core.store_pending_txn_offset(
                    producer_id, key.group, key.topic, key.partition, stored
                )
                return
            self.core.store_offset(key.group, key.topic, key.partition, stored)
            return
        group_value = None if value is None else decode_group_value(value)
        self.core.load_group(key.group, group_value, now_ms)

    # -- appending to __consumer_offsets -----------------------------------------------------------

    def _append_now(
        self, group_id: str, records: Sequence[tuple[bytes, bytes | None]]
    ) -> tuple[int, tuple | None]:
        """Append `records` for `group_id` as leader, now: (error code, what to await)."""
        partition = partition_for(group_id, self.num_partitions)
        now_ms = self.clock_ms()
        batch = build_batch([Record(value, key=key, timestamp_ms=now_ms) for key, value in records])
        try:
            hosted, info = self.replica_manager.append_to_local_log(
                OFFSETS_TOPIC, partition, memoryview(bytearray(batch)), -1, self.metadata.image
            )
        except KafkaError as exc:
            return _APPEND_ERRORS.get(exc.error_code, ErrorCode.UNKNOWN_SERVER_ERROR), None
        return ErrorCode.NONE, (hosted, info.last_offset + 1)

    async def _await_appended(self, appended: tuple) -> int:
        hosted, end_offset = appended
        code = await self.replica_manager.await_high_watermark(
            hosted, end_offset, APPEND_TIMEOUT_MS
        )
        return _APPEND_ERRORS.get(code, code) if code else ErrorCode.NONE

    async def _append(self, group_id: str, records: Sequence[tuple[bytes, bytes | None]]) -> int:
        """Append `records` for `group_id` as leader and wait for the ISR: an error code."""
        code, appended = self._append_now(group_id, records)
        if code:
            return code
        assert appended is not None
        return await self._await_appended(appended)

    def _group_records(self, group_ids: list[str] | None) -> dict[str, list]:
        return {
            group_id: [(encode_key(GroupMetadataKey(group_id)), encode_group_value(value))]
            for group_id, value in self.core.take_changed_groups(group_ids)
        }

    def _store_changed_now(
        self, group_ids: list[str] | None = None
    ) -> list[tuple[int, tuple | None]]:
        """Append the records of groups whose rebalance ended, now: (error code, what to await)
        per group."""
        appended = []
        for group_id, records in self._group_records(group_ids).items():
            code, waitable = self._append_now(group_id, records)
            if code:
                logger.info("storing group %s failed: %s", group_id, ErrorCode(code).name)
            appended.append((code, waitable))
        return appended

    async def _store_changed(self, group_id: str) -> int:
        """Store the group's record if its rebalance ended and wait for the ISR: error code."""
        for code, waitable in self._store_changed_now([group_id]):
            if code:
                return code
            assert waitable is not None  # appended: there is something to await
            code = await self._await_appended(waitable)
            if code:
                logger.info("storing group %s: %s", group_id, ErrorCode(code).name)
                return code
        return ErrorCode.NONE

    # -- requests --------------------------------------------------------------------------------

    def check_group(self, group_id: str) -> None:
        self.sync_ownership()
        self.core.check_group(group_id)

    async def join(self, group_id: str, **kwargs) -> JoinResult:  # noqa: ANN003
        try:
            self.check_group(group_id)
        except CoordinatorError as exc:
            return JoinResult(exc.error_code, member_id=kwargs["member_id"])
        consumer_group = self.core.consumer_groups.get(group_id)
        if consumer_group is not None:
            if consumer_group.members:  # a KIP-848 group: classic members may not join it
                return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                                  member_id=kwargs["member_id"])  # fmt: skip
            del self.core.consumer_groups[group_id]  # an empty one turns classic, as in Kafka
            code = await self._append(group_id, consumer_group.remove_all_records())
            if code:
                return JoinResult(code, member_id=kwargs["member_id"])
        now_ms = self.clock_ms()
        group = self.core.group(group_id, now_ms, create=True)
        assert group is not None
        token = object()
        waiter = self._waiters[token] = [trio.Event(), None]
        try:
            self._dispatch(group.join(token, now_ms=now_ms, **kwargs))
            self._store_changed_now([group_id])  # a static member replaced without rebalance
            self._wakeup.set()
            timeout_ms = min(max(kwargs["rebalance_timeout_ms"], 0) + 5_000, MAX_JOIN_WAIT_MS)
            with trio.move_on_after(timeout_ms / 1000):
                await waiter[0].wait()
        finally:
            del self._waiters[token]
        result = waiter[1]
        if result is None:
            return JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=kwargs["member_id"])
        return result

    async def sync(self, group_id: str, **kwargs) -> SyncResult:  # noqa: ANN003
        try:
            self.check_group(group_id)
        except CoordinatorError as exc:
            return SyncResult(exc.error_code)
        group = self.core.groups.get(group_id)
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        token = object()
        waiter = self._waiters[token] = [trio.Event(), None]
        try:
            replies = group.sync(token, now_ms=self.clock_ms(), **kwargs)
            # The leader's assignment ended the rebalance: as Kafka, every member hears its
            # assignment only once the group record (members, assignments) is replicated, and
            # hears the error if it could not be (the members rejoin).
            code = await self._store_changed(group_id)
            if code:
                replies = [
                    Reply(r.token, SyncResult(code))
                    if isinstance(r.result, SyncResult) and r.result.error_code == ErrorCode.NONE
                    else r
                    for r in replies
                ]
            self._dispatch(replies)
            self._wakeup.set()
            with trio.move_on_after(MAX_SYNC_WAIT_MS / 1000):
                await waiter[0].wait()
        finally:
            del self._waiters[token]
        result = waiter[1]
        if result is None:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        return result

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None = None,
    ) -> int:
        try:
            self.check_group(group_id)
        except CoordinatorError as exc:
            return exc.error_code
        group = self.core.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return group.heartbeat(
            member_id=member_id,
            generation_id=generation_id,
            now_ms=self.clock_ms(),
            group_instance_id=group_instance_id,
        )

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """LeaveGroup of (member_id, group_instance_id) pairs: (error code, one per member)."""
        try:
            self.check_group(group_id)
        except CoordinatorError as exc:
            return exc.error_code, [exc.error_code] * len(members)
        group = self.core.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        codes = []
        for member_id, group_instance_id in members:
            code, replies = group.leave(
                member_id=member_id, now_ms=self.clock_ms(), group_instance_id=group_instance_id
            )
            self._dispatch(replies)
            codes.append(code)
        self._store_changed_now([group_id])
        self._wakeup.set()
        return ErrorCode.NONE, codes

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        offsets: dict[tuple[str, int], OffsetAndMetadata],
        group_instance_id: str | None = None,
        api_version: int = 9,
    ) -> int:
        """Commit all of `offsets` or none: one error code for the request."""
        try:
            self.check_group(group_id)
        except CoordinatorError as exc:
            return exc.error_code
        code = self.core.check_commit(
            group_id, member_id, generation_id, self.clock_ms(), group_instance_id, api_version
        )
        if code:
            return code
        group = self.core.groups.get(group_id)
        if group is not None and group.state is not GroupState.DEAD:
            heartbeat_member = group.members.get(member_id)
            if heartbeat_member is not None:
                heartbeat_member.last_heartbeat_ms = self.clock_ms()
        records = [
            (
                encode_key(OffsetCommitKey(group_id, topic, partition)),
                encode_offset_value(
                    OffsetCommitValue(
                        o.offset,
                        o.leader_epoch,
                        o.metadata,
                        o.commit_timestamp_ms,
                        o.expire_timestamp_ms,
                    )  # fmt: skip
                ),
            )
            for (topic, partition), o in offsets.items()
        ]
        if records:
            self.core.begin_commit(group_id, list(offsets))
            try:
                code = await self._append(group_id, records)
            finally:
                self.core.end_commit(group_id, list(offsets))
            if code:
                return code
        # check again: ownership may have moved while we waited for the replicas
        if partition_for(group_id, self.num_partitions) not in self.core.loaded_partitions:
            return ErrorCode.NOT_COORDINATOR
        for (topic, partition), o in offsets.items():
            self.core.store_offset(group_id, topic, partition, o)
        return ErrorCode.NONE

    async def consumer_heartbeat(
        self, group_id: str, request: HeartbeatRequest, api_version: int
    ) -> HeartbeatResult:
        """ConsumerGroupHeartbeat: the core's answer, once its records are replicated."""
        try:
            self.check_group(group_id)
        except CoordinatorError as exc:
            return HeartbeatResult(exc.error_code)
        image = self.metadata.image

        def lookup(name: str) -> tuple[uuid.UUID, int] | None:
            topic = image.topic(name)
            return None if topic is None else (topic.topic_id, len(topic.partitions))

        topics = TopicListing(image.last_offset, lambda: image.topic_ids_by_name.keys())
        result, records = self.core.consumer_heartbeat(
            group_id, request, self.clock_ms(), lookup, api_version, topics
        )
        self._wakeup.set()  # the session deadlines moved
        if records:
            code = await self._append(group_id, records)
            if code:
                logger.info("storing consumer group %s: %s", group_id, ErrorCode(code).name)
                return HeartbeatResult(code)
        return result

    async def commit_transactional_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[tuple[str, int], OffsetAndMetadata],
        verification_guard: VerificationGuard | None = None,
    ) -> int:
        """TxnOffsetCommit (v0-2): write `offsets` as one transactional batch of the producer
        to the group's __consumer_offsets partition (acks=all); they stay pending, invisible to
        OffsetFetch, until the transaction's marker lands there (`on_transaction_completed`).
        The partition's producer state fences an older producer epoch. One error code.
        `verification_guard`: the transaction verification passed (KIP-890 part 1); voided
        meanwhile (a marker or new epoch got in first), the commit is INVALID_TXN_STATE."""
        try:
            self.check_group(group_id)
        except CoordinatorError as exc:
            return exc.error_code
        if not offsets:
            return ErrorCode.NONE
        partition = partition_for(group_id, self.num_partitions)
        now_ms = self.clock_ms()
        records = [
            Record(
                encode_offset_value(
                    OffsetCommitValue(
                        o.offset,
                        o.leader_epoch,
                        o.metadata,
                        o.commit_timestamp_ms,
                        o.expire_timestamp_ms,
                    )  # fmt: skip
                ),
                key=encode_key(OffsetCommitKey(group_id, topic, p)),
                timestamp_ms=now_ms,
            )
            for (topic, p), o in offsets.items()
        ]
        batch = build_batch(
            records,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            is_transactional=True,  # no sequence: the COORDINATOR origin checks only epochs
        )
        if verification_guard is not None:
            hosted = self.replica_manager.get(OFFSETS_TOPIC, partition)
            state = hosted.log.producer_state_manager if hosted is not None else None
            if state is not None and not state.verification_holds(verification_guard):
                return ErrorCode.INVALID_TXN_STATE
        try:
            hosted, info = self.replica_manager.append_to_local_log(
                OFFSETS_TOPIC,
                partition,
                memoryview(bytearray(batch)),
                -1,
                self.metadata.image,
                AppendOrigin.COORDINATOR,
            )
        except KafkaError as exc:
            code = exc.error_code
            return _APPEND_ERRORS.get(code, code)
        # Pending from the append on, as Kafka: a marker cannot precede the commit's answer.
        for (topic, p), o in offsets.items():
            self.core.store_pending_txn_offset(producer_id, group_id, topic, p, o)
        return await self._await_appended((hosted, info.last_offset + 1))

    def on_transaction_completed(
        self, topic: str, partition: int, producer_id: int, committed: bool
    ) -> None:
        """A transaction marker is durable on a partition we lead (the ReplicaManager's
        transaction completion listener): a __consumer_offsets one applies or drops the
        producer's pending transactional offsets there."""
        if topic != OFFSETS_TOPIC:
            return
        count = self.core.complete_txn(producer_id, partition, committed)
        if count:
            logger.debug("%s-%d: producer %d %s %d offsets", OFFSETS_TOPIC, partition, producer_id,
                         "committed" if committed else "aborted", count)  # fmt: skip

    def fetch_offsets(
        self,
        group_id: str,
        partitions: list[tuple[str, int]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> dict[tuple[str, int], OffsetAndMetadata | None]:
        """Raises CoordinatorError (also for a KIP-848 member's id or epoch, OffsetFetch v9)."""
        self.check_group(group_id)
        consumer_group = self.core.consumer_groups.get(group_id)
        if consumer_group is not None:
            code = consumer_group.validate_offset_fetch(member_id, member_epoch)
            if code:
                raise CoordinatorError(code)
        return self.core.fetch_offsets(group_id, partitions)

    async def delete_group(self, group_id: str) -> int:
        try:
            self.check_group(group_id)
        except CoordinatorError as exc:
            return exc.error_code
        offsets = self.core.fetch_offsets(group_id, None)
        consumer_group = self.core.consumer_groups.get(group_id)
        code, replies = self.core.delete_group(group_id)
        self._dispatch(replies)
        if code:
            return code
        group_records: list[tuple[bytes, bytes | None]] = [
            (encode_key(GroupMetadataKey(group_id)), None)
        ]
        if consumer_group is not None:
            group_records = consumer_group.remove_all_records()
        records = group_records + [
            (encode_key(OffsetCommitKey(group_id, topic, partition)), None)
            for topic, partition in offsets
        ]
        return await self._append(group_id, records)

    async def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[int, dict[tuple[str, int], int]]:
        """OffsetDelete: the core's decision, then tombstones for the deleted offsets."""
        try:
            self.check_group(group_id)
        except CoordinatorError as exc:
            return exc.error_code, {}
        committed = self.core.fetch_offsets(group_id, None)
        code, results = self.core.delete_offsets(group_id, partitions)
        if code:
            return code, {}
        deleted = [tp for tp, c in results.items() if c == ErrorCode.NONE and tp in committed]
        if deleted:
            records: list[tuple[bytes, bytes | None]] = [
                (encode_key(OffsetCommitKey(group_id, topic, partition)), None)
                for topic, partition in deleted
            ]
            code = await self._append(group_id, records)
            if code:
                return code, {}
        return ErrorCode.NONE, results

    async def expire_offsets(self) -> list[GroupCleanup]:
        """One offset expiry pass (offsets.retention.ms): tombstones for what expired."""
        self.sync_ownership()
        cleanups = self.core.expire_offsets(self.clock_ms())
        for cleanup in cleanups:
            group_id = cleanup.group_id
            records: list[tuple[bytes, bytes | None]] = [
                (encode_key(OffsetCommitKey(group_id, topic, partition)), None)
                for topic, partition in cleanup.expired
            ]
            if cleanup.group_records:
                records += cleanup.group_records
            elif cleanup.group_removed:
                records.append((encode_key(GroupMetadataKey(group_id)), None))
            code = await self._append(group_id, records)
            if code:
                logger.info("expiring group %s offsets: %s", group_id, ErrorCode(code).name)
            logger.info(
                "group %s: %d offsets expired%s", group_id, len(cleanup.expired),
                ", group removed" if cleanup.group_removed else "",
            )  # fmt: skip
        return cleanups

    async def _expire_offsets_periodically(self) -> None:
        interval_s = self.core.config.offsets_retention_check_interval_ms / 1000
        while True:
            await trio.sleep(interval_s)
            try:
                await self.expire_offsets()
            except Exception:
                logger.exception("offset expiry failed")

    def owned_partitions(self) -> set[int]:
        self.sync_ownership()
        return set(self.core.loaded_partitions)

    # -- replies and timers ----------------------------------------------------------------------

    def _dispatch(self, replies: list[Reply]) -> None:
        for reply in replies:
            waiter = self._waiters.get(reply.token)
            if waiter is not None and waiter[1] is None:
                waiter[1] = reply.result
                waiter[0].set()

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:  # noqa: ANN001
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._follow_metadata)
            nursery.start_soon(self._expire_offsets_periodically)
            task_status.started()
            while True:
                self._wakeup = trio.Event()
                deadline_ms = self.core.next_deadline_ms()
                now_ms = self.clock_ms()
                if deadline_ms is None:
                    await self._wakeup.wait()
                elif deadline_ms > now_ms:
                    with trio.move_on_after((deadline_ms - now_ms) / 1000):
                        await self._wakeup.wait()
                replies, expired = self.core.poll(self.clock_ms())
                for group_id, member_id in expired:
                    logger.info("group %s: member %s session expired", group_id, member_id)
                for group_id, members, records in self.core.poll_consumer_groups(self.clock_ms()):
                    logger.info("consumer group %s: members %s timed out", group_id, members)
                    code, _ = self._append_now(group_id, records)
                    if code:
                        logger.info("storing consumer group %s failed: %s", group_id,
                                    ErrorCode(code).name)  # fmt: skip
                self._dispatch(replies)
                self._store_changed_now()
                await trio.sleep(0)  # a deadline in the past never spins past other tasks

    async def _follow_metadata(self) -> None:
        async with self.metadata.subscribe() as images:
            async for _image in images:
                try:
                    self.sync_ownership()
                except Exception:
                    logger.exception("group coordinator ownership sync failed")
                self._wakeup.set()
