"""HostedPartitions: the partitions this broker hosts, driven by the metadata image.

Theory of operation. The broker replays metadata; each new image is diffed against the last one
applied here (`quorum.image.partition_changes`) and every changed partition is handled:

    new leader == this broker        -> become leader: open/create the log with the topic's
                                        LogConfig (node defaults + topic ConfigRecords), take
                                        the new leader_epoch and ISR
    this broker in replicas, not leader -> become follower: open the log, stop serving produce/
                                        consumer fetch, fetch from the leader (ReplicaFetcher)
    not a replica / topic deleted    -> stop serving; a deleted topic's log is deleted

Topic config changes (ConfigRecords) update the open logs' LogConfig.

Replication. Each hosted partition carries the sans-IO `log.replication.partition_state.
PartitionState` (`hosted.state`): a leader change calls `make_leader`, a follower change
`make_follower` and -- for a new leader or leader epoch -- hands the partition to the
`ReplicaFetcherManager` (`fetcher_manager`), which truncates and fetches it from the leader;
leaving the replica set calls `make_offline` and stops fetching.

High watermark. `maybe_advance_high_watermark` is the ONE place the leader's high watermark
moves: `PartitionState.maybe_increment_high_watermark` (HW = min log end offset over the maximal
ISR, never backwards), called after appends, follower fetches and ISR changes. The partition's
`high_watermark_changed` trio Event (replaced after each set) is set when the HW moves, when
data is appended (follower long-polls wait for data, not for the HW) and when leadership or
the ISR changes; it wakes long-polling fetches and acks=all produce requests, which re-check
their condition -- no timer loops.

Not thread-safe: called from the broker's trio task only.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

import trio

from log.common.errors import (
    FencedLeaderEpochError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from log.common.node_config import NodeConfig
from log.replication.fetcher_manager import ReplicaFetcherManager
from log.replication.partition_state import PartitionState, StateChange
from log.replication.unified_replica_log import UnifiedReplicaLog
from log.storage.config import INT64_MAX, LogConfig
from log.storage.log import UnifiedLog
from log.storage.manager import LogManager
from quorum.image import MetadataImage, PartitionRegistration, partition_changes

logger = logging.getLogger(__name__)
LISTED_REPLICATION_CHANGES = 5  # more under-replicated/whole partitions at once: one line
RETRY_FAILED_INTERVAL_MS = 1000  # how often a partition whose change failed is tried again

# Node properties (Kafka's broker-level names) -> topic-level LogConfig properties.
_NODE_TO_TOPIC_CONFIG: Mapping[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "min.insync.replicas": "min.insync.replicas",
    "log.cleanup.policy": "cleanup.policy",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
}
_LOG_CONFIG_KEYS = frozenset(LogConfig().to_properties())


def default_log_config_properties(config: NodeConfig) -> dict[str, str]:
    """The topic-level properties every topic starts from: LogConfig's Kafka defaults with the
    node's broker-level settings (log.segment.bytes, ...) applied."""
    properties = LogConfig().to_properties()
    for node_key, topic_key in _NODE_TO_TOPIC_CONFIG.items():
        value = config.props[node_key]
        if topic_key.startswith("flush.") and value == -1:  # Kafka: -1 = Long.MAX_VALUE
            value = INT64_MAX
        properties[topic_key] = str(value)
    return properties


def default_log_config(config: NodeConfig) -> LogConfig:
    return LogConfig.from_properties(default_log_config_properties(config))


def topic_log_config(base: LogConfig, overrides: Mapping[str, str]) -> LogConfig:
    """`base` with a topic's overrides; keys LogConfig does not model (compression.type, ...)
    are ignored here, and an invalid combination keeps `base` (the controller validated each
    value, but not their combination with node defaults)."""
    relevant = {k: v for k, v in overrides.items() if k in _LOG_CONFIG_KEYS}
    if not relevant:
        return base
    try:
        return LogConfig.from_properties(relevant, base)
    except Exception as exc:  # InvalidConfigError; never stop hosting over a config
        logger.warning("topic config %s ignored: %s", relevant, exc)
        return base


class FetchWaiter:
    """A long-polling fetch: woken by any partition it reads, remembering which signalled."""

    __slots__ = ("event", "signalled")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.signalled: set[int] = set()  # id() of the HostedPartitions that signalled

    def wake(self, hosted: HostedPartition) -> None:
        self.signalled.add(id(hosted))
        self.event.set()


