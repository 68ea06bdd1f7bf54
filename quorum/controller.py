"""Controller decisions, sans-IO: `(image, request, ...) -> (records, response)`.

The active controller calls these with its current image; it proposes the returned records as one
batch (records.encode_batch with its controller epoch) and answers the request only after the
batch applied with `accepted=True`. Nothing here reads a clock or draws random numbers: `now_ms`,
replica-placement start indexes and new topic ids are the caller's. Expected failures come back as
an `error_code` in the response (and no records), never as an exception.

Replay re-checks what matters (epochs, producer ids, ISR rules), so a decision taken on an image
that another batch has since changed is rejected on apply rather than applied wrong; a controller
that pipelines proposals should decide on an image with its in-flight batches already replayed
(image.replay_batch), or wait for each apply.

Leader election and the ISR/ELR rules (KIP-966) are quorum/partition_change.py's: the first live
ISR member, then an eligible leader replica, then the last known leader, and a replica outside
them only with unclean.leader.election.enable. A broker that registers without having shut down
cleanly (its previous broker epoch is not the one the image holds) leaves every ISR and ELR in
the same batch: its unflushed tail may be gone. Each decision that elects takes the node's
defaults for min.insync.replicas and unclean.leader.election.enable (`ElectionPolicy`); a topic's
or the cluster's config overrides them (`election_policy`).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from log.common.errors import ErrorCode
from quorum import reassignment
from quorum.image import MAX_PRODUCER_ID, MetadataImage, TopicImage, topic_name_error
from quorum.partition_change import ElectionPolicy, change_record, partition_change
from quorum.records import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    NO_LEADER,
    ActiveControllerRecord,
    BrokerEndpoint,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)

PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
MAX_PARTITIONS_PER_TOPIC = 10_000  # a limit on everything: one CreateTopics fits one batch
MAX_TOPICS_PER_REQUEST = 1_000
# Kafka's MAX_RECORDS_PER_USER_OP: an operation that would write more metadata records fails
# whole with POLICY_VIOLATION before any is built, so one small request (a topic count times
# a partition count) cannot make the controller build, replicate and every broker apply
# millions of records.
MAX_RECORDS_PER_OPERATION = 10_000
TOO_LARGE_MESSAGE = "Unable to perform excessively large batch operation."
# Kafka's defaults (min.insync.replicas 1, unclean.leader.election.enable false); the service
# passes its node's configuration instead.
NODE_DEFAULTS = ElectionPolicy()
# Kafka's DirectoryId.LOST: a registration naming it reports a log directory that came back
# empty (wiped, or the node's first start).
LOST_DIRECTORY_ID = uuid.UUID(int=1)


# -- topic configs --------------------------------------------------------------------------------


def long_at_least(minimum: int) -> Callable[[str], bool]:
    """Kafka's INT/LONG type check with a lower bound (topic and broker configs)."""

    def check(value: str) -> bool:
        try:
            return minimum <= int(value) <= 2**63 - 1
        except ValueError:
            return False

    return check


def _one_of(*choices: str) -> Callable[[str], bool]:
    return lambda value: value in choices


def _ratio(value: str) -> bool:
    try:
        return 0.0 <= float(value) <= 1.0
    except ValueError:
        return False


def _cleanup_policy(value: str) -> bool:
    """Kafka's ValidList.in(compact, delete): an empty list is valid (SUBTRACT can leave one;
    such a log is neither deleted by retention nor compacted)."""
    parts = [p.strip() for p in value.split(",") if p.strip()]
    return all(p in ("delete", "compact") for p in parts)


_BOOLEAN = _one_of("true", "false")

# Kafka's topic-level configuration names (TopicConfig) with a validator for their values.
TOPIC_CONFIGS: Mapping[str, Callable[[str], bool]] = {
    "cleanup.policy": _cleanup_policy,
    "compression.type": _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "delete.retention.ms": long_at_least(0),
    "file.delete.delay.ms": long_at_least(0),
    "flush.messages": long_at_least(1),
    "flush.ms": long_at_least(0),
    "index.interval.bytes": long_at_least(0),
    "local.retention.bytes": long_at_least(-2),
    "local.retention.ms": long_at_least(-2),
    "max.compaction.lag.ms": long_at_least(1),
    "max.message.bytes": long_at_least(0),
    "message.timestamp.after.max.ms": long_at_least(0),
    "message.timestamp.before.max.ms": long_at_least(0),
    "message.timestamp.difference.max.ms": long_at_least(0),
    "message.timestamp.type": _one_of("CreateTime", "LogAppendTime"),
    "min.cleanable.dirty.ratio": _ratio,
    "min.compaction.lag.ms": long_at_least(0),
    "min.insync.replicas": long_at_least(1),
    "preallocate": _BOOLEAN,
    "retention.bytes": long_at_least(-1),
    "retention.ms": long_at_least(-1),
    "segment.bytes": long_at_least(14),
    "segment.index.bytes": long_at_least(4),
    "segment.jitter.ms": long_at_least(0),
    "segment.ms": long_at_least(1),
    "unclean.leader.election.enable": _BOOLEAN,
}


# Accepted and dropped, as Kafka 4 does: message.format.version has no effect since the v2
# record format is the only one (librdkafka's admin tests still set it).
IGNORED_TOPIC_CONFIGS = frozenset({"message.format.version"})


