"""HostedPartitions: the partitions this broker hosts, driven by the metadata image.

Theory of operation. The broker replays metadata; each new image is diffed against the last one
applied here (`quorum.image.partition_changes`) and every changed partition is handled:

    new leader == this broker        -> become leader: open/create the log with the topic's
                                        LogConfig (node defaults + topic ConfigRecords), take
                                        the new leader_epoch and ISR
    this broker in replicas, not leader -> become follower: open the log, stop serving produce/
                                        consumer fetch (fetching from the leader is the
                                        replication engineer's ReplicaFetcher)
    not a replica / topic deleted    -> stop serving; a deleted topic's log is deleted

Topic config changes (ConfigRecords) update the open logs' LogConfig.

High watermark. `maybe_advance_high_watermark` is the ONE place the leader's high watermark
moves: today the rule is "ISR == [this broker] -> HW = log end offset" (replication factor 1);
with followers in the ISR it stays until replication (log/replication) supplies their fetch
offsets and replaces this method with "HW = min LEO over the ISR". Every HW advance sets the
partition's `high_watermark_changed` trio Event (replaced after each set), which wakes
long-polling consumer fetches and acks=all produce requests -- no timer loops.

Not thread-safe: called from the broker's trio task only.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

import trio

from log.protocol.errors import (
    FencedLeaderEpochError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from log.server.config import NodeConfig
from log.storage.config import INT64_MAX, LogConfig
from log.storage.log import UnifiedLog
from log.storage.manager import LogManager
from quorum.image import MetadataImage, PartitionState, partition_changes

logger = logging.getLogger(__name__)

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


@dataclasses.dataclass
class HostedPartition:
    topic: str
    partition: int
    log: UnifiedLog
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    is_leader: bool
    high_watermark_changed: trio.Event = dataclasses.field(default_factory=trio.Event)

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


class HostedPartitions:
    def __init__(self, broker_id: int, log_manager: LogManager, node_config: NodeConfig) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.default_config = default_log_config(node_config)
        self._image = MetadataImage()
        self._partitions: dict[tuple[str, int], HostedPartition] = {}

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
        """Leader's HW rule. ISR == [self]: HW = log end offset. Otherwise unchanged until
        replication supplies follower offsets. Wakes waiters when it moved."""
        if not hosted.is_leader or hosted.isr != (self.broker_id,):
            return False
        moved = hosted.log.maybe_increment_high_watermark(hosted.log.log_end_offset)
        if moved:
            hosted.signal_high_watermark()
        return moved

    # -- applying metadata ---------------------------------------------------------------------

    def apply_image(self, image: MetadataImage, now_ms: int = 0) -> None:
        old = self._image
        if image is old:
            return
        for change in partition_changes(old, image):
            try:
                self._apply_change(image, change.topic_name, change.partition, change.new, now_ms)
            except Exception:  # a storage failure on one partition must not stop the others
                logger.exception("applying %s-%s failed", change.topic_name, change.partition)
        if image.configs is not old.configs:
            self._apply_configs(old, image)
        self._image = image

    def _config_for(self, image: MetadataImage, topic: str) -> LogConfig:
        return topic_log_config(self.default_config, image.topic_configs(topic))

    def _apply_change(
        self,
        image: MetadataImage,
        topic: str,
        partition: int,
        state: PartitionState | None,
        now_ms: int,
    ) -> None:
        key = (topic, partition)
        hosted = self._partitions.get(key)
        if state is None or self.broker_id not in state.replicas:
            if hosted is not None:
                del self._partitions[key]
                hosted.is_leader = False
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
            hosted = HostedPartition(topic, partition, log, -1, (), (), False)
            self._partitions[key] = hosted
        was_leader = hosted.is_leader
        hosted.leader_epoch = state.leader_epoch
        hosted.isr = state.isr
        hosted.replicas = state.replicas
        hosted.is_leader = state.leader == self.broker_id
        if hosted.is_leader:
            self.maybe_advance_high_watermark(hosted)
        elif was_leader:
            hosted.signal_high_watermark()  # wake waiters: they re-check and fail

    def _apply_configs(self, old: MetadataImage, image: MetadataImage) -> None:
        for name in image.topic_ids_by_name:
            if old.topic_configs(name) != image.topic_configs(name):
                self.log_manager.update_topic_config(name, self._config_for(image, name))

    def describe(self) -> dict[str, Any]:
        return {
            f"{t}-{p}": {"leader": h.is_leader, "epoch": h.leader_epoch, "isr": h.isr}
            for (t, p), h in sorted(self._partitions.items())
        }