class SessionWatcher:
    """A fetch session's standing subscription to its partitions' signals: each signal marks
    the partition dirty in the session (so the next round reads it) and wakes the session's
    long poll, if one is waiting. Unlike a FetchWaiter it stays subscribed across rounds."""

    __slots__ = ("session", "event")

    def __init__(self, session: Any) -> None:
        self.session = session  # a log.replication.fetch_session.FetchSession
        self.event: trio.Event | None = None  # set while a long poll waits

    @property
    def closed(self) -> bool:
        return bool(self.session.evicted)

    def wake(self, hosted: HostedPartition) -> None:
        self.session.mark_dirty((hosted.topic, hosted.partition))
        if self.event is not None:
            self.event.set()


@dataclasses.dataclass
class HostedPartition:
    topic: str
    partition: int
    log: UnifiedLog
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    is_leader: bool
    state: PartitionState
    high_watermark_changed: trio.Event = dataclasses.field(default_factory=trio.Event)
    # Long-polling fetches waiting on this partition among others: one waiter per fetch,
    # however many partitions it names (no task per partition).
    fetch_waiters: set[FetchWaiter] = dataclasses.field(default_factory=set)
    # Fetch sessions reading this partition (standing; closed ones are dropped when signalled).
    session_watchers: set[SessionWatcher] = dataclasses.field(default_factory=set)

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Kafka's epoch check for a client that knows the leader epoch (-1: it does not)."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"leader epoch {current_leader_epoch} < current {self.leader_epoch}"
            )
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError(
                f"leader epoch {current_leader_epoch} > current {self.leader_epoch}"
            )

    def signal_high_watermark(self) -> None:
        self.high_watermark_changed.set()
        self.high_watermark_changed = trio.Event()
        if self.fetch_waiters:
            for waiter in self.fetch_waiters:
                waiter.wake(self)
            self.fetch_waiters.clear()
        if self.session_watchers:
            closed = [w for w in self.session_watchers if w.closed]
            for watcher in closed:
                self.session_watchers.discard(watcher)
            for watcher in self.session_watchers:
                watcher.wake(self)