def topic_config_error(key: str, value: str | None) -> str | None:
    """None when `key=value` is a valid topic config (value None = delete, always valid)."""
    if key in IGNORED_TOPIC_CONFIGS:
        return None
    check = TOPIC_CONFIGS.get(key)
    if check is None:
        return f"unknown topic config {key!r}"
    if value is not None and not check(value):
        return f"invalid value {value!r} for topic config {key!r}"
    return None


# -- leader election ------------------------------------------------------------------------------


def election_policy(
    image: MetadataImage, topic_name: str, defaults: ElectionPolicy
) -> ElectionPolicy:
    """A topic's min.insync.replicas and unclean.leader.election.enable: the topic's config,
    else the cluster-wide broker config (resource ""), else the node's (`defaults`)."""
    cluster = image.configs.get((CONFIG_RESOURCE_BROKER, ""), {})
    topic = image.topic_configs(topic_name)

    def value(key: str) -> str | None:
        return topic.get(key, cluster.get(key))

    min_isr = value("min.insync.replicas")
    unclean = value("unclean.leader.election.enable")
    return ElectionPolicy(
        min_insync_replicas=max(1, int(min_isr)) if min_isr else defaults.min_insync_replicas,
        unclean_leader_election_enable=(
            unclean.strip().lower() == "true"
            if unclean
            else defaults.unclean_leader_election_enable
        ),
    )


def _partition_change_records(
    image: MetadataImage,
    defaults: ElectionPolicy,
    *,
    removed: frozenset[int] = frozenset(),
    added: int = NO_LEADER,
    unclean_shutdown: int = NO_LEADER,
    lost_data: bool = False,
) -> list[PartitionChangeRecord]:
    """Kafka's generateLeaderAndIsrUpdates: take `removed` brokers (and `unclean_shutdown`) out
    of every ISR and leadership, `unclean_shutdown` out of every ELR too (and out of
    last_known_elr when it came back without its data), and elect where needed; `added` (a
    broker being unfenced) may lead though the image still shows it fenced."""
    gone = removed | ({unclean_shutdown} if unclean_shutdown != NO_LEADER else set())

    def may_lead(r: int) -> bool:
        return r not in gone and (r == added or image.is_live(r))

    records = []
    for topic_id, p, state in image.iter_partitions():
        touches = not gone.isdisjoint(state.isr) or state.leader in gone
        touches = touches or unclean_shutdown in state.elr
        touches = touches or (lost_data and unclean_shutdown in state.last_known_elr)
        touches = touches or (added != NO_LEADER and state.leader == NO_LEADER)
        if not touches:
            continue
        policy = election_policy(image, image.topics[topic_id].name, defaults)
        new = partition_change(
            state,
            tuple(r for r in state.isr if r not in gone),
            may_lead,
            policy,
            unclean_shutdown_replicas=(unclean_shutdown,) if unclean_shutdown != NO_LEADER else (),
            lost_data_replicas=(unclean_shutdown,) if lost_data else (),
        )
        record = change_record(topic_id, p, state, new)
        if record is not None:
            records.append(record)
    return records


def _remove_brokers_records(
    image: MetadataImage, broker_ids: frozenset[int], defaults: ElectionPolicy
) -> list[PartitionChangeRecord]:
    return _partition_change_records(image, defaults, removed=broker_ids)


def _fence_records(
    image: MetadataImage, broker_ids: Sequence[int], defaults: ElectionPolicy
) -> list[MetadataRecord]:
    """FenceBrokerRecords plus the ISR/ELR/leader moves that keep the image invariant."""
    live = frozenset(b for b in broker_ids if image.is_live(b))
    records: list[MetadataRecord] = [
        FenceBrokerRecord(b, image.brokers[b].broker_epoch) for b in sorted(live)
    ]
    records.extend(_remove_brokers_records(image, live, defaults))
    return records


def _unfence_records(
    image: MetadataImage, broker_id: int, defaults: ElectionPolicy
) -> list[MetadataRecord]:
    """UnfenceBrokerRecord plus an election in every leaderless partition, which this broker
    may now win (as an ISR member, an ELR member or the last known leader)."""
    broker = image.brokers[broker_id]
    records: list[MetadataRecord] = [UnfenceBrokerRecord(broker_id, broker.broker_epoch)]
    records.extend(_partition_change_records(image, defaults, added=broker_id))
    return records


def _check_broker_epoch(image: MetadataImage, broker_id: int, broker_epoch: int) -> ErrorCode:
    broker = image.brokers.get(broker_id)
    if broker is None:
        return ErrorCode.BROKER_ID_NOT_REGISTERED
    if broker.broker_epoch != broker_epoch:
        return ErrorCode.STALE_BROKER_EPOCH
    return ErrorCode.NONE


# -- controller activation ------------------------------------------------------------------------


def activate_controller(
    controller_id: int, controller_epoch: int, bootstrap_features: Mapping[str, int] | None = None
) -> list[MetadataRecord]:
    """The batch a newly elected controller proposes (with batch controller_epoch equal to
    `controller_epoch`, e.g. the Raft term) before anything else. Once it applies, the image holds
    everything earlier controllers committed and their stale in-flight batches are rejected;
    only then may the controller serve requests. On a new cluster (nothing committed yet) it
    also finalizes `bootstrap_features` (quorum/features.py)."""
    records: list[MetadataRecord] = [ActiveControllerRecord(controller_id, controller_epoch)]
    for name, level in sorted((bootstrap_features or {}).items()):
        records.append(FeatureLevelRecord(name, level))
    return records


