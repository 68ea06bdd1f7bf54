"""DescribeConfigs v3+'s config types and documentation (KIP-569), for topic and broker configs.

Types are Kafka's (its ConfigDef type of each key, as DescribeConfigsResponse.ConfigType ids);
a broker key's type follows its kind in log/common/node_config.py (bool BOOLEAN, float DOUBLE,
str STRING, int INT) except where Kafka defines it otherwise (`_BROKER_TYPES`), and a
sensitive key is PASSWORD. A key we do not know is UNKNOWN. The documentation is ours: the
node keys' own `doc`, and one line per topic config below.
"""

from __future__ import annotations

import enum

from log.common.node_config import CONFIG_KEYS


class ConfigType(enum.IntEnum):
    """Kafka's DescribeConfigsResponse.ConfigType ids."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


_B, _S, _I, _L, _D, _LIST = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT,
                             ConfigType.LONG, ConfigType.DOUBLE, ConfigType.LIST)  # fmt: skip

# Topic configs: (type, our documentation).
TOPIC_CONFIGS: dict[str, tuple[ConfigType, str]] = {
    "cleanup.policy": (_LIST, "delete (by retention), compact (latest record per key), or both"),
    "compression.type": (_S, "codec the broker stores batches in; producer keeps the producer's"),
    "delete.retention.ms": (_L, "how long a tombstone stays after a clean has seen it"),
    "file.delete.delay.ms": (_L, "how long a deleted segment's files wait before removal"),
    "flush.messages": (_L, "fsync after this many records (Long.MAX_VALUE: leave it to the OS)"),
    "flush.ms": (_L, "fsync after this long (Long.MAX_VALUE: leave it to the OS)"),
    "index.interval.bytes": (_I, "bytes between two offset index entries"),
    "local.retention.bytes": (_L, "tiered storage only: local bytes kept (-2: retention.bytes)"),
    "local.retention.ms": (_L, "tiered storage only: local time kept (-2: retention.ms)"),
    "max.compaction.lag.ms": (_L, "longest a record may stay uncompacted"),
    "max.message.bytes": (_I, "largest record batch the topic accepts"),
    "message.timestamp.after.max.ms": (_L, "how far in the future a CreateTime may be"),
    "message.timestamp.before.max.ms": (_L, "how far in the past a CreateTime may be"),
    "message.timestamp.difference.max.ms": (_L, "deprecated: both timestamp bounds at once"),
    "message.timestamp.type": (_S, "CreateTime (the producer's) or LogAppendTime (the broker's)"),
    "min.cleanable.dirty.ratio": (_D, "share of uncleaned log that makes a log worth cleaning"),
    "min.compaction.lag.ms": (_L, "shortest a record stays uncompacted"),
    "min.insync.replicas": (_I, "in-sync replicas an acks=all write needs"),
    "preallocate": (_B, "preallocate a new segment's file"),
    "retention.bytes": (_L, "largest a partition may grow before old segments go (-1: no limit)"),
    "retention.ms": (_L, "how long a segment is kept (-1: forever)"),
    "segment.bytes": (_I, "size at which a segment is rolled"),
    "segment.index.bytes": (_I, "size of a segment's offset and time indexes"),
    "segment.jitter.ms": (_L, "random time taken off segment.ms, so segments do not roll at once"),
    "segment.ms": (_L, "age at which a segment is rolled"),
    "unclean.leader.election.enable": (_B, "may a replica outside the ISR become leader"),
    "message.format.version": (_S, "ignored: the v2 record format is the only one"),
}

# Broker keys whose Kafka type is not what their kind says.
_BROKER_TYPES: dict[str, ConfigType] = {
    **dict.fromkeys(("process.roles", "sasl.enabled.mechanisms", "controller.quorum.voters",
                     "log.cleanup.policy", "group.consumer.assignors"), _LIST),
    **dict.fromkeys(("connections.max.reauth.ms", "leader.imbalance.check.interval.seconds",
                     "queued.max.request.bytes", "log.roll.ms", "log.retention.ms",
                     "log.retention.bytes", "log.retention.check.interval.ms",
                     "log.flush.interval.messages", "log.flush.interval.ms",
                     "replica.lag.time.max.ms", "replica.high.watermark.checkpoint.interval.ms",
                     "connections.max.idle.ms", "offsets.retention.check.interval.ms",
                     "metadata.log.max.snapshot.interval.ms",
                     "metadata.log.max.record.count.between.snapshots", "log.cleaner.backoff.ms",
                     "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms",
                     "log.cleaner.max.compaction.lag.ms"), _L),
    **dict.fromkeys(("offsets.topic.replication.factor",
                     "transaction.state.log.replication.factor"), ConfigType.SHORT),
}  # fmt: skip
_KIND_TYPES = {bool: _B, float: _D, str: _S, int: _I}
_NODE_KEYS = {key.name: key for key in CONFIG_KEYS}


def topic_config_type(name: str) -> tuple[ConfigType, str | None]:
    """A topic config's (type, documentation)."""
    known = TOPIC_CONFIGS.get(name)
    return known if known is not None else (ConfigType.UNKNOWN, None)


def broker_config_type(name: str, sensitive: bool) -> tuple[ConfigType, str | None]:
    """A broker config's (type, documentation)."""
    key = _NODE_KEYS.get(name)
    if key is None:
        return ConfigType.PASSWORD if sensitive else ConfigType.UNKNOWN, None
    if sensitive:
        return ConfigType.PASSWORD, key.doc
    return _BROKER_TYPES.get(name, _KIND_TYPES.get(key.kind, ConfigType.UNKNOWN)), key.doc
