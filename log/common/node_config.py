"""Node configuration: Kafka's property names, read from one TOML file per node.

A node's directory holds `node.toml`; keys are Kafka's dotted names, written either quoted
(`"log.segment.bytes" = 1048576`) or as TOML dotted keys (`log.segment.bytes = 1048576`, which
TOML nests and we flatten back). Every key is declared once below with its type, default and
meaning; an unknown key or a value of the wrong type is a `ConfigError` naming the key, so a typo
never silently falls back to a default.

Listeners: `listeners` is Kafka's `NAME://host:port,...` (clients and replica fetchers: one or
more listeners, each on its own port) plus the controller listener (`controller.listener.names`,
default CONTROLLER: controller RPCs from brokers, our own HMAC handshake; TLS around it when
the map says `CONTROLLER:SSL`) on controller nodes.
`listener.security.protocol.map` gives each client listener its security protocol (PLAINTEXT,
SSL, SASL_PLAINTEXT, SASL_SSL; Kafka's default map names each protocol after itself);
`inter.broker.listener.name` is the one replica fetchers connect to (default PLAINTEXT when
there is one, else the first client listener). TLS and SASL settings (`ssl.*`, `sasl.*`) are
read by log/security/. The Raft transport (pysyncobj, its own wire
format) needs a port of its own: `controller.quorum.raft.voters`, `id@host:port` like Kafka's
`controller.quorum.voters`, which lists the CONTROLLER listeners.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from log.common.acl import STANDARD_AUTHORIZER_CLASSES

NODE_CONFIG_FILE = "node.toml"


class ConfigError(ValueError):
    """A bad node configuration: the message names the key and what is wrong."""


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    kind: type
    default: Any
    doc: str


# Kafka's names and defaults (org.apache.kafka.server.config / KafkaConfig), plus our few own.
CONFIG_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("node.id", int, None, "this node's id (required, >= 0)"),
    ConfigKey("process.roles", str, "broker,controller", "broker, controller, or both"),
    ConfigKey("cluster.id", str, None, "the cluster's id, written at format time (required)"),
    ConfigKey("listeners", str, "PLAINTEXT://127.0.0.1:9092", "listeners, NAME://host:port,..."),
    ConfigKey("advertised.listeners", str, "", "what clients are told (default: listeners)"),
    ConfigKey(
        "listener.security.protocol.map",
        str,
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "LISTENER:PROTOCOL,... (a listener named after a protocol needs no entry)",
    ),
    ConfigKey("inter.broker.listener.name", str, "", "listener replica fetchers connect to"),
    ConfigKey("controller.listener.names", str, "CONTROLLER", "the controller listener's name"),
    # TLS (log/security/tls.py): PEM files
    ConfigKey("ssl.certificate.location", str, "", "PEM certificate chain of this node"),
    ConfigKey("ssl.key.location", str, "", "PEM private key of this node"),
    ConfigKey("ssl.key.password", str, "", "password of an encrypted private key"),
    ConfigKey("ssl.ca.location", str, "", "PEM CA certificates trusted for peers"),
    ConfigKey("ssl.client.auth", str, "none", "required, requested or none (mTLS)"),
    ConfigKey(
        "ssl.endpoint.identification.algorithm",
        str,
        "https",
        "inter-broker TLS: https checks the peer's host name, empty does not",
    ),
    # SASL (log/security/)
    ConfigKey(
        "sasl.enabled.mechanisms",
        str,
        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "mechanisms SASL listeners offer",
    ),
    ConfigKey("sasl.mechanism.inter.broker.protocol", str, "PLAIN", "replica fetchers' mechanism"),
    ConfigKey(
        "sasl.jaas.config",
        str,
        "",
        'PlainLoginModule-style: username="..." password="..." (this broker\'s own) and '
        'user_NAME="password" (PLAIN users)',
    ),
    ConfigKey("connections.max.reauth.ms", int, 0, "SASL session lifetime (KIP-368), 0 = none"),
    ConfigKey(
        "sasl.server.max.receive.size",
        int,
        524288,
        "largest request frame a SASL connection may send before it has authenticated",
    ),
    # Authorization (log/security/authorizer.py): Kafka's StandardAuthorizer settings
    ConfigKey(
        "authorizer.class.name",
        str,
        "",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns ACLs on; empty: none",
    ),
    ConfigKey("super.users", str, "", "principals allowed everything, User:a;User:b"),
    ConfigKey(
        "allow.everyone.if.no.acl.found",
        bool,
        False,
        "allow what no ACL names the resource of (else denied)",
    ),
    ConfigKey("log.dirs", str, "kafka-logs", "partition log directory (relative to node dir)"),
    ConfigKey("metadata.log.dir", str, "metadata", "metadata quorum directory (relative)"),
    ConfigKey("controller.quorum.voters", str, "", "id@host:port of each controller listener"),
    ConfigKey("controller.quorum.raft.voters", str, "", "id@host:port of each Raft endpoint"),
    ConfigKey("controller.quorum.password", str, "", "shared secret of the Raft transport"),
    ConfigKey("num.partitions", int, 1, "partitions of auto-created topics"),
    ConfigKey("default.replication.factor", int, 1, "replication factor of auto-created topics"),
    ConfigKey("auto.create.topics.enable", bool, True, "create unknown topics on metadata/produce"),
    ConfigKey("min.insync.replicas", int, 1, "ISR size below which acks=all fails"),
    ConfigKey("unclean.leader.election.enable", bool, False, "elect out-of-ISR replicas"),
    ConfigKey(
        "max.request.partition.size.limit",
        int,
        2000,
        "most partitions one DescribeTopicPartitions answer holds (the rest: next page)",
    ),
    ConfigKey(
        "auto.leader.rebalance.enable",
        bool,
        True,
        "move leadership back to preferred replicas (the first replica) periodically",
    ),
    ConfigKey(
        "leader.imbalance.check.interval.seconds",
        int,
        300,
        "how often the active controller moves leaders back to preferred replicas",
    ),
    ConfigKey("message.max.bytes", int, 1048588, "largest record batch accepted"),
    ConfigKey("socket.request.max.bytes", int, 104857600, "largest request frame accepted"),
    ConfigKey(
        "quorumlog.legacy.request.versions",
        bool,
        False,
        "also answer (and advertise) the request versions Kafka 4.0 removed (KIP-896)",
    ),
    ConfigKey("queued.max.requests", int, 500, "requests queued across connections"),
    ConfigKey(
        "queued.max.request.bytes",
        int,
        256 * 1024 * 1024,
        "bytes of requests being received across connections; a connection whose "
        "announced request does not fit is not read until others finish (Kafka's "
        "default, -1, is unbounded; here at least one socket.request.max.bytes)",
    ),
    ConfigKey("max.inflight.requests.per.connection", int, 5, "requests read ahead per connection"),
    ConfigKey("log.segment.bytes", int, 1073741824, "segment size before rolling"),
    ConfigKey("log.roll.ms", int, 604800000, "segment age before rolling"),
    ConfigKey(
        "log.retention.ms", int, 604800000, "age after which segments are deleted, -1 = never"
    ),
    ConfigKey("log.retention.bytes", int, -1, "partition size above which old segments go"),
    ConfigKey("log.retention.check.interval.ms", int, 300000, "how often retention runs"),
    ConfigKey("log.index.interval.bytes", int, 4096, "bytes between offset index entries"),
    ConfigKey("log.index.size.max.bytes", int, 10485760, "offset index size before rolling"),
    ConfigKey("log.flush.interval.messages", int, -1, "records between forced fsyncs, -1 = never"),
    ConfigKey("log.flush.interval.ms", int, -1, "time between forced fsyncs, -1 = never"),
    ConfigKey("log.cleanup.policy", str, "delete", "delete or compact"),
    ConfigKey("log.message.timestamp.type", str, "CreateTime", "CreateTime or LogAppendTime"),
    ConfigKey("replica.lag.time.max.ms", int, 30000, "follower lag before leaving the ISR"),
    ConfigKey("replica.fetch.max.bytes", int, 1048576, "bytes per partition per follower fetch"),
    ConfigKey("replica.fetch.response.max.bytes", int, 10485760, "bytes per follower fetch"),
    ConfigKey("replica.fetch.wait.max.ms", int, 500, "follower fetch long-poll"),
    ConfigKey("replica.fetch.min.bytes", int, 1, "follower fetch minimum bytes"),
    ConfigKey("replica.fetch.backoff.ms", int, 1000, "back-off of a partition after an error"),
    ConfigKey("num.replica.fetchers", int, 1, "fetcher tasks per source broker"),
    ConfigKey(
        "max.incremental.fetch.session.cache.slots",
        int,
        1000,
        "incremental fetch sessions (KIP-227) a broker keeps for its followers",
    ),  # fmt: skip
    ConfigKey("replica.high.watermark.checkpoint.interval.ms", int, 5000, "HW checkpoint period"),
    ConfigKey("broker.heartbeat.interval.ms", int, 2000, "broker heartbeat period"),
    ConfigKey("broker.session.timeout.ms", int, 9000, "missed heartbeats before fencing"),
    ConfigKey(
        "broker.disconnect.fence.ms",
        int,
        100,
        "fence a broker this long after its controller connection closed unless it heartbeats "
        "again (a dead process is known at once; 0: the session timeout alone, as in Kafka)",
    ),
    ConfigKey("connections.max.idle.ms", int, 600000, "close a connection idle this long"),
    ConfigKey(
        "max.connections",
        int,
        2**31 - 1,
        "client connections in all (also capped at half the descriptor limit)",
    ),
    ConfigKey("max.connections.per.ip", int, 2**31 - 1, "client connections per IP address"),
    ConfigKey("max.connections.per.ip.overrides", str, "", "host:count,... per-IP limits"),
    ConfigKey("controlled.shutdown.enable", bool, True, "move leaderships away before stopping"),
    ConfigKey("offsets.topic.num.partitions", int, 50, "partitions of __consumer_offsets"),
    ConfigKey("offsets.topic.replication.factor", int, 3, "replication of __consumer_offsets"),
    ConfigKey("offsets.topic.segment.bytes", int, 104857600, "segment.bytes of __consumer_offsets"),
    # transactions (log/coordinator/transaction_driver.py): Kafka's names and defaults
    ConfigKey("transaction.state.log.num.partitions", int, 50, "partitions of __transaction_state"),
    ConfigKey(
        "transaction.state.log.replication.factor",
        int,
        3,
        "replication of __transaction_state (min(this, live brokers) when it is created)",
    ),
    ConfigKey(
        "transaction.state.log.min.isr",
        int,
        2,
        "min.insync.replicas of __transaction_state (at most its replication factor)",
    ),
    ConfigKey(
        "transaction.state.log.segment.bytes",
        int,
        104857600,
        "segment.bytes of __transaction_state",
    ),
    ConfigKey("transaction.max.timeout.ms", int, 900000, "largest transaction.timeout.ms allowed"),
    ConfigKey(
        "transaction.two.phase.commit.enable",
        bool,
        False,
        "allow InitProducerId enable_2pc (KIP-939): transactions without timeout, ended later",
    ),
    ConfigKey(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        int,
        10000,
        "how often transactions open longer than their timeout are aborted",
    ),
    ConfigKey(
        "transactional.id.expiration.ms",
        int,
        604800000,
        "a transactional id at rest (no open transaction) not used for this long is removed",
    ),
    ConfigKey(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        int,
        3600000,
        "how often expired transactional ids are removed",
    ),
    ConfigKey(
        "quorumlog.bootstrap.features",
        str,
        "",
        "NAME=LEVEL,... a NEW cluster finalizes instead of Kafka 4.0's defaults (e.g. "
        "transaction.version=1; `quorumlog format --feature`); ignored once the cluster exists",
    ),
    ConfigKey(
        "transaction.partition.verification.enable",
        bool,
        True,
        "partition leaders ask the transaction coordinator whether a transactional batch's "
        "partition is in its transaction before appending it (KIP-890 part 1)",
    ),
    # consumer groups (log/coordinator): Kafka's names and defaults
    ConfigKey(
        "group.initial.rebalance.delay.ms", int, 3000, "wait for more members of an Empty group"
    ),
    ConfigKey("group.min.session.timeout.ms", int, 6000, "smallest session.timeout.ms allowed"),
    ConfigKey("group.max.session.timeout.ms", int, 1800000, "largest session.timeout.ms allowed"),
    ConfigKey("offsets.retention.ms", int, 604800000, "offsets of an Empty group expire after"),
    ConfigKey("offsets.retention.check.interval.ms", int, 600000, "how often offsets expire"),
    ConfigKey("offset.metadata.max.bytes", int, 4096, "largest metadata string of a commit"),
    # consumer groups of the new protocol (KIP-848, log/coordinator/consumer_group_state.py)
    ConfigKey(
        "group.consumer.session.timeout.ms", int, 45000, "a KIP-848 member without heartbeat leaves"
    ),
    ConfigKey(
        "group.consumer.heartbeat.interval.ms", int, 5000, "KIP-848 members heartbeat this often"
    ),
    ConfigKey(
        "group.consumer.assignors",
        str,
        "uniform,range",
        "server-side assignors (names or Kafka's class names); the first is the default",
    ),
    ConfigKey("producer.id.expiration.ms", int, 86400000, "idle producer state expiry"),
    ConfigKey(
        "metadata.log.max.record.count.between.snapshots", int, 20000, "records per checkpoint"
    ),
    ConfigKey("metadata.log.max.snapshot.interval.ms", int, 3600000, "time between checkpoints"),
    ConfigKey("metadata.max.retention.checkpoints", int, 3, "checkpoints kept"),
    ConfigKey("metrics.port", int, 0, "Prometheus /metrics port, 0 = off"),
    # the log cleaner (compaction of cleanup.policy=compact topics)
    ConfigKey("log.cleaner.enable", bool, True, "run the log cleaner"),
    ConfigKey("log.cleaner.backoff.ms", int, 15000, "cleaner sleep when no log needs cleaning"),
    ConfigKey("log.cleaner.min.cleanable.ratio", float, 0.5, "default min.cleanable.dirty.ratio"),
    ConfigKey("log.cleaner.delete.retention.ms", int, 86400000, "default delete.retention.ms"),
    ConfigKey("log.cleaner.min.compaction.lag.ms", int, 0, "default min.compaction.lag.ms"),
    ConfigKey(
        "log.cleaner.max.compaction.lag.ms", int, (1 << 63) - 1, "default max.compaction.lag.ms"
    ),
)
_KEYS = {key.name: key for key in CONFIG_KEYS}


@dataclass(frozen=True, slots=True)
class Endpoint:
    listener: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Voter:
    node_id: int
    host: str
    port: int


def parse_listeners(value: str, key: str = "listeners") -> tuple[Endpoint, ...]:
    endpoints = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, sep, address = item.partition("://")
        host, _, port = address.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"{key}: {item!r} is not NAME://host:port")
        endpoints.append(Endpoint(name.upper(), host, int(port)))
    names = [e.listener for e in endpoints]
    if len(set(names)) != len(names):
        raise ConfigError(f"{key}: listener names repeat in {value!r}")
    return tuple(endpoints)


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
CONTROLLER_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL")


def parse_security_protocol_map(value: str) -> dict[str, str]:
    """`listener.security.protocol.map`: "NAME:PROTOCOL,..." -> {NAME: PROTOCOL}."""
    protocols: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not name.strip() or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL "
                f"(PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)})"
            )
        protocols[name.strip().upper()] = protocol
    return protocols


def parse_voters(value: str, key: str) -> tuple[Voter, ...]:
    voters = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        node_id, sep, address = item.partition("@")
        host, _, port = address.rpartition(":")
        if not sep or not node_id.isdigit() or not host or not port.isdigit():
            raise ConfigError(f"{key}: {item!r} is not id@host:port")
        voters.append(Voter(int(node_id), host, int(port)))
    ids = [v.node_id for v in voters]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{key}: voter ids repeat in {value!r}")
    return tuple(voters)


def parse_overrides(value: str) -> dict[str, int]:
    """`max.connections.per.ip.overrides`: "host:count,host:count" -> {host: count}."""
    overrides: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.isdigit():
            raise ValueError(f"max.connections.per.ip.overrides: {item!r} is not host:count")
        overrides[host] = int(count)
    return overrides


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for name, value in table.items():
        full = f"{prefix}{name}"
        if isinstance(value, dict):
            flat.update(_flatten(value, full + "."))
        else:
            flat[full] = value
    return flat


def _coerce(key: ConfigKey, value: Any) -> Any:
    # bool is an int in Python: check it first so `num.partitions = true` is refused.
    if key.kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
    elif key.kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
    elif key.kind is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif key.kind is str and isinstance(value, str):
        return value
    raise ConfigError(f"{key.name}: expected {key.kind.__name__}, got {value!r}")


def _validate_group_keys(p: Mapping[str, Any]) -> None:
    if p["group.initial.rebalance.delay.ms"] < 0:
        raise ConfigError("group.initial.rebalance.delay.ms must be >= 0")
    if not 0 < p["group.min.session.timeout.ms"] <= p["group.max.session.timeout.ms"]:
        raise ConfigError(
            "group.min.session.timeout.ms must be > 0 and <= group.max.session.timeout.ms"
        )
    for name in ("offsets.retention.ms", "offsets.retention.check.interval.ms"):
        if p[name] < 1:
            raise ConfigError(f"{name} must be >= 1")
    for name in ("group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms"):
        if p[name] < 1:
            raise ConfigError(f"{name} must be >= 1")
    if p["group.consumer.heartbeat.interval.ms"] >= p["group.consumer.session.timeout.ms"]:
        raise ConfigError(
            "group.consumer.heartbeat.interval.ms must be < group.consumer.session.timeout.ms"
        )
    if p["offset.metadata.max.bytes"] < 0:
        raise ConfigError("offset.metadata.max.bytes must be >= 0")
    for name in (
        "transaction.state.log.num.partitions",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        "transaction.state.log.segment.bytes",
        "transaction.max.timeout.ms",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "transactional.id.expiration.ms",
        "transaction.remove.expired.transaction.cleanup.interval.ms",
    ):
        if p[name] < 1:
            raise ConfigError(f"{name} must be >= 1")


@dataclass(frozen=True)
class NodeConfig:
    """A node's validated configuration. `props` holds every key with defaults applied;
    `explicit` names the keys its properties set (Kafka's "originals": DescribeConfigs shows
    those as STATIC_BROKER_CONFIG, the others as DEFAULT_CONFIG)."""

    node_dir: Path
    props: Mapping[str, Any]
    explicit: frozenset[str] = frozenset()

    @classmethod
    def from_properties(cls, node_dir: Path, values: Mapping[str, Any]) -> NodeConfig:
        props = {key.name: key.default for key in CONFIG_KEYS}
        for name, value in values.items():
            key = _KEYS.get(name)
            if key is None:
                raise ConfigError(f"unknown configuration key {name!r}")
            props[name] = _coerce(key, value)
        config = cls(Path(node_dir), props, frozenset(values))
        config.validate()
        return config

    @classmethod
    def load(cls, node_dir: Path) -> NodeConfig:
        path = Path(node_dir) / NODE_CONFIG_FILE
        try:
            with open(path, "rb") as f:
                table = tomllib.load(f)
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such file (format the node first)") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        return cls.from_properties(Path(node_dir), _flatten(table))

    def validate(self) -> None:
        p = self.props
        for required in ("node.id", "cluster.id"):
            if p[required] is None:
                raise ConfigError(f"{required} is required")
        if p["node.id"] < 0:
            raise ConfigError("node.id must be >= 0")
        roles = {r.strip() for r in p["process.roles"].split(",") if r.strip()}
        if not roles or not roles <= {"broker", "controller"}:
            raise ConfigError(f"process.roles: {p['process.roles']!r} is not broker/controller")
        listeners = {e.listener for e in self.listeners}
        self._validate_listeners(roles)
        if "controller" in roles:
            if self.controller_listener_name not in listeners:
                raise ConfigError(
                    f"listeners: a controller needs a {self.controller_listener_name} listener"
                )
            if self.node_id not in {v.node_id for v in self.raft_voters}:
                raise ConfigError("controller.quorum.raft.voters must list this node")
            if not p["controller.quorum.password"]:
                raise ConfigError("controller.quorum.password is required (Raft traffic is pickle)")
        if "broker" in roles and not p["controller.quorum.password"]:
            raise ConfigError(
                "controller.quorum.password is required: it authenticates the controller listener"
            )
        if {v.node_id for v in self.controller_voters} != {v.node_id for v in self.raft_voters}:
            raise ConfigError(
                "controller.quorum.voters and controller.quorum.raft.voters name different ids"
            )
        if not self.controller_voters:
            raise ConfigError("controller.quorum.voters is required")
        positive = ("num.partitions", "default.replication.factor", "min.insync.replicas")
        limits = ("max.connections", "max.connections.per.ip", "connections.max.idle.ms")
        for name in positive + limits + ("message.max.bytes", "socket.request.max.bytes"):
            if p[name] < 1:
                raise ConfigError(f"{name} must be >= 1")
        try:
            parse_overrides(p["max.connections.per.ip.overrides"])
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if p["log.segment.bytes"] < 14:  # Kafka's floor: LegacyRecord.RECORD_OVERHEAD_V0
            raise ConfigError("log.segment.bytes must be >= 14")
        if p["broker.heartbeat.interval.ms"] >= p["broker.session.timeout.ms"]:
            raise ConfigError(
                "broker.heartbeat.interval.ms must be below broker.session.timeout.ms "
                "(a broker must heartbeat at least once per session)"
            )
        if p["max.request.partition.size.limit"] < 1:
            raise ConfigError("max.request.partition.size.limit must be >= 1")
        if p["leader.imbalance.check.interval.seconds"] < 1:
            raise ConfigError("leader.imbalance.check.interval.seconds must be >= 1")
        if not 0 <= p["broker.disconnect.fence.ms"] <= p["broker.session.timeout.ms"]:
            raise ConfigError("broker.disconnect.fence.ms must be >= 0 and <= "
                              "broker.session.timeout.ms")  # fmt: skip
        if p["log.cleanup.policy"] not in ("delete", "compact", "compact,delete", "delete,compact"):
            raise ConfigError(f"log.cleanup.policy: {p['log.cleanup.policy']!r}")
        if not 0 <= p["log.cleaner.min.cleanable.ratio"] <= 1:
            raise ConfigError("log.cleaner.min.cleanable.ratio must be in [0, 1]")
        if p["log.cleaner.backoff.ms"] < 0:
            raise ConfigError("log.cleaner.backoff.ms must be >= 0")
        if p["log.message.timestamp.type"] not in ("CreateTime", "LogAppendTime"):
            raise ConfigError("log.message.timestamp.type must be CreateTime or LogAppendTime")
        _validate_group_keys(p)

    def _validate_listeners(self, roles: set[str]) -> None:
        p = self.props
        names = [n.strip().upper() for n in p["controller.listener.names"].split(",") if n.strip()]
        if len(names) != 1:
            raise ConfigError("controller.listener.names: exactly one name is supported")
        protocols = self.security_protocol_map  # validates the map
        broker_listeners = self.broker_listeners
        for endpoint in broker_listeners:
            if self.security_protocol(endpoint.listener) not in SECURITY_PROTOCOLS:
                raise ConfigError(
                    f"listener.security.protocol.map: no security protocol for listener "
                    f"{endpoint.listener} (have {sorted(protocols)})"
                )
        if "broker" in roles:
            if not broker_listeners:
                raise ConfigError("listeners: a broker needs a client listener (PLAINTEXT://...)")
            name = self.inter_broker_listener_name
            if name not in {e.listener for e in broker_listeners}:
                raise ConfigError(f"inter.broker.listener.name: no {name} listener")
        if self.controller_security_protocol not in CONTROLLER_SECURITY_PROTOCOLS:
            raise ConfigError(
                f"listener.security.protocol.map: the {self.controller_listener_name} listener "
                f"is PLAINTEXT or SSL, not {self.controller_security_protocol} (brokers prove "
                "they hold controller.quorum.password there; SSL adds TLS around that)"
            )
        if p["ssl.client.auth"] not in ("required", "requested", "none"):
            raise ConfigError("ssl.client.auth must be required, requested or none")
        if p["sasl.server.max.receive.size"] < 1:
            raise ConfigError("sasl.server.max.receive.size must be >= 1")
        authorizer = p["authorizer.class.name"].strip()
        if authorizer and authorizer not in STANDARD_AUTHORIZER_CLASSES:
            raise ConfigError(
                f"authorizer.class.name={authorizer!r}: only "
                f"{', '.join(sorted(STANDARD_AUTHORIZER_CLASSES))} is supported"
            )
        if p["connections.max.reauth.ms"] < 0:
            raise ConfigError("connections.max.reauth.ms must be >= 0")

    # Convenience views -------------------------------------------------------------------
    @property
    def controller_listener_name(self) -> str:
        return self.props["controller.listener.names"].split(",")[0].strip().upper()

    @property
    def broker_listeners(self) -> tuple[Endpoint, ...]:
        """The client listeners (every listener but the controller's), in declaration order."""
        name = self.controller_listener_name
        return tuple(e for e in self.listeners if e.listener != name)

    @property
    def security_protocol_map(self) -> dict[str, str]:
        return parse_security_protocol_map(self.props["listener.security.protocol.map"])

    def security_protocol(self, listener_name: str) -> str:
        """The security protocol of `listener_name`: the map's entry, else its own name."""
        return self.security_protocol_map.get(listener_name, listener_name)

    @property
    def controller_security_protocol(self) -> str:
        """The controller listener's protocol: the map's entry, else PLAINTEXT."""
        return self.security_protocol_map.get(self.controller_listener_name, "PLAINTEXT")

    @property
    def inter_broker_listener_name(self) -> str:
        name = self.props["inter.broker.listener.name"].strip().upper()
        if name:
            return name
        names = [e.listener for e in self.broker_listeners]
        return "PLAINTEXT" if "PLAINTEXT" in names or not names else names[0]

    @property
    def node_id(self) -> int:
        return self.props["node.id"]

    @property
    def roles(self) -> frozenset[str]:
        return frozenset(r.strip() for r in self.props["process.roles"].split(",") if r.strip())

    @property
    def listeners(self) -> tuple[Endpoint, ...]:
        return parse_listeners(self.props["listeners"])

    def listener(self, name: str) -> Endpoint:
        for endpoint in self.listeners:
            if endpoint.listener == name:
                return endpoint
        raise ConfigError(f"listeners: no {name} listener")

    @property
    def advertised_listeners(self) -> tuple[Endpoint, ...]:
        value = self.props["advertised.listeners"]
        return parse_listeners(value, "advertised.listeners") if value else self.listeners

    @property
    def controller_voters(self) -> tuple[Voter, ...]:
        return parse_voters(self.props["controller.quorum.voters"], "controller.quorum.voters")

    @property
    def raft_voters(self) -> tuple[Voter, ...]:
        return parse_voters(
            self.props["controller.quorum.raft.voters"], "controller.quorum.raft.voters"
        )

    def _dir(self, key: str) -> Path:
        path = Path(self.props[key])
        return path if path.is_absolute() else self.node_dir / path

    @property
    def log_dir(self) -> Path:
        return self._dir("log.dirs")

    @property
    def metadata_dir(self) -> Path:
        return self._dir("metadata.log.dir")

    def replace(self, **changes: Any) -> NodeConfig:
        props = dict(self.props)
        props.update({name.replace("_", "."): value for name, value in changes.items()})
        return dataclasses.replace(self, props=props)


def to_toml(values: Mapping[str, Any]) -> str:
    """Render properties as TOML with quoted Kafka names, one per line, in declaration order."""
    lines = ["# quorumlog node configuration: Kafka's property names."]
    order = {key.name: i for i, key in enumerate(CONFIG_KEYS)}
    for name in sorted(values, key=lambda n: order.get(n, len(order))):
        value = values[name]
        if isinstance(value, bool):
            rendered = "true" if value else "false"
        elif isinstance(value, int):
            rendered = str(value)
        else:
            rendered = '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
        lines.append(f'"{name}" = {rendered}')
    return "\n".join(lines) + "\n"