# -- broker registration and heartbeats -----------------------------------------------------------


@dataclass(frozen=True)
class BrokerRegistrationRequest:
    broker_id: int
    incarnation_id: uuid.UUID
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None
    # KIP-966: the broker epoch this broker had when it last shut down cleanly (-1: it did
    # not, or does not know).
    previous_broker_epoch: int = -1
    # Its log directory held no log and no checkpoint at start (wiped, or brand new): it
    # holds none of the data it may have had.
    log_dir_empty: bool = False


@dataclass(frozen=True)
class BrokerRegistrationResponse:
    error_code: ErrorCode
    broker_epoch: int = -1


def register_broker(
    image: MetadataImage,
    request: BrokerRegistrationRequest,
    *,
    previous_session_alive: bool = False,
    defaults: ElectionPolicy = NODE_DEFAULTS,
) -> tuple[list[MetadataRecord], BrokerRegistrationResponse]:
    """A (re-)registration. The new broker_epoch is greater than the broker's previous epoch and
    than the image's last offset, so epochs increase across re-registrations and controller
    fail-over. A retry of the same incarnation gets its existing epoch back. A different
    incarnation while the old one's session is still alive is DUPLICATE_BROKER_REGISTRATION,
    unless the new one names the old one's broker epoch as the epoch of its clean shutdown
    (KIP-966's previous broker epoch): that session ended with the process, whatever the
    controller's heartbeat clock says (a controller that just took over counts every broker's
    session as fresh). The broker starts fenced; a known broker's old incarnation leaves every
    ISR in the same batch, and every ELR too when it did not shut down cleanly (KIP-966: its
    unflushed tail may be lost), and last_known_elr as well when its log directory is empty."""
    if request.broker_id < 0:
        return [], BrokerRegistrationResponse(ErrorCode.INVALID_REQUEST)
    if len({e.name for e in request.endpoints}) != len(request.endpoints):
        return [], BrokerRegistrationResponse(ErrorCode.INVALID_REQUEST)
    old = image.brokers.get(request.broker_id)
    if old is not None:
        if old.incarnation_id == request.incarnation_id:
            return [], BrokerRegistrationResponse(ErrorCode.NONE, old.broker_epoch)
        ended_cleanly = request.previous_broker_epoch == old.broker_epoch
        if previous_session_alive and not old.fenced and not ended_cleanly:
            return [], BrokerRegistrationResponse(ErrorCode.DUPLICATE_BROKER_REGISTRATION)
    broker_epoch = max(image.last_offset + 1, 0 if old is None else old.broker_epoch + 1)
    records: list[MetadataRecord] = [
        RegisterBrokerRecord(
            request.broker_id,
            broker_epoch,
            request.incarnation_id,
            request.endpoints,
            request.rack,
            fenced=True,
        )
    ]
    if old is not None and request.previous_broker_epoch == old.broker_epoch:
        records.extend(_remove_brokers_records(image, frozenset([request.broker_id]), defaults))
    elif old is not None:
        records.extend(
            _partition_change_records(
                image,
                defaults,
                unclean_shutdown=request.broker_id,
                lost_data=request.log_dir_empty,
            )
        )
    return records, BrokerRegistrationResponse(ErrorCode.NONE, broker_epoch)


@dataclass(frozen=True)
class BrokerHeartbeatRequest:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int  # the newest metadata offset the broker has replayed
    want_fence: bool = False
    want_shut_down: bool = False


@dataclass(frozen=True)
class BrokerHeartbeatResponse:
    error_code: ErrorCode
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


def heartbeat(
    image: MetadataImage,
    request: BrokerHeartbeatRequest,
    defaults: ElectionPolicy = NODE_DEFAULTS,
) -> tuple[list[MetadataRecord], BrokerHeartbeatResponse]:
    """A broker heartbeat. The driver records `now_ms` as the broker's last contact. A fenced broker
    that has replayed up to its own registration is unfenced (and takes back the leadership of
    partitions where it is the last ISR member); `want_shut_down` is a controlled shutdown."""
    error = _check_broker_epoch(image, request.broker_id, request.broker_epoch)
    if error != ErrorCode.NONE:
        return [], BrokerHeartbeatResponse(error)
    broker = image.brokers[request.broker_id]
    caught_up = request.current_metadata_offset >= broker.registered_offset
    if request.want_shut_down:
        records, response = controlled_shutdown(
            image, ControlledShutdownRequest(request.broker_id, request.broker_epoch), defaults
        )
        return records, BrokerHeartbeatResponse(
            response.error_code, caught_up, is_fenced=True, should_shut_down=True
        )
    if request.want_fence:
        return _fence_records(image, [request.broker_id], defaults), BrokerHeartbeatResponse(
            ErrorCode.NONE, caught_up, is_fenced=True
        )
    if broker.fenced and caught_up:
        return _unfence_records(image, request.broker_id, defaults), BrokerHeartbeatResponse(
            ErrorCode.NONE, True, is_fenced=False
        )
    return [], BrokerHeartbeatResponse(ErrorCode.NONE, caught_up, is_fenced=broker.fenced)


