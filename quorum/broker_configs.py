"""Dynamic broker configs: which BROKER-resource keys AlterConfigs / IncrementalAlterConfigs may
set, and the controller's decision that stores them as ConfigRecords.

Kafka's rules (DynamicBrokerConfig.validateConfigs, ConfigAdminManager,
ControllerConfigurationValidator): a BROKER resource is a broker id (its per-broker configs) or
"" (the cluster-wide default every broker falls back to). A key Kafka knows but cannot change
live ("Cannot update these configs dynamically"), an SSL key without a `listener.name.<l>.`
prefix, a per-broker key (listeners, SASL/SSL settings) set on the cluster default, a value of
the wrong type, or a broker id that is not a base-10 number answer INVALID_REQUEST. Keys Kafka
does not know are custom properties and are stored, as Kafka does.

The broker applies the log defaults among them live (see log/storage/config.py
`dynamic_log_config`); the controller's elections read min.insync.replicas and
unclean.leader.election.enable from the cluster default. The rest are stored and described.

min.insync.replicas and KIP-966 (eligible leader replicas, always on here, as on a Kafka 4.1+
cluster): the controller's elections and ELR decisions need one cluster-wide value, so, as
Kafka's ConfigurationControlManager does when ELR is enabled, an activated controller writes the
cluster default from its own static min.insync.replicas when there is none and removes every
broker-level one (`elr_safety_records`); a broker-level min.insync.replicas is then
INVALID_CONFIG, and so is removing the cluster default (`min_isr_change_error`). Topics
describe it with source DYNAMIC_DEFAULT_BROKER_CONFIG, as on Kafka 4.1+.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from log.common.errors import ErrorCode
from log.common.node_config import CONFIG_KEYS
from quorum.controller import TOPIC_CONFIGS, long_at_least
from quorum.image import MetadataImage
from quorum.records import CONFIG_RESOURCE_BROKER, ConfigRecord, MetadataRecord

# Broker name -> topic config whose validator checks it: Kafka's DynamicLogConfig
# (ServerTopicConfigSynonyms' first synonym of each topic config but message.format.version).
LOG_CONFIG_SYNONYMS: Mapping[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.retention.bytes": "retention.bytes",
    "log.retention.ms": "retention.ms",
    "message.max.bytes": "max.message.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleanup.policy": "cleanup.policy",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "min.insync.replicas": "min.insync.replicas",
    "compression.type": "compression.type",
    "log.preallocate": "preallocate",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.difference.max.ms": "message.timestamp.difference.max.ms",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "log.local.retention.ms": "local.retention.ms",
    "log.local.retention.bytes": "local.retention.bytes",
}


_INT = long_at_least(-(2**63))
_POSITIVE = long_at_least(1)
# Cluster-wide dynamic keys besides the log ones, with Kafka's type checks where we have them.
_OTHER_CLUSTER_WIDE: Mapping[str, Callable[[str], bool] | None] = {
    # LogCleaner.ReconfigurableConfigs
    "log.cleaner.threads": long_at_least(0),
    "log.cleaner.dedupe.buffer.size": _INT,
    "log.cleaner.io.buffer.load.factor": None,
    "log.cleaner.io.buffer.size": long_at_least(0),
    "log.cleaner.io.max.bytes.per.second": None,
    "log.cleaner.backoff.ms": long_at_least(0),
    # DynamicThreadPool, SocketServer, metrics, producer state
    "num.io.threads": _POSITIVE,
    "num.replica.fetchers": _INT,
    "num.recovery.threads.per.data.dir": _POSITIVE,
    "background.threads": _POSITIVE,
    "num.network.threads": _POSITIVE,
    "max.connections.per.ip": long_at_least(0),
    "max.connections.per.ip.overrides": None,
    "max.connections": long_at_least(0),
    "max.connection.creation.rate": long_at_least(0),
    "metric.reporters": None,
    "producer.id.expiration.ms": long_at_least(1),
    "transaction.partition.verification.enable": lambda v: v.lower() in ("true", "false"),
}
# DynamicListenerConfig's keys: per-broker only (a broker id, never the cluster default).
PER_BROKER_CONFIGS = frozenset({
    "advertised.listeners", "listeners", "listener.security.protocol.map",
    "principal.builder.class", "ssl.client.auth",
    "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
})  # fmt: skip
# SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only per listener (listener.name.<l>.ssl.*).
SSL_LISTENER_ONLY = frozenset({
    "ssl.keystore.type", "ssl.protocol", "ssl.provider", "ssl.cipher.suites",
    "ssl.enabled.protocols", "ssl.keystore.location", "ssl.keystore.password",
    "ssl.key.password", "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.truststore.certificates", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation",
    "ssl.engine.factory.class",
})  # fmt: skip
CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset(
    {"max.connections", "max.connection.creation.rate", "num.network.threads"}
)
DYNAMIC_CONFIGS = (
    frozenset(LOG_CONFIG_SYNONYMS)
    | frozenset(_OTHER_CLUSTER_WIDE)
    | (PER_BROKER_CONFIGS | SSL_LISTENER_ONLY)
)
# Kafka broker keys that exist but are not dynamic, beyond the ones our node config knows.
_KNOWN_STATIC = frozenset({
    "broker.id", "log.dir", "log.retention.hours", "log.retention.minutes", "log.roll.hours",
    "log.roll.jitter.hours", "log.message.format.version", "num.partitions", "zookeeper.connect",
    "log.flush.scheduler.interval.ms", "delete.topic.enable", "reserved.broker.max.id",
})  # fmt: skip
NON_DYNAMIC_CONFIGS = (frozenset(k.name for k in CONFIG_KEYS) | _KNOWN_STATIC) - DYNAMIC_CONFIGS
# List-typed broker configs: the only ones IncrementalAlterConfigs APPEND/SUBTRACT apply to.
LIST_BROKER_CONFIGS = frozenset({
    "log.cleanup.policy", "metric.reporters", "sasl.enabled.mechanisms", "listeners",
    "advertised.listeners", "ssl.cipher.suites", "ssl.enabled.protocols",
})  # fmt: skip
_LISTENER_PREFIX = re.compile(r"listener\.name\.[^.]*\.(.*)")


def is_dynamic(key: str) -> bool:
    """Kafka's DescribeConfigs read_only is `not is_dynamic` for broker configs."""
    match = _LISTENER_PREFIX.fullmatch(key)
    return (match.group(1) if match else key) in DYNAMIC_CONFIGS