class HostedPartitions:
    def __init__(self, broker_id: int, log_manager: LogManager, node_config: NodeConfig) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.default_config = default_log_config(node_config)
        self._image = MetadataImage()
        self._replication_notes: dict[str, list[str]] = {"under": [], "whole": []}
        # Partitions whose last change failed (a storage error: a full or failing disk), tried
        # again every RETRY_FAILED_INTERVAL_MS against the newest image until one works.
        self._failed: set[tuple[str, int]] = set()
        self._next_retry_ms = 0
        self._partitions: dict[tuple[str, int], HostedPartition] = {}
        # Set by the broker when it runs: follower partitions are fetched by it.
        self.fetcher_manager: ReplicaFetcherManager | None = None
        self.leader_change_count = 0  # became leader/follower of a new leader epoch/offline

    @property
    def image(self) -> MetadataImage:
        """The image last applied here."""
        return self._image

    # -- lookups -----------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> HostedPartition | None:
        return self._partitions.get((topic, partition))

    def leader(self, topic: str, partition: int, image: MetadataImage) -> HostedPartition:
        """The partition if this broker leads it; else the Kafka error a client should see."""
        hosted = self._partitions.get((topic, partition))
        if hosted is not None and hosted.is_leader:
            return hosted
        known = image.topic(topic)
        if known is None or partition not in known.partitions:
            known = self._image.topic(topic)
            if known is None or partition not in known.partitions:
                raise UnknownTopicOrPartitionError(f"{topic}-{partition} is unknown")
        raise NotLeaderOrFollowerError(f"broker {self.broker_id} does not lead {topic}-{partition}")

    # -- the high watermark rule (one place) ---------------------------------------------------

    def maybe_advance_high_watermark(self, hosted: HostedPartition) -> bool:
        """Leader's HW rule: min log end offset over the maximal ISR (PartitionState). Wakes
        waiters when it moved."""
        moved = hosted.state.maybe_increment_high_watermark()
        if moved:
            hosted.signal_high_watermark()
        return moved

    def leaders(self) -> list[HostedPartition]:
        return [h for h in self._partitions.values() if h.is_leader]

    # -- applying metadata ---------------------------------------------------------------------

    def apply_image(self, image: MetadataImage, now_ms: int = 0) -> None:
        old = self._image
        if image is old:
            return
        for change in partition_changes(old, image):
            key = (change.topic_name, change.partition)
            self._failed.discard(key)
            try:
                self._apply_change(image, change.topic_name, change.partition, change.new, now_ms)
            except Exception:  # a storage failure on one partition must not stop the others
                logger.exception("applying %s-%s failed (retried every %d ms)",
                                 change.topic_name, change.partition,
                                 RETRY_FAILED_INTERVAL_MS)  # fmt: skip
                self._fail(key)
        if image.configs is not old.configs:
            self._apply_configs(old, image)
        self._image = image
        self.report_replication()

    def _fail(self, key: tuple[str, int]) -> None:
        """A change that raised half-way leaves this partition serving nothing (NOT_LEADER /
        no fetching) rather than in a state it never finished entering; retry_failed redoes
        it from scratch (Kafka takes the whole log directory offline instead: not built)."""
        self._failed.add(key)
        hosted = self._partitions.get(key)
        if hosted is not None:
            hosted.state.make_offline()
            hosted.is_leader = False
            self._stop_fetching(key)
            hosted.signal_high_watermark()

    def retry_failed(self, now_ms: int) -> None:
        """Apply the newest image again to each partition whose change failed (at most every
        RETRY_FAILED_INTERVAL_MS; cheap when none failed)."""
        if not self._failed or now_ms < self._next_retry_ms:
            return
        self._next_retry_ms = now_ms + RETRY_FAILED_INTERVAL_MS
        image = self._image
        for key in sorted(self._failed):
            topic = image.topic(key[0])
            state = topic.partitions.get(key[1]) if topic is not None else None
            try:
                self._apply_change(image, key[0], key[1], state, now_ms)
            except Exception as exc:  # noqa: BLE001 - still failing: next interval
                logger.debug("retrying %s-%s failed again: %s", key[0], key[1], exc)
                self._fail(key)  # undo the half-made change again
                continue
            self._failed.discard(key)
            logger.info("partition %s-%d applied after an earlier failure", *key)
        self.report_replication()

    def _config_for(self, image: MetadataImage, topic: str) -> LogConfig:
        return topic_log_config(self.default_config, image.topic_configs(topic))

    def _apply_change(
        self,
        image: MetadataImage,
        topic: str,
        partition: int,
        state: PartitionRegistration | None,
        now_ms: int,
    ) -> None:
        key = (topic, partition)
        hosted = self._partitions.get(key)
        if state is None or self.broker_id not in state.replicas:
            if hosted is not None:
                del self._partitions[key]
                hosted.is_leader = False
                hosted.state.make_offline()
                self._stop_fetching(key)
                hosted.signal_high_watermark()  # wake waiters: they re-check and fail
            if state is None or image.topic(topic) is None:
                self.log_manager.delete_log(topic, partition)
            return
        if hosted is None:
            config = self._config_for(image, topic)
            log = self.log_manager.get_log(topic, partition)
            if log is None:
                log = self.log_manager.get_or_create_log(topic, partition, config, now_ms)
            elif log.config != config:
                log.update_config(config)
            replication = PartitionState(self.broker_id, UnifiedReplicaLog(log))
            hosted = HostedPartition(topic, partition, log, -1, (), (), False, replication)
            self._partitions[key] = hosted
        self._apply_replication_state(key, hosted, state, now_ms)

    def _apply_replication_state(
        self,
        key: tuple[str, int],
        hosted: HostedPartition,
        state: PartitionRegistration,
        now_ms: int,
    ) -> None:
        replication = hosted.state
        was_leader = hosted.is_leader
        if state.leader == self.broker_id:
            change = replication.make_leader(
                state.leader_epoch, state.partition_epoch, state.isr, state.replicas, now_ms
            )
            if change is not StateChange.IGNORED_STALE:
                self._stop_fetching(key)
            role = "leader"
        elif state.leader >= 0:
            change = replication.make_follower(
                state.leader, state.leader_epoch, state.partition_epoch, state.isr, state.replicas
            )
            if change is StateChange.NEW_LEADER_EPOCH and self.fetcher_manager is not None:
                self.fetcher_manager.add_partition(
                    key, hosted.log, state.leader, state.leader_epoch
                )
            role = "follower"
        else:  # no leader (all ISR members gone): nobody to fetch from
            replication.make_offline()
            self._stop_fetching(key)
            change, role = StateChange.NEW_LEADER_EPOCH, "offline"
        self.refresh(hosted)
        if change is StateChange.NEW_LEADER_EPOCH or was_leader != hosted.is_leader:
            self.leader_change_count += 1
            logger.info(
                "partition state change node=%d topic=%s partition=%d role=%s leader=%d "
                "leader_epoch=%d isr=%s log_end_offset=%d",
                self.broker_id, hosted.topic, hosted.partition, role, state.leader,
                state.leader_epoch, ",".join(map(str, hosted.isr)), hosted.log.log_end_offset,
            )  # fmt: skip
        if hosted.is_leader:
            self.maybe_advance_high_watermark(hosted)
        hosted.signal_high_watermark()  # wake waiters: they re-check leadership and the ISR

    def refresh(self, hosted: HostedPartition) -> None:
        """Copy the replication state's view (leader epoch, ISR) into the hosted fields.

        The leader says when its partition runs below its replication factor (a WARNING, once
        per change, not per fetch) and when it is whole again: an acks=all write to it is then
        on fewer disks than the topic asks for. The changes are collected and logged by
        `report_replication` once per image or AlterPartitions batch: a broker's death turns a
        thousand partitions under-replicated at once, and that is one line, not a thousand."""
        was_under_replicated = hosted.is_leader and len(hosted.isr) < len(hosted.replicas)
        replication = hosted.state
        hosted.leader_epoch = replication.leader_epoch
        hosted.isr = tuple(sorted(replication.isr))
        hosted.replicas = replication.replicas
        hosted.is_leader = replication.is_leader
        under_replicated = hosted.is_leader and len(hosted.isr) < len(hosted.replicas)
        if under_replicated and not was_under_replicated:
            self._replication_notes["under"].append(
                f"{hosted.topic}-{hosted.partition} is under-replicated: isr="
                f"{','.join(map(str, hosted.isr))} replicas={','.join(map(str, hosted.replicas))}"
                f" (writes are on {len(hosted.isr)} of {len(hosted.replicas)} replicas)"
            )
        elif was_under_replicated and not under_replicated and hosted.is_leader:
            self._replication_notes["whole"].append(
                f"{hosted.topic}-{hosted.partition} is fully replicated again: isr="
                f"{','.join(map(str, hosted.isr))}"
            )

    def report_replication(self) -> None:
        """Log the replication changes `refresh` collected: a line per partition up to
        LISTED_REPLICATION_CHANGES, else one line with the count and the first few."""
        for kind, level in (("under", logging.WARNING), ("whole", logging.INFO)):
            notes, self._replication_notes[kind] = self._replication_notes[kind], []
            if len(notes) <= LISTED_REPLICATION_CHANGES:
                for note in notes:
                    logger.log(level, "partition %s", note)
                continue
            shown = "; ".join(notes[:LISTED_REPLICATION_CHANGES])
            logger.log(level, "%d partitions changed: %s; and %d more like it", len(notes),
                       shown, len(notes) - LISTED_REPLICATION_CHANGES)  # fmt: skip

    def on_isr_change(self, hosted: HostedPartition) -> None:
        """An AlterPartition committed: refresh, maybe move the HW, wake waiters (the ISR
        manager calls `report_replication` once its batch is applied)."""
        self.refresh(hosted)
        self.maybe_advance_high_watermark(hosted)
        hosted.signal_high_watermark()

    def endpoint_for(self, broker_id: int) -> tuple[str, int] | None:
        """The PLAINTEXT endpoint of `broker_id` in the image last applied here."""
        registration = self._image.brokers.get(broker_id)
        if registration is None:
            return None
        for endpoint in registration.endpoints:
            if endpoint.name == "PLAINTEXT":
                return endpoint.host, endpoint.port
        return None

    def _stop_fetching(self, key: tuple[str, int]) -> None:
        if self.fetcher_manager is not None:
            self.fetcher_manager.remove_partition(key)

    def _apply_configs(self, old: MetadataImage, image: MetadataImage) -> None:
        for name in image.topic_ids_by_name:
            if old.topic_configs(name) != image.topic_configs(name):
                self.log_manager.update_topic_config(name, self._config_for(image, name))

    def describe(self) -> dict[str, Any]:
        return {
            f"{t}-{p}": {"leader": h.is_leader, "epoch": h.leader_epoch, "isr": h.isr}
            for (t, p), h in sorted(self._partitions.items())
        }