def fence_expired_brokers(
    image: MetadataImage,
    last_heartbeat_ms_by_broker: Mapping[int, int],
    now_ms: int,
    session_timeout_ms: int,
    defaults: ElectionPolicy = NODE_DEFAULTS,
) -> tuple[list[MetadataRecord], list[int]]:
    """Fence every unfenced broker whose last heartbeat is older than session_timeout_ms, moving
    its leaderships to the first live ISR member (leader_epoch + 1) and taking it out of every
    ISR. A broker missing from the map is not fenced: the driver seeds the map with `now_ms`
    for every broker when it becomes the active controller (a grace period, as Kafka does)."""
    assert session_timeout_ms > 0
    expired = [
        b
        for b in image.live_broker_ids()
        if b in last_heartbeat_ms_by_broker
        and now_ms - last_heartbeat_ms_by_broker[b] > session_timeout_ms
    ]
    if not expired:
        return [], []
    return _fence_records(image, expired, defaults), expired


@dataclass(frozen=True)
class ControlledShutdownRequest:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class ControlledShutdownResponse:
    error_code: ErrorCode
    moved_partitions: tuple[tuple[uuid.UUID, int], ...] = ()


def controlled_shutdown(
    image: MetadataImage,
    request: ControlledShutdownRequest,
    defaults: ElectionPolicy = NODE_DEFAULTS,
) -> tuple[list[MetadataRecord], ControlledShutdownResponse]:
    """Move every leadership off a broker that is shutting down, take it out of every ISR and
    fence it; once the batch is applied the broker may stop without making partitions
    unavailable (except those where it was the last ISR member: they go leaderless)."""
    error = _check_broker_epoch(image, request.broker_id, request.broker_epoch)
    if error != ErrorCode.NONE:
        return [], ControlledShutdownResponse(error)
    records = _fence_records(image, [request.broker_id], defaults)
    moved = tuple(
        (r.topic_id, r.partition) for r in records if isinstance(r, PartitionChangeRecord)
    )
    return records, ControlledShutdownResponse(ErrorCode.NONE, moved)


@dataclass(frozen=True)
class UnregisterBrokerRequest:
    broker_id: int


@dataclass(frozen=True)
class UnregisterBrokerResponse:
    error_code: ErrorCode


def unregister_broker(
    image: MetadataImage,
    request: UnregisterBrokerRequest,
    defaults: ElectionPolicy = NODE_DEFAULTS,
) -> tuple[list[MetadataRecord], UnregisterBrokerResponse]:
    """Forget a decommissioned broker: it leaves every ISR and leadership first (same rules as
    fencing), then its registration is removed. Its id may stay in replica lists."""
    broker = image.brokers.get(request.broker_id)
    if broker is None:
        return [], UnregisterBrokerResponse(ErrorCode.BROKER_ID_NOT_REGISTERED)
    records: list[MetadataRecord] = list(
        _partition_change_records(
            image,
            defaults,
            removed=frozenset([request.broker_id]),
            unclean_shutdown=request.broker_id,
        )
    )
    records.append(UnregisterBrokerRecord(request.broker_id, broker.broker_epoch))
    return records, UnregisterBrokerResponse(ErrorCode.NONE)


# -- topics ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CreatableTopic:
    name: str
    num_partitions: int = -1  # -1: the default
    replication_factor: int = -1  # -1: the default
    configs: Mapping[str, str] = field(default_factory=dict)
    # Explicit replicas of partitions 0..n-1 (then num_partitions and replication_factor are -1)
    assignments: tuple[tuple[int, ...], ...] = ()
    # The id the forwarding broker drew for this topic, once per client request (None: the
    # controller draws one). A retry of the same request after an attempt that timed out but
    # was applied finds the topic with this id: it answers as the creation did, not
    # TOPIC_ALREADY_EXISTS.
    topic_id: uuid.UUID | None = None


@dataclass(frozen=True)
class CreateTopicsRequest:
    topics: tuple[CreatableTopic, ...]
    validate_only: bool = False


@dataclass(frozen=True)
class CreatableTopicResult:
    name: str
    error_code: ErrorCode
    error_message: str | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True)
class CreateTopicsResponse:
    results: tuple[CreatableTopicResult, ...]


def place_replicas(
    live_broker_ids: Sequence[int],
    first_partition: int,
    num_partitions: int,
    replication_factor: int,
    start_index: int,
) -> list[tuple[int, ...]]:
    """Round-robin placement: partition p's replicas are the `replication_factor` brokers that
    follow position (start_index + p) in the sorted live broker list; its first replica (the
    preferred leader) therefore rotates across brokers."""
    brokers = sorted(live_broker_ids)
    n = len(brokers)
    assert 1 <= replication_factor <= n
    return [
        tuple(brokers[(start_index + p + k) % n] for k in range(replication_factor))
        for p in range(first_partition, first_partition + num_partitions)
    ]


def _partition_records(
    image: MetadataImage,
    topic_id: uuid.UUID,
    assignments: Sequence[tuple[int, ...]],
    first_partition: int,
    request_id: uuid.UUID | None = None,
) -> list[MetadataRecord]:
    """New partitions: the ISR is the live replicas (all of them when placed round-robin),
    led by the first; `manual_assignment_error` made sure each has one. The last one carries
    the CreatePartitions request's id."""
    records: list[MetadataRecord] = []
    last = len(assignments) - 1
    for i, replicas in enumerate(assignments):
        isr = tuple(r for r in replicas if image.is_live(r))
        records.append(PartitionRecord(topic_id, first_partition + i, replicas, isr, isr[0], 0, 0,
                                       request_id=request_id if i == last else None))  # fmt: skip
    return records


