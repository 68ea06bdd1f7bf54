"""Per-partition log configuration with Kafka's topic-level names and defaults.

`LogConfig` is a frozen dataclass whose fields are Kafka's topic configs in snake_case
(`segment.bytes` -> `segment_bytes`). `from_properties` accepts Kafka's dotted names as strings
(what CreateTopics / AlterConfigs carry) and raises `InvalidConfigError` naming the key for any
value that is not a number, out of range, or inconsistent with another value.

Flushing follows Kafka's default: no forced fsync (`flush_messages` / `flush_ms` are
Long.MAX_VALUE); the OS writes back, replication provides durability, and recovery cuts whatever a
crash tore.

Every topic starts from `default_log_config(node_config)`: LogConfig's Kafka defaults with the
node's broker-level settings applied (`log.segment.bytes` -> `segment.bytes`, ...), and
`topic_log_config` lays a topic's own overrides (ConfigRecords) over that.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from log.common.errors import InvalidConfigError
from log.common.node_config import NodeConfig

logger = logging.getLogger(__name__)

INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"

# Kafka's LegacyRecord/DefaultRecordBatch header overhead below which no batch can exist:
# a segment or a message limit smaller than this could never hold a batch.
MIN_SEGMENT_BYTES = 14  # Kafka's LegacyRecord.RECORD_OVERHEAD_V0, its lower bound for segment.bytes
OFFSET_INDEX_ENTRY_BYTES = 8  # the smallest index must hold at least one entry


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1 << 30  # 1 GiB
    segment_ms: int = 7 * 24 * 3600 * 1000  # 7 days
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024  # 10 MiB
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000  # 7 days; -1 = infinite
    retention_bytes: int = -1  # -1 = infinite
    max_message_bytes: int = 1048588  # 1 MiB + Kafka's record-batch overhead
    message_timestamp_type: str = CREATE_TIME
    min_insync_replicas: int = 1
    cleanup_policy: str = "delete"
    flush_messages: int = INT64_MAX  # no forced fsync by message count
    flush_ms: int = INT64_MAX  # no forced fsync by time
    file_delete_delay_ms: int = 60000
    # Compaction (cleanup.policy contains compact), see cleaner_manager.py
    delete_retention_ms: int = 86_400_000  # 1 day: how long a tombstone outlives its first clean
    min_compaction_lag_ms: int = 0  # a record stays uncompacted at least this long
    max_compaction_lag_ms: int = INT64_MAX  # a dirty record is cleaned within this, any ratio
    min_cleanable_dirty_ratio: float = 0.5  # dirty / (clean + dirty) bytes that trigger a clean

    def __post_init__(self) -> None:
        _check_range("segment.bytes", self.segment_bytes, MIN_SEGMENT_BYTES, INT32_MAX)
        _check_range("segment.ms", self.segment_ms, 1, INT64_MAX)
        _check_range("segment.jitter.ms", self.segment_jitter_ms, 0, INT64_MAX)
        _check_range(
            "segment.index.bytes", self.segment_index_bytes, OFFSET_INDEX_ENTRY_BYTES, INT32_MAX
        )
        _check_range("index.interval.bytes", self.index_interval_bytes, 0, INT32_MAX)
        _check_range("retention.ms", self.retention_ms, -1, INT64_MAX)
        _check_range("retention.bytes", self.retention_bytes, -1, INT64_MAX)
        _check_range("max.message.bytes", self.max_message_bytes, 0, INT32_MAX)
        _check_range("min.insync.replicas", self.min_insync_replicas, 1, INT32_MAX)
        _check_range("flush.messages", self.flush_messages, 1, INT64_MAX)
        _check_range("flush.ms", self.flush_ms, 0, INT64_MAX)
        _check_range("file.delete.delay.ms", self.file_delete_delay_ms, 0, INT64_MAX)
        _check_range("delete.retention.ms", self.delete_retention_ms, 0, INT64_MAX)
        _check_range("min.compaction.lag.ms", self.min_compaction_lag_ms, 0, INT64_MAX)
        _check_range("max.compaction.lag.ms", self.max_compaction_lag_ms, 1, INT64_MAX)
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise InvalidConfigError(  # Kafka's check: the window must not be empty
                "min.compaction.lag.ms must not exceed max.compaction.lag.ms"
            )
        ratio = self.min_cleanable_dirty_ratio
        if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or not 0 <= ratio <= 1:
            raise InvalidConfigError(f"min.cleanable.dirty.ratio must be in [0, 1], got {ratio!r}")
        if self.message_timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise InvalidConfigError(
                f"message.timestamp.type must be {CREATE_TIME} or {LOG_APPEND_TIME}, "
                f"got {self.message_timestamp_type!r}"
            )
        policies = {p.strip() for p in self.cleanup_policy.split(",") if p.strip()}
        if not policies <= {"delete", "compact"}:  # empty is valid: neither deleted nor compacted
            raise InvalidConfigError(
                f"cleanup.policy must be delete and/or compact, got {self.cleanup_policy!r}"
            )

    @property
    def compact(self) -> bool:
        """cleanup.policy contains compact: the log cleaner keeps the latest value per key."""
        return "compact" in {p.strip() for p in self.cleanup_policy.split(",")}

    @property
    def delete(self) -> bool:
        """cleanup.policy contains delete: retention.ms / retention.bytes apply."""
        return "delete" in {p.strip() for p in self.cleanup_policy.split(",")}

    @property
    def is_log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def max_index_entries(self) -> int:
        return self.segment_index_bytes // OFFSET_INDEX_ENTRY_BYTES

    @classmethod
    def from_properties(
        cls, properties: dict[str, str], base: LogConfig | None = None
    ) -> LogConfig:
        """Build from Kafka's dotted names; unknown keys raise, so typos do not pass silently."""
        # Any: which value type goes with a field is known from _*_FIELDS at run time only.
        changes: dict[str, Any] = {}
        for key, raw in properties.items():
            field_name = _PROPERTY_FIELDS.get(key)
            if field_name is None:
                raise InvalidConfigError(f"unknown log config {key!r}")
            if field_name in _STRING_FIELDS:
                changes[field_name] = str(raw).strip()
            elif field_name in _FLOAT_FIELDS:
                changes[field_name] = _parse_float(key, raw)
            else:
                changes[field_name] = _parse_int(key, raw)
        return dataclasses.replace(base or cls(), **changes)

    def to_properties(self) -> dict[str, str]:
        return {key: str(getattr(self, name)) for key, name in _PROPERTY_FIELDS.items()}