def _value_error(key: str, value: str) -> bool:
    topic_key = LOG_CONFIG_SYNONYMS.get(key)
    check = TOPIC_CONFIGS.get(topic_key) if topic_key else _OTHER_CLUSTER_WIDE.get(key)
    return check is not None and not check(value)


def broker_configs_error(broker: str, changes: Mapping[str, str | None]) -> str | None:
    """None when `changes` (None = delete) may be stored on BROKER resource `broker`; else
    Kafka's message for INVALID_REQUEST."""
    if broker:
        try:
            if int(broker, 10) < 0:
                return "Invalid negative broker ID."
        except ValueError:
            return "Unable to parse broker name as a base 10 number."
    set_keys = {k for k, v in changes.items() if v is not None}
    invalid = sorted(k for k in set_keys if k in NON_DYNAMIC_CONFIGS)
    if invalid:
        return f"Cannot update these configs dynamically: {invalid}"
    invalid = sorted(k for k in set_keys if k in SSL_LISTENER_ONLY)
    if invalid:
        return (
            "These security configs can be dynamically updated only per-listener using the "
            f"listener prefix: {invalid}"
        )
    for key in sorted(set_keys):
        match = _LISTENER_PREFIX.fullmatch(key)
        value = changes[key]
        assert value is not None
        if _value_error(match.group(1) if match else key, value):
            return f"Invalid value {value} for configuration {key}"
    if not broker:
        invalid = sorted(
            k
            for k in set_keys
            if k in PER_BROKER_CONFIGS
            or (
                (m := _LISTENER_PREFIX.fullmatch(k))
                and m.group(1) not in CLUSTER_LEVEL_LISTENER_CONFIGS
            )
        )
        if invalid:
            return (
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {invalid}"
            )
    return None


MIN_INSYNC_REPLICAS = "min.insync.replicas"


def min_isr_change_error(broker: str, changes: Mapping[str, str | None]) -> str | None:
    """Kafka's message for INVALID_CONFIG when `changes` set min.insync.replicas on a broker or
    remove the cluster default (ELR is on); else None."""
    if MIN_INSYNC_REPLICAS not in changes:
        return None
    if broker:
        return f"Broker-level {MIN_INSYNC_REPLICAS} cannot be altered while ELR is enabled."
    if changes[MIN_INSYNC_REPLICAS] is None:
        return f"Cluster-level {MIN_INSYNC_REPLICAS} cannot be removed while ELR is enabled."
    return None


def elr_safety_records(
    image: MetadataImage, static_min_insync_replicas: int
) -> list[MetadataRecord]:
    """Kafka's maybeGenerateElrSafetyRecords: the cluster default min.insync.replicas from the
    controller's static value when absent, and no broker-level one. Nothing when both hold."""
    records: list[MetadataRecord] = []
    if MIN_INSYNC_REPLICAS not in image.broker_configs(""):
        records.append(ConfigRecord(CONFIG_RESOURCE_BROKER, "", MIN_INSYNC_REPLICAS,
                                    str(static_min_insync_replicas)))  # fmt: skip
    for (resource_type, name), configs in sorted(image.configs.items()):
        if resource_type == CONFIG_RESOURCE_BROKER and name and MIN_INSYNC_REPLICAS in configs:
            records.append(ConfigRecord(CONFIG_RESOURCE_BROKER, name, MIN_INSYNC_REPLICAS, None))
    return records


@dataclass(frozen=True)
class AlterBrokerConfigsRequest:
    """One BROKER resource's changes (a broker id, or "" for the cluster default); value None
    deletes the key."""

    broker: str
    changes: Mapping[str, str | None]


@dataclass(frozen=True)
class AlterBrokerConfigsResponse:
    error_code: ErrorCode
    error_message: str | None = None


def alter_broker_configs(
    image: MetadataImage, request: AlterBrokerConfigsRequest
) -> tuple[list[MetadataRecord], AlterBrokerConfigsResponse]:
    del image  # a broker resource needs no registration: Kafka stores configs for any id
    error = broker_configs_error(request.broker, request.changes)
    if error:
        return [], AlterBrokerConfigsResponse(ErrorCode.INVALID_REQUEST, error)
    error = min_isr_change_error(request.broker, request.changes)
    if error:
        return [], AlterBrokerConfigsResponse(ErrorCode.INVALID_CONFIG, error)
    records: list[MetadataRecord] = [
        ConfigRecord(CONFIG_RESOURCE_BROKER, request.broker, key, request.changes[key])
        for key in sorted(request.changes)
    ]
    return records, AlterBrokerConfigsResponse(ErrorCode.NONE)