def manual_assignment_error(
    image: MetadataImage, assignments: Sequence[tuple[int, ...]], replication_factor: int | None
) -> str | None:
    """Why explicit replica lists cannot be used (INVALID_REPLICA_ASSIGNMENT), as Kafka's
    controller checks them: each non-empty, distinct, registered brokers, one replication factor
    (the topic's, when it has partitions already), at least one live replica each."""
    for index, replicas in enumerate(assignments):
        if not replicas:
            return f"partition {index}: an empty replica list"
        if len(set(replicas)) != len(replicas):
            return f"partition {index}: duplicate brokers in {list(replicas)}"
        unknown = [r for r in replicas if r not in image.brokers]
        if unknown:
            return f"partition {index}: no broker {unknown[0]} is registered"
        if replication_factor is None:
            replication_factor = len(replicas)
        if len(replicas) != replication_factor:
            return (
                f"every partition needs {replication_factor} replicas; {index} has {len(replicas)}"
            )
        if not any(image.is_live(r) for r in replicas):
            return f"partition {index}: every broker of {list(replicas)} is fenced"
    return None


def _validate_topic(
    image: MetadataImage, topic: CreatableTopic, num_partitions: int, replication_factor: int
) -> tuple[ErrorCode, str] | None:
    error = topic_name_error(topic.name)
    if error:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, error
    if topic.name in image.topic_ids_by_name:
        return ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} already exists"
    collides = topic.name.replace(".", "_")
    for existing in image.topic_ids_by_name:
        if existing.replace(".", "_") == collides:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, f"{topic.name!r} collides with {existing!r}"
    if not 1 <= num_partitions <= MAX_PARTITIONS_PER_TOPIC:
        return ErrorCode.INVALID_PARTITIONS, f"num_partitions must be 1..{MAX_PARTITIONS_PER_TOPIC}"
    live = len(image.live_broker_ids())
    if replication_factor < 1 or replication_factor > live:
        return (
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor {replication_factor} with {live} live brokers",
        )
    for key, value in topic.configs.items():
        error = topic_config_error(key, value)
        if error:
            return ErrorCode.INVALID_CONFIG, error
    return None


def create_topics(
    image: MetadataImage,
    request: CreateTopicsRequest,
    *,
    start_index: int,
    topic_ids: Sequence[uuid.UUID],
    default_num_partitions: int = 1,
    default_replication_factor: int = 1,
) -> tuple[list[MetadataRecord], CreateTopicsResponse]:
    """Validate and create topics. `topic_ids[i]` (caller-drawn, e.g. uuid4) is the id of
    `request.topics[i]`; `start_index` (caller-drawn) is where round-robin placement starts."""
    if len(request.topics) > MAX_TOPICS_PER_REQUEST or len(topic_ids) < len(request.topics):
        refused = tuple(
            CreatableTopicResult(t.name, ErrorCode.INVALID_REQUEST, "too many topics / ids")
            for t in request.topics
        )
        return [], CreateTopicsResponse(refused)
    planned = sum(
        1 + max(0, default_num_partitions if t.num_partitions == -1 else t.num_partitions)
        + len(t.configs)
        for t in request.topics
    )  # fmt: skip
    if planned > MAX_RECORDS_PER_OPERATION:
        refused = tuple(
            CreatableTopicResult(t.name, ErrorCode.POLICY_VIOLATION, TOO_LARGE_MESSAGE)
            for t in request.topics
        )
        return [], CreateTopicsResponse(refused)
    names = [t.name for t in request.topics]
    records: list[MetadataRecord] = []
    results = []
    used_ids = set(image.topics)
    live = image.live_broker_ids()
    for topic, drawn_id in zip(request.topics, topic_ids, strict=False):
        topic_id = topic.topic_id or drawn_id
        if topic.topic_id is not None and image.topic_ids_by_name.get(topic.name) == topic_id:
            results.append(_created_already(image.topics[topic_id]))
            continue
        num_partitions = (
            default_num_partitions if topic.num_partitions == -1 else topic.num_partitions
        )
        replication_factor = (
            default_replication_factor
            if topic.replication_factor == -1
            else topic.replication_factor
        )
        if topic.assignments:
            if topic.num_partitions != -1 or topic.replication_factor != -1:
                message = "with replica assignments, num_partitions and replication_factor are -1"
                results.append(CreatableTopicResult(topic.name, ErrorCode.INVALID_REQUEST, message))
                continue
            num_partitions = len(topic.assignments)
            replication_factor = len(topic.assignments[0])
        if names.count(topic.name) > 1:
            failure: tuple[ErrorCode, str] | None = (
                ErrorCode.INVALID_REQUEST,
                f"topic {topic.name!r} appears more than once",
            )
        elif topic_id in used_ids:
            failure = (ErrorCode.INVALID_REQUEST, f"topic id {topic_id} is already used")
        else:
            # manual assignments may name fenced brokers (not counted as live): checked below
            checked_rf = 1 if topic.assignments else replication_factor
            failure = _validate_topic(image, topic, num_partitions, checked_rf)
        if failure is None and topic.assignments:
            problem = manual_assignment_error(image, topic.assignments, None)
            if problem is not None:
                failure = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
        if failure is not None:
            results.append(CreatableTopicResult(topic.name, failure[0], failure[1]))
            continue
        used_ids.add(topic_id)
        results.append(
            CreatableTopicResult(
                topic.name, ErrorCode.NONE, None, topic_id, num_partitions, replication_factor
            )
        )
        if request.validate_only:
            continue
        records.append(TopicRecord(topic.name, topic_id))
        assignments = list(topic.assignments) or place_replicas(
            live, 0, num_partitions, replication_factor, start_index
        )
        records.extend(_partition_records(image, topic_id, assignments, 0))
        for key in sorted(set(topic.configs) - IGNORED_TOPIC_CONFIGS):
            records.append(ConfigRecord(CONFIG_RESOURCE_TOPIC, topic.name, key, topic.configs[key]))
    return records, CreateTopicsResponse(tuple(results))