_PROPERTY_FIELDS: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.type": "message_timestamp_type",
    "min.insync.replicas": "min_insync_replicas",
    "cleanup.policy": "cleanup_policy",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
}
_STRING_FIELDS = frozenset({"message_timestamp_type", "cleanup_policy"})
_FLOAT_FIELDS = frozenset({"min_cleanable_dirty_ratio"})


def _parse_int(key: str, raw: str) -> int:
    try:
        return int(str(raw).strip())
    except ValueError:
        raise InvalidConfigError(f"{key} must be an integer, got {raw!r}") from None


def _parse_float(key: str, raw: str) -> float:
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise InvalidConfigError(f"{key} must be a number, got {raw!r}") from None
    if value != value:  # NaN
        raise InvalidConfigError(f"{key} must be a number, got {raw!r}")
    return value


def _check_range(key: str, value: int, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidConfigError(f"{key} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise InvalidConfigError(f"{key} must be in [{low}, {high}], got {value}")


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


def dynamic_log_config(base: LogConfig, *layers: Mapping[str, str]) -> LogConfig:
    """`base` (the node's defaults) with dynamic broker configs laid over it in order (the
    cluster-wide default, then this broker's): the broker-level names LogConfig models
    (log.retention.ms, ...) become topic-level ones; an invalid value is ignored (logged)."""
    config = base
    for layer in layers:
        for node_key, value in sorted(layer.items()):
            topic_key = _NODE_TO_TOPIC_CONFIG.get(node_key)
            if topic_key is None:
                continue
            if topic_key.startswith("flush.") and value.strip() == "-1":
                value = str(INT64_MAX)
            try:
                config = LogConfig.from_properties({topic_key: value}, config)
            except Exception as exc:  # InvalidConfigError; never stop hosting over a config
                logger.warning("dynamic broker config %s=%s ignored: %s", node_key, value, exc)
    return config


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