def _created_already(topic: TopicImage) -> CreatableTopicResult:
    """The answer to a retried request whose topic its first attempt created."""
    first = topic.partitions.get(0)
    replication_factor = len(first.replicas) if first is not None else -1
    return CreatableTopicResult(
        topic.name, ErrorCode.NONE, None, topic.topic_id, len(topic.partitions), replication_factor
    )


@dataclass(frozen=True)
class DeleteTopicsRequest:
    topic_names: tuple[str, ...] = ()
    topic_ids: tuple[uuid.UUID, ...] = ()
    # Drawn by the forwarding broker once per client request (None: not retried): the removal
    # records carry it, and a retry after an attempt that timed out but was applied finds each
    # topic it names among that request's deletions (MetadataImage.deletions), so it answers
    # as the deletion did, not UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID.
    request_id: uuid.UUID | None = None


@dataclass(frozen=True)
class DeletableTopicResult:
    name: str | None
    topic_id: uuid.UUID | None
    error_code: ErrorCode


@dataclass(frozen=True)
class DeleteTopicsResponse:
    results: tuple[DeletableTopicResult, ...]


def delete_topics(
    image: MetadataImage, request: DeleteTopicsRequest
) -> tuple[list[MetadataRecord], DeleteTopicsResponse]:
    """A topic this request's first attempt removed is answered as removed, before anything
    else: its name may name a topic created since, which the retry must not delete."""
    records: list[MetadataRecord] = []
    results = []
    removed: set[uuid.UUID] = set()
    done = {} if request.request_id is None else image.deletions.get(request.request_id, {})
    done_names = {topic_id: name for name, topic_id in done.items()}
    for name in request.topic_names:
        topic_id = done.get(name) or image.topic_ids_by_name.get(name)
        if topic_id is None:
            results.append(DeletableTopicResult(name, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        results.append(DeletableTopicResult(name, topic_id, ErrorCode.NONE))
        if name not in done and topic_id not in removed:
            removed.add(topic_id)
            records.append(RemoveTopicRecord(topic_id, request.request_id))
    for topic_id in request.topic_ids:
        topic = image.topics.get(topic_id)
        topic_name = done_names.get(topic_id) or (topic.name if topic is not None else None)
        if topic_name is None:
            results.append(DeletableTopicResult(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID))
            continue
        results.append(DeletableTopicResult(topic_name, topic_id, ErrorCode.NONE))
        if topic_id not in done_names and topic_id not in removed:
            removed.add(topic_id)
            records.append(RemoveTopicRecord(topic_id, request.request_id))
    return records, DeleteTopicsResponse(tuple(results))


@dataclass(frozen=True)
class CreatePartitionsTopic:
    name: str
    count: int  # the new total number of partitions
    assignments: tuple[tuple[int, ...], ...] | None = None  # replicas of each new partition


@dataclass(frozen=True)
class CreatePartitionsRequest:
    topics: tuple[CreatePartitionsTopic, ...]
    validate_only: bool = False
    # Drawn by the forwarding broker once per client request (None: not retried): the last new
    # partition of each topic carries it, and a retry after an attempt that timed out but was
    # applied finds it there, so it answers as the increase did, not INVALID_PARTITIONS. A
    # count alone cannot tell: Kafka refuses a fresh request for the current count ("Topic
    # already has N partition(s)"), and another client may have asked for the same count.
    request_id: uuid.UUID | None = None


@dataclass(frozen=True)
class CreatePartitionsTopicResult:
    name: str
    error_code: ErrorCode
    error_message: str | None = None


@dataclass(frozen=True)
class CreatePartitionsResponse:
    results: tuple[CreatePartitionsTopicResult, ...]


def create_partitions(
    image: MetadataImage, request: CreatePartitionsRequest, *, start_index: int
) -> tuple[list[MetadataRecord], CreatePartitionsResponse]:
    """Increase a topic's partition count (never decrease); new partitions keep the topic's
    replication factor and are placed round-robin from `start_index`."""
    planned = sum(
        max(0, item.count - len(topic.partitions))
        for item in request.topics
        if (topic := image.topic(item.name)) is not None
    )
    if planned > MAX_RECORDS_PER_OPERATION:
        return [], CreatePartitionsResponse(
            tuple(
                CreatePartitionsTopicResult(
                    item.name, ErrorCode.POLICY_VIOLATION, TOO_LARGE_MESSAGE
                )
                for item in request.topics
            )
        )
    records: list[MetadataRecord] = []
    results = []
    live = image.live_broker_ids()
    names = [t.name for t in request.topics]
    for item in request.topics:
        topic = image.topic(item.name)
        if names.count(item.name) > 1:
            results.append(
                CreatePartitionsTopicResult(item.name, ErrorCode.INVALID_REQUEST, "duplicate topic")
            )
            continue
        if topic is None:
            results.append(
                CreatePartitionsTopicResult(item.name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            )
            continue
        last_new = topic.partitions.get(item.count - 1)
        if request.request_id is not None and last_new is not None:
            if last_new.request_id == request.request_id:  # a retry: this request's increase
                results.append(CreatePartitionsTopicResult(item.name, ErrorCode.NONE))
                continue
        current = len(topic.partitions)
        if item.count <= current or item.count > MAX_PARTITIONS_PER_TOPIC:
            message = f"topic has {current} partitions; the new count must be more"
            results.append(
                CreatePartitionsTopicResult(item.name, ErrorCode.INVALID_PARTITIONS, message)
            )
            continue
        replication_factor = len(topic.partitions[0].target_replicas) if topic.partitions else 1
        if item.assignments is not None:
            problem = None
            if len(item.assignments) != item.count - current:
                problem = f"{len(item.assignments)} replica lists for {item.count - current} new partitions"
            problem = problem or manual_assignment_error(
                image, item.assignments, replication_factor
            )
            if problem is not None:
                results.append(
                    CreatePartitionsTopicResult(
                        item.name, ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem
                    )
                )
                continue
        elif replication_factor > len(live):
            message = f"replication factor {replication_factor} with {len(live)} live brokers"
            results.append(
                CreatePartitionsTopicResult(
                    item.name, ErrorCode.INVALID_REPLICATION_FACTOR, message
                )
            )
            continue
        results.append(CreatePartitionsTopicResult(item.name, ErrorCode.NONE))
        if request.validate_only:
            continue
        assignments = list(item.assignments or ()) or place_replicas(
            live, current, item.count - current, replication_factor, start_index
        )
        records.extend(
            _partition_records(image, topic.topic_id, assignments, current, request.request_id)
        )
    return records, CreatePartitionsResponse(tuple(results))


@dataclass(frozen=True)
class AlterConfigsRequest:
    """Topic config changes: value None deletes the key (incremental alter)."""

    topic_name: str
    changes: Mapping[str, str | None]


@dataclass(frozen=True)
class AlterConfigsResponse:
    error_code: ErrorCode
    error_message: str | None = None


def alter_topic_configs(
    image: MetadataImage, request: AlterConfigsRequest
) -> tuple[list[MetadataRecord], AlterConfigsResponse]:
    if request.topic_name not in image.topic_ids_by_name:
        return [], AlterConfigsResponse(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    for key, value in request.changes.items():
        error = topic_config_error(key, value)
        if error:
            return [], AlterConfigsResponse(ErrorCode.INVALID_CONFIG, error)
    records: list[MetadataRecord] = [
        ConfigRecord(CONFIG_RESOURCE_TOPIC, request.topic_name, key, request.changes[key])
        for key in sorted(set(request.changes) - IGNORED_TOPIC_CONFIGS)
    ]
    if request.changes.get("unclean.leader.election.enable") == "true":
        # Enabling it elects, in the same batch, a leader for every leaderless partition that
        # has a live replica (Kafka's controller runs that election once the config is set).
        records.extend(_unclean_elections(image, request.topic_name, request.changes))
    return records, AlterConfigsResponse(ErrorCode.NONE)


def _unclean_elections(
    image: MetadataImage, topic_name: str, changes: Mapping[str, str | None]
) -> list[MetadataRecord]:
    topic = image.topic(topic_name)
    assert topic is not None
    min_isr = changes.get("min.insync.replicas")
    policy = dataclasses.replace(
        election_policy(image, topic_name, NODE_DEFAULTS),
        unclean_leader_election_enable=True,
        **({"min_insync_replicas": int(min_isr)} if min_isr else {}),
    )
    records: list[MetadataRecord] = []
    for p in sorted(topic.partitions):
        state = topic.partitions[p]
        if state.leader == NO_LEADER:
            new = partition_change(state, state.isr, image.is_live, policy)
            record = change_record(topic.topic_id, p, state, new)
            if record is not None:
                records.append(record)
    return records


# -- ISR changes from partition leaders (AlterPartition) ------------------------------------------


@dataclass(frozen=True)
class AlterPartitionRequest:
    broker_id: int  # the leader asking
    broker_epoch: int
    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    partition_epoch: int  # the partition epoch the leader's ISR view is based on
    new_isr: tuple[int, ...]


@dataclass(frozen=True)
class AlterPartitionResponse:
    error_code: ErrorCode
    leader: int = NO_LEADER
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


def alter_partition(
    image: MetadataImage,
    request: AlterPartitionRequest,
    defaults: ElectionPolicy = NODE_DEFAULTS,
) -> tuple[list[MetadataRecord], AlterPartitionResponse]:
    """A leader's ISR shrink/expand. Rejected with STALE_BROKER_EPOCH, UNKNOWN_TOPIC_ID /
    UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH (leader epoch
    mismatch), INVALID_UPDATE_VERSION (stale partition epoch), INVALID_REQUEST (ISR not a subset
    of the replicas or without the leader), INELIGIBLE_REPLICA (a fenced broker in the ISR)."""
    error = _check_broker_epoch(image, request.broker_id, request.broker_epoch)
    if error == ErrorCode.BROKER_ID_NOT_REGISTERED:
        error = ErrorCode.STALE_BROKER_EPOCH
    if error != ErrorCode.NONE:
        return [], AlterPartitionResponse(error)
    topic = image.topics.get(request.topic_id)
    if topic is None:
        return [], AlterPartitionResponse(ErrorCode.UNKNOWN_TOPIC_ID)
    state = topic.partitions.get(request.partition)
    if state is None:
        return [], AlterPartitionResponse(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def fail(code: ErrorCode) -> tuple[list[MetadataRecord], AlterPartitionResponse]:
        return [], AlterPartitionResponse(
            code, state.leader, state.leader_epoch, state.isr, state.partition_epoch
        )

    if state.leader != request.broker_id:
        return fail(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    if request.leader_epoch != state.leader_epoch:
        return fail(ErrorCode.FENCED_LEADER_EPOCH)
    if request.partition_epoch != state.partition_epoch:
        return fail(ErrorCode.INVALID_UPDATE_VERSION)
    new_isr = tuple(request.new_isr)
    if (
        len(set(new_isr)) != len(new_isr)
        or not set(new_isr) <= set(state.replicas)
        or state.leader not in new_isr
    ):
        return fail(ErrorCode.INVALID_REQUEST)
    if any(not image.is_live(b) for b in new_isr):
        return fail(ErrorCode.INELIGIBLE_REPLICA)
    if new_isr == state.isr:
        return fail(ErrorCode.NONE)
    # The leader is live and in new_isr, so it stays; what changes beside the ISR is the ELR
    # (members that leave while the ISR is below min.insync.replicas are kept there).
    policy = election_policy(image, topic.name, defaults)
    new = partition_change(state, new_isr, image.is_live, policy)
    assert new.leader == state.leader and new.isr == new_isr
    # the ISR change that brings a reassignment's last target replica in sync completes it
    new = reassignment.one_change(state, reassignment.maybe_complete(new, image.is_live, policy))
    record = change_record(request.topic_id, request.partition, state, new)
    assert record is not None
    response = AlterPartitionResponse(
        ErrorCode.NONE, new.leader, new.leader_epoch, new.isr, new.partition_epoch
    )
    return [record], response


# Most partitions one AlterPartition batch may carry (a leader sends every pending change at
# once, as Kafka's AlterPartitionManager does; a broker leads far fewer than this at once).
MAX_ALTER_PARTITION_ITEMS = 10_000


@dataclass(frozen=True)
class AlterPartitionsRequest:
    """A leader's pending ISR changes, one item per partition, decided and committed together."""

    items: tuple[AlterPartitionRequest, ...]


@dataclass(frozen=True)
class AlterPartitionsResponse:
    items: tuple[AlterPartitionResponse, ...]  # in request order


def alter_partitions(
    image: MetadataImage,
    request: AlterPartitionsRequest,
    defaults: ElectionPolicy = NODE_DEFAULTS,
) -> tuple[list[MetadataRecord], AlterPartitionsResponse]:
    """Every item decided by `alter_partition` on the same image (they name distinct
    partitions, so that is the same as one after another); their records commit as one batch,
    one Raft round for a thousand ISR changes instead of a thousand rounds. A partition named
    twice, and every item of an oversized batch, is INVALID_REQUEST."""
    if len(request.items) > MAX_ALTER_PARTITION_ITEMS:
        invalid = AlterPartitionResponse(ErrorCode.INVALID_REQUEST)
        return [], AlterPartitionsResponse(tuple(invalid for _ in request.items))
    records: list[MetadataRecord] = []
    responses = []
    seen: set[tuple[uuid.UUID, int]] = set()
    for item in request.items:
        key = (item.topic_id, item.partition)
        if key in seen:
            responses.append(AlterPartitionResponse(ErrorCode.INVALID_REQUEST))
            continue
        seen.add(key)
        item_records, response = alter_partition(image, item, defaults)
        records += item_records
        responses.append(response)
    return records, AlterPartitionsResponse(tuple(responses))


# -- producer ids ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AllocateProducerIdsRequest:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class AllocateProducerIdsResponse:
    error_code: ErrorCode
    producer_id_start: int = -1
    producer_id_len: int = 0


def allocate_producer_ids(
    image: MetadataImage, request: AllocateProducerIdsRequest
) -> tuple[list[MetadataRecord], AllocateProducerIdsResponse]:
    """The next block of PRODUCER_ID_BLOCK_SIZE ids, starting at image.next_producer_id; the
    ProducerIdsRecord moves next_producer_id past it (replay refuses to move it back)."""
    error = _check_broker_epoch(image, request.broker_id, request.broker_epoch)
    if error != ErrorCode.NONE:
        return [], AllocateProducerIdsResponse(ErrorCode.STALE_BROKER_EPOCH)
    first = image.next_producer_id
    if first > MAX_PRODUCER_ID - PRODUCER_ID_BLOCK_SIZE:
        return [], AllocateProducerIdsResponse(ErrorCode.UNKNOWN_SERVER_ERROR)
    record = ProducerIdsRecord(
        request.broker_id, request.broker_epoch, first + PRODUCER_ID_BLOCK_SIZE
    )
    return [record], AllocateProducerIdsResponse(ErrorCode.NONE, first, PRODUCER_ID_BLOCK_SIZE)
