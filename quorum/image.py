"""MetadataImage: the cluster metadata obtained by replaying committed metadata batches in order.

An image is immutable: `replay_batch(image, batch, metadata_offset)` returns a NEW image (only the
maps that changed are copied, so a batch costs O(brokers + topics + partitions of touched topics))
or raises `MetadataReplayError` and the old image stays as it was. Images compare with ==.

Offsets. A batch is one Raft entry and its metadata offset is the Raft index of that entry; indexes
of entries that are not metadata batches (no-ops, membership changes) are simply skipped, so
offsets are strictly increasing but may have gaps. Every record of a batch shares the batch's
offset. `image.last_offset` is the offset of the last batch applied *or rejected*: a rejected batch
leaves the content untouched but the image still reflects "everything up to that offset".

Invariants checked on replay (a batch breaking any of them is rejected as a whole):
  * metadata offsets strictly increase;
  * controller epoch fencing: a batch must carry the current controller epoch, except a batch that
    opens with `ActiveControllerRecord(epoch)` with an epoch greater than the current one, which
    installs that epoch; stale proposals of an older active controller are rejected;
  * ProducerIdsRecord.next_producer_id strictly increases (Kafka's ProducerIdControlManager.replay);
  * a PartitionChangeRecord sets partition_epoch = current + 1, and leader_epoch = current + 1 when
    the leader changes (unchanged otherwise), so neither epoch ever goes back;
  * broker epochs strictly increase across re-registrations of a broker id;
  * every partition: replicas distinct and non-empty, isr a subset of replicas, and either the
    leader is in the isr and every isr member is a registered unfenced broker, or the partition is
    leaderless (leader -1) with at most one isr member;
  * elr (KIP-966's eligible leader replicas) distinct, a subset of the replicas and disjoint from
    the isr; last_known_elr a subset of the replicas.

Fencing is explicit: replay never derives records. The controller that fences a broker emits, in
the same batch, the PartitionChangeRecords that take it out of every isr and move leadership
(quorum/partition_change.py decides how). Since KIP-966 a partition whose last live isr member
goes away is leaderless with an empty isr, its former members kept in elr; journals written
before kept that last member in the isr instead, which is why a leaderless partition may still
hold one (fenced) isr member.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from log.common.errors import ErrorCode, KafkaError
from quorum.records import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    NO_LEADER,
    AccessControlEntryRecord,
    ActiveControllerRecord,
    BrokerEndpoint,
    BrokerRegistrationOffsetRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataBatch,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialsRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialsRecord,
)

MAX_PRODUCER_ID = 2**63 - 1
MAX_TOPIC_NAME_CHARS = 249
# Deletions remembered for retries (MetadataImage.deletions): a retry follows its first attempt
# within the controller client's attempts (20 of at most 10 s each), so the newest thousand
# DeleteTopics requests cover every retry but a cluster deleting topics five times a second.
MAX_REMEMBERED_DELETIONS = 1000
SCRAM_MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}  # Kafka's ScramMechanism.type()
_LEGAL_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")


class MetadataReplayError(KafkaError):
    """A batch that breaks an image invariant; it is rejected as a whole."""

    error_code = ErrorCode.INVALID_REQUEST


def topic_name_error(name: str) -> str | None:
    """Kafka's topic name rules; None when the name is legal."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return "topic name cannot be '.' or '..'"
    if len(name) > MAX_TOPIC_NAME_CHARS:
        return f"topic name is longer than {MAX_TOPIC_NAME_CHARS} characters"
    if not _LEGAL_TOPIC_NAME.match(name):
        return "topic name may only contain ASCII alphanumerics, '.', '_' and '-'"
    return None


@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    broker_epoch: int
    incarnation_id: uuid.UUID
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None
    fenced: bool
    registered_offset: int  # metadata offset of the batch that registered this incarnation


@dataclass(frozen=True)
class PartitionRegistration:
    """A partition as the metadata log records it (Kafka's PartitionRegistration); what a
    replica does with it is log.replication.partition_state.PartitionState."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    # KIP-966: replicas that left the isr while it was below min.insync.replicas (they hold
    # every acknowledged record), and the last leader once the isr became empty.
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    # An ongoing reassignment (KIP-455): replicas being added and removed, both in `replicas`.
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    # The forwarded CreatePartitions request whose increase ended with this partition (None for
    # every other partition): its retry knows by it that the increase was applied.
    request_id: uuid.UUID | None = None

    @property
    def is_reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas once the ongoing reassignment completes."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)


@dataclass(frozen=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=dict)


@dataclass(frozen=True)
class MetadataImage:
    """Never mutate the maps: replay_batch copies what it changes."""

    brokers: Mapping[int, BrokerRegistration] = field(default_factory=dict)
    topics: Mapping[uuid.UUID, TopicImage] = field(default_factory=dict)
    topic_ids_by_name: Mapping[str, uuid.UUID] = field(default_factory=dict)
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=dict)
    next_producer_id: int = 0  # first id of the next block the controller hands out
    # (user name, SCRAM mechanism type) -> the credential the SCRAM server checks against
    scram_credentials: Mapping[tuple[str, int], UserScramCredentialsRecord] = field(
        default_factory=dict
    )
    # ACL id -> the binding (the authorizer's input; log/security/authorizer.py)
    acls: Mapping[uuid.UUID, AccessControlEntryRecord] = field(default_factory=dict)
    # controller id -> where it listens (Raft and CONTROLLER); voters added at run time register
    # here, so brokers find them (quorum/raft.py holds the voter set itself)
    controllers: Mapping[int, RegisterControllerRecord] = field(default_factory=dict)
    # finalized feature -> level (FeatureLevelRecord; a feature absent here is at level 0)
    features: Mapping[str, int] = field(default_factory=dict)
    # A forwarded DeleteTopics request's id -> the topics (name -> id) it removed, for the newest
    # MAX_REMEMBERED_DELETIONS requests: a retry of one knows by it that its first attempt was
    # applied (quorum/controller.py delete_topics). Checkpoints carry it as the topic's
    # TopicRecord and RemoveTopicRecord, so an image is still its log's, whatever it was read from.
    deletions: Mapping[uuid.UUID, Mapping[str, uuid.UUID]] = field(default_factory=dict)
    controller_id: int = -1
    controller_epoch: int = -1
    last_offset: int = -1

    # -- queries ---------------------------------------------------------------------------------

    def topic(self, name: str) -> TopicImage | None:
        topic_id = self.topic_ids_by_name.get(name)
        return None if topic_id is None else self.topics[topic_id]

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with this id; None when no topic has it (requests naming
        topics by id answer that UNKNOWN_TOPIC_ID)."""
        topic = self.topics.get(topic_id)
        return None if topic is None else topic.name

    def partition(self, topic_id: uuid.UUID, partition: int) -> PartitionRegistration | None:
        topic = self.topics.get(topic_id)
        return None if topic is None else topic.partitions.get(partition)

    def feature_level(self, name: str) -> int:
        """The finalized level of feature `name` (0: not finalized, its oldest behaviour)."""
        return self.features.get(name, 0)

    def live_broker_ids(self) -> list[int]:
        """Registered, unfenced brokers, sorted."""
        return sorted(b.broker_id for b in self.brokers.values() if not b.fenced)

    def is_live(self, broker_id: int) -> bool:
        broker = self.brokers.get(broker_id)
        return broker is not None and not broker.fenced

    def topic_configs(self, name: str) -> Mapping[str, str]:
        return self.configs.get((CONFIG_RESOURCE_TOPIC, name), {})

    def broker_configs(self, name: str) -> Mapping[str, str]:
        """A broker id's dynamic configs, or the cluster-wide default's for name ""."""
        return self.configs.get((CONFIG_RESOURCE_BROKER, name), {})

    def iter_partitions(self) -> Iterable[tuple[uuid.UUID, int, PartitionRegistration]]:
        """Every partition in a deterministic order (topic name, partition)."""
        for name in sorted(self.topic_ids_by_name):
            topic = self.topics[self.topic_ids_by_name[name]]
            for p in sorted(topic.partitions):
                yield topic.topic_id, p, topic.partitions[p]

    def to_records(self) -> list[MetadataRecord]:
        """Records that rebuild this image from empty (with `replay_checkpoint_records`)."""
        records: list[MetadataRecord] = []
        if self.controller_epoch >= 0:
            records.append(ActiveControllerRecord(self.controller_id, self.controller_epoch))
        for broker_id in sorted(self.brokers):
            b = self.brokers[broker_id]
            records.append(
                RegisterBrokerRecord(
                    b.broker_id, b.broker_epoch, b.incarnation_id, b.endpoints, b.rack, b.fenced
                )
            )
            records.append(BrokerRegistrationOffsetRecord(b.broker_id, b.registered_offset))
        if self.next_producer_id > 0:
            records.append(ProducerIdsRecord(-1, -1, self.next_producer_id))
        for request_id, removed in self.deletions.items():  # oldest first, as replay keeps them
            for name, topic_id in removed.items():
                records.append(TopicRecord(name, topic_id))
                records.append(RemoveTopicRecord(topic_id, request_id))
        for name in sorted(self.topic_ids_by_name):
            topic = self.topics[self.topic_ids_by_name[name]]
            records.append(TopicRecord(topic.name, topic.topic_id))
            for p in sorted(topic.partitions):
                s = topic.partitions[p]
                records.append(
                    PartitionRecord(
                        topic.topic_id,
                        p,
                        s.replicas,
                        s.isr,
                        s.leader,
                        s.leader_epoch,
                        s.partition_epoch,
                        s.elr,
                        s.last_known_elr,
                        s.adding_replicas,
                        s.removing_replicas,
                        s.request_id,
                    )
                )
        for resource in sorted(self.configs):
            for key in sorted(self.configs[resource]):
                records.append(
                    ConfigRecord(resource[0], resource[1], key, self.configs[resource][key])
                )
        records.extend(self.scram_credentials[key] for key in sorted(self.scram_credentials))
        records.extend(self.acls[key] for key in sorted(self.acls))
        records.extend(self.controllers[key] for key in sorted(self.controllers))
        records.extend(
            FeatureLevelRecord(name, self.features[name]) for name in sorted(self.features)
        )
        return records


# -- replay ---------------------------------------------------------------------------------------


class _Builder:
    """A copy-on-write staging area for one batch."""

    def __init__(self, image: MetadataImage, checkpoint: bool) -> None:
        self.base = image
        self.checkpoint = checkpoint
        self.brokers = dict(image.brokers)
        self.topics = dict(image.topics)
        self.topic_ids_by_name = dict(image.topic_ids_by_name)
        self.configs = dict(image.configs)
        self.next_producer_id = image.next_producer_id
        self.scram_credentials = dict(image.scram_credentials)
        # copied on the first ACL record only: an unchanged image keeps the same mapping, so the
        # broker's authorizer (log/server/authorization.py) is rebuilt only when ACLs change
        self.acls: Mapping[uuid.UUID, AccessControlEntryRecord] = image.acls
        self.own_acls: dict[uuid.UUID, AccessControlEntryRecord] | None = None
        self.controllers = image.controllers  # copied on the first change only
        self.features = image.features  # copied on the first change only
        self.deletions = image.deletions  # copied on the first change only
        self._own_deletions: dict[uuid.UUID, Mapping[str, uuid.UUID]] | None = None
        self._own_removed: dict[uuid.UUID, dict[str, uuid.UUID]] = {}  # made by this builder
        self.controller_id = image.controller_id
        self.controller_epoch = image.controller_epoch
        self.touched: set[tuple[uuid.UUID, int]] = set()
        # The partition maps this builder made, by topic id: only these change in place, every
        # other map is shared with `base`.
        self._owned_partitions: dict[uuid.UUID, dict[int, PartitionRegistration]] = {}
        # Brokers this batch fenced or unregistered: an ISR naming one breaks the invariant
        # even where no record of the batch touched the partition.
        self.gone_dark: set[int] = set()
        self.check_all = False  # a checkpoint: every partition
        self.offset = image.last_offset

    def fail(self, message: str) -> None:
        raise MetadataReplayError(message)

    def build(self, last_offset: int) -> MetadataImage:
        return MetadataImage(
            brokers=self.brokers,
            topics=self.topics,
            topic_ids_by_name=self.topic_ids_by_name,
            configs=self.configs,
            next_producer_id=self.next_producer_id,
            scram_credentials=self.scram_credentials,
            acls=self.acls,
            controllers=self.controllers,
            features=self.features,
            deletions=self.deletions,
            controller_id=self.controller_id,
            controller_epoch=self.controller_epoch,
            last_offset=last_offset,
        )

    def _broker(self, broker_id: int, broker_epoch: int) -> BrokerRegistration:
        broker = self.brokers.get(broker_id)
        if broker is None:
            self.fail(f"broker {broker_id} is not registered")
        assert broker is not None
        if broker.broker_epoch != broker_epoch:
            self.fail(f"broker {broker_id} epoch {broker_epoch} != {broker.broker_epoch}")
        return broker

    def _set_partition(
        self, topic: TopicImage, partition: int, state: PartitionRegistration
    ) -> None:
        partitions = self._owned_partitions.get(topic.topic_id)
        if partitions is None:
            # First change to this topic in this batch: copy its partitions once, then change
            # the copy in place (a copy per record made a 1,000-partition topic cost O(n^2)).
            partitions = self._owned_partitions[topic.topic_id] = dict(topic.partitions)
            self.topics[topic.topic_id] = dataclasses.replace(topic, partitions=partitions)
        partitions[partition] = state
        self.touched.add((topic.topic_id, partition))

    # One method per record type.

    def register_broker(self, r: RegisterBrokerRecord) -> None:
        old = self.brokers.get(r.broker_id)
        if old is not None and r.broker_epoch <= old.broker_epoch:
            self.fail(f"broker {r.broker_id} epoch {r.broker_epoch} <= {old.broker_epoch}")
        if r.broker_id < 0 or r.broker_epoch < 0:
            self.fail("negative broker id or epoch")
        if len({e.name for e in r.endpoints}) != len(r.endpoints):
            self.fail(f"broker {r.broker_id} has duplicate listener names")
        self.brokers[r.broker_id] = BrokerRegistration(
            r.broker_id,
            r.broker_epoch,
            r.incarnation_id,
            r.endpoints,
            r.rack,
            r.fenced,
            self.offset,
        )
        if r.fenced and old is not None and not old.fenced:
            self.gone_dark.add(r.broker_id)

    def unregister_broker(self, r: UnregisterBrokerRecord) -> None:
        self._broker(r.broker_id, r.broker_epoch)
        del self.brokers[r.broker_id]
        self.gone_dark.add(r.broker_id)

    def fence_broker(self, r: FenceBrokerRecord) -> None:
        broker = self._broker(r.broker_id, r.broker_epoch)
        if broker.fenced:
            self.fail(f"broker {r.broker_id} is already fenced")
        self.brokers[r.broker_id] = dataclasses.replace(broker, fenced=True)
        self.gone_dark.add(r.broker_id)

    def unfence_broker(self, r: UnfenceBrokerRecord) -> None:
        broker = self._broker(r.broker_id, r.broker_epoch)
        if not broker.fenced:
            self.fail(f"broker {r.broker_id} is not fenced")
        self.brokers[r.broker_id] = dataclasses.replace(broker, fenced=False)

    def topic(self, r: TopicRecord) -> None:
        error = topic_name_error(r.name)
        if error:
            self.fail(error)
        if r.name in self.topic_ids_by_name or r.topic_id in self.topics:
            self.fail(f"topic {r.name} / {r.topic_id} already exists")
        partitions = self._owned_partitions[r.topic_id] = {}
        self.topics[r.topic_id] = TopicImage(r.name, r.topic_id, partitions)
        self.topic_ids_by_name[r.name] = r.topic_id

    def _check_replicas(self, replicas: tuple[int, ...]) -> None:
        if not replicas or len(set(replicas)) != len(replicas):
            self.fail(f"replicas {replicas} empty or not distinct")
        for broker_id in replicas:
            if broker_id not in self.brokers:
                self.fail(f"replica {broker_id} is not a registered broker")

    def _check_reassignment(
        self, replicas: tuple[int, ...], adding: tuple[int, ...], removing: tuple[int, ...]
    ) -> None:
        if not set(adding) <= set(replicas) or not set(removing) <= set(replicas):
            self.fail(f"adding {adding} / removing {removing} not among replicas {replicas}")
        if set(adding) & set(removing) or len(removing) >= len(replicas):
            self.fail(f"adding {adding} / removing {removing} overlap or remove every replica")

    def partition(self, r: PartitionRecord) -> None:
        topic = self.topics.get(r.topic_id)
        if topic is None:
            self.fail(f"unknown topic id {r.topic_id}")
        assert topic is not None
        if r.partition != len(topic.partitions):
            self.fail(f"partition {r.partition} is not the next partition of {topic.name}")
        self._check_replicas(r.replicas)
        if r.leader_epoch < 0 or r.partition_epoch < 0:
            self.fail("negative partition epochs")
        self._check_reassignment(r.replicas, r.adding_replicas, r.removing_replicas)
        state = PartitionRegistration(
            r.replicas,
            r.isr,
            r.leader,
            r.leader_epoch,
            r.partition_epoch,
            r.elr,
            r.last_known_elr,
            r.adding_replicas,
            r.removing_replicas,
            r.request_id,
        )
        self._set_partition(topic, r.partition, state)

    def partition_change(self, r: PartitionChangeRecord) -> None:
        topic = self.topics.get(r.topic_id)
        old = None if topic is None else topic.partitions.get(r.partition)
        if topic is None or old is None:
            self.fail(f"unknown partition {r.topic_id}-{r.partition}")
        assert topic is not None and old is not None
        if r.partition_epoch != old.partition_epoch + 1:
            self.fail(f"partition_epoch {r.partition_epoch} is not {old.partition_epoch} + 1")
        leader = old.leader if r.leader is None else r.leader
        expected_leader_epoch = old.leader_epoch + (1 if leader != old.leader else 0)
        if r.leader_epoch != expected_leader_epoch:
            self.fail(f"leader_epoch {r.leader_epoch} is not {expected_leader_epoch}")
        replicas = old.replicas if r.replicas is None else r.replicas
        if r.replicas is not None:
            self._check_replicas(r.replicas)
        isr = old.isr if r.isr is None else r.isr
        elr = old.elr if r.elr is None else r.elr
        last_known_elr = old.last_known_elr if r.last_known_elr is None else r.last_known_elr
        adding = old.adding_replicas if r.adding_replicas is None else r.adding_replicas
        removing = old.removing_replicas if r.removing_replicas is None else r.removing_replicas
        self._check_reassignment(replicas, adding, removing)
        state = PartitionRegistration(
            replicas,
            isr,
            leader,
            r.leader_epoch,
            r.partition_epoch,
            elr,
            last_known_elr,
            adding,
            removing,
            old.request_id,
        )
        self._set_partition(topic, r.partition, state)

    def remove_topic(self, r: RemoveTopicRecord) -> None:
        topic = self.topics.pop(r.topic_id, None)
        if topic is None:
            self.fail(f"unknown topic id {r.topic_id}")
        assert topic is not None
        del self.topic_ids_by_name[topic.name]
        self.configs.pop((CONFIG_RESOURCE_TOPIC, topic.name), None)
        self.touched = {t for t in self.touched if t[0] != r.topic_id}
        if r.request_id is not None:
            self._remember_deletion(r.request_id, topic.name, r.topic_id)

    def _remember_deletion(self, request_id: uuid.UUID, name: str, topic_id: uuid.UUID) -> None:
        if self._own_deletions is None:
            self.deletions = self._own_deletions = dict(self.deletions)
        removed = self._own_removed.get(request_id)
        if removed is None:
            removed = self._own_removed[request_id] = dict(self.deletions.get(request_id, {}))
            self._own_deletions[request_id] = removed
            while len(self._own_deletions) > MAX_REMEMBERED_DELETIONS:
                del self._own_deletions[next(iter(self._own_deletions))]  # the oldest request's
        removed[name] = topic_id

    def config(self, r: ConfigRecord) -> None:
        if r.resource_type == CONFIG_RESOURCE_TOPIC:
            if r.resource_name not in self.topic_ids_by_name:
                self.fail(f"config for unknown topic {r.resource_name}")
        elif r.resource_type != CONFIG_RESOURCE_BROKER:
            self.fail(f"unknown config resource type {r.resource_type}")
        resource = (r.resource_type, r.resource_name)
        entries = dict(self.configs.get(resource, {}))
        if r.value is None:
            entries.pop(r.key, None)
        else:
            entries[r.key] = r.value
        if entries:
            self.configs[resource] = entries
        else:
            self.configs.pop(resource, None)

    def scram_credential(self, r: UserScramCredentialsRecord) -> None:
        if not r.name or r.mechanism not in SCRAM_MECHANISM_TYPES:
            self.fail(f"bad SCRAM credential record for {r.name!r} mechanism {r.mechanism}")
        self.scram_credentials[(r.name, r.mechanism)] = r

    def remove_scram_credential(self, r: RemoveUserScramCredentialsRecord) -> None:
        if self.scram_credentials.pop((r.name, r.mechanism), None) is None:
            self.fail(f"no SCRAM credential for {r.name!r} mechanism {r.mechanism}")

    def _writable_acls(self) -> dict[uuid.UUID, AccessControlEntryRecord]:
        if self.own_acls is None:
            self.own_acls = dict(self.acls)
            self.acls = self.own_acls
        return self.own_acls

    def access_control_entry(self, r: AccessControlEntryRecord) -> None:
        if r.id in self.acls:
            self.fail(f"ACL {r.id} already exists")
        self._writable_acls()[r.id] = r

    def remove_access_control_entry(self, r: RemoveAccessControlEntryRecord) -> None:
        if self._writable_acls().pop(r.id, None) is None:
            self.fail(f"no ACL {r.id}")

    def producer_ids(self, r: ProducerIdsRecord) -> None:
        if r.next_producer_id <= self.next_producer_id:
            self.fail(f"next_producer_id {r.next_producer_id} <= {self.next_producer_id}")
        if r.next_producer_id > MAX_PRODUCER_ID:
            self.fail("next_producer_id beyond the producer id space")
        if not self.checkpoint:
            self._broker(r.broker_id, r.broker_epoch)
        self.next_producer_id = r.next_producer_id

    def active_controller(self, r: ActiveControllerRecord) -> None:
        if r.controller_epoch <= self.controller_epoch:
            self.fail(f"controller_epoch {r.controller_epoch} <= {self.controller_epoch}")
        self.controller_id = r.controller_id
        self.controller_epoch = r.controller_epoch

    def register_controller(self, r: RegisterControllerRecord) -> None:
        if r.controller_id < 0:
            self.fail(f"controller id {r.controller_id} is negative")
        for host, port in ((r.raft_host, r.raft_port), (r.controller_host, r.controller_port)):
            if not host or not 0 < port < 65536:
                self.fail(f"controller {r.controller_id}: bad endpoint {host}:{port}")
        self.controllers = {**self.controllers, r.controller_id: r}

    def feature_level(self, r: FeatureLevelRecord) -> None:
        if not r.name or r.feature_level < 0:
            self.fail(f"bad feature level {r.name!r}={r.feature_level}")
        features = dict(self.features)
        if r.feature_level == 0:
            features.pop(r.name, None)
        else:
            features[r.name] = r.feature_level
        self.features = features

    def registration_offset(self, r: BrokerRegistrationOffsetRecord) -> None:
        if not self.checkpoint:
            self.fail("BrokerRegistrationOffsetRecord is checkpoint-only")
        broker = self.brokers.get(r.broker_id)
        if broker is None:
            self.fail(f"broker {r.broker_id} is not registered")
        assert broker is not None
        self.brokers[r.broker_id] = dataclasses.replace(
            broker, registered_offset=r.registered_offset
        )

    def check_partition(
        self, topic_id: uuid.UUID, partition: int, s: PartitionRegistration
    ) -> None:
        isr = set(s.isr)
        if not isr <= set(s.replicas) or len(isr) != len(s.isr):
            self.fail(
                f"{topic_id}-{partition}: isr {s.isr} is not a subset of replicas {s.replicas}"
            )
        if len(set(s.elr)) != len(s.elr) or not set(s.elr) <= set(s.replicas) or isr & set(s.elr):
            self.fail(f"{topic_id}-{partition}: elr {s.elr} not distinct replicas outside the isr")
        if not set(s.last_known_elr) <= set(s.replicas):
            self.fail(f"{topic_id}-{partition}: last_known_elr {s.last_known_elr} not replicas")
        if s.leader == NO_LEADER:
            if len(s.isr) > 1:
                self.fail(f"{topic_id}-{partition}: leaderless partition with isr {s.isr}")
            return
        if s.leader not in isr:
            self.fail(f"{topic_id}-{partition}: leader {s.leader} not in isr {s.isr}")
        brokers = self.brokers
        for broker_id in s.isr:
            broker = brokers.get(broker_id)
            if broker is None or broker.fenced:
                self.fail(
                    f"{topic_id}-{partition}: isr member {broker_id} is fenced or unregistered"
                )

    def check_invariants(self) -> None:
        if self.check_all:
            for topic in self.topics.values():
                for p, s in topic.partitions.items():
                    self.check_partition(topic.topic_id, p, s)
            return
        for topic_id, p in self.touched:
            self.check_partition(topic_id, p, self.topics[topic_id].partitions[p])
        gone_dark = self.gone_dark
        if gone_dark:  # one pass over every ISR, checking only those naming such a broker
            for topic in self.topics.values():
                for p, s in topic.partitions.items():
                    if not gone_dark.isdisjoint(s.isr):
                        self.check_partition(topic.topic_id, p, s)


# Each handler takes the record type it is keyed by, a pairing a type checker cannot express
# for a dict: the record parameter is Any here and `type(record)` selects the right handler.
_DISPATCH: dict[type[MetadataRecord], Callable[[_Builder, Any], None]] = {
    RegisterBrokerRecord: _Builder.register_broker,
    UnregisterBrokerRecord: _Builder.unregister_broker,
    FenceBrokerRecord: _Builder.fence_broker,
    UnfenceBrokerRecord: _Builder.unfence_broker,
    TopicRecord: _Builder.topic,
    PartitionRecord: _Builder.partition,
    PartitionChangeRecord: _Builder.partition_change,
    RemoveTopicRecord: _Builder.remove_topic,
    ConfigRecord: _Builder.config,
    ProducerIdsRecord: _Builder.producer_ids,
    ActiveControllerRecord: _Builder.active_controller,
    BrokerRegistrationOffsetRecord: _Builder.registration_offset,
    NoOpRecord: lambda builder, record: None,
    UserScramCredentialsRecord: _Builder.scram_credential,
    RemoveUserScramCredentialsRecord: _Builder.remove_scram_credential,
    AccessControlEntryRecord: _Builder.access_control_entry,
    RemoveAccessControlEntryRecord: _Builder.remove_access_control_entry,
    RegisterControllerRecord: _Builder.register_controller,
    FeatureLevelRecord: _Builder.feature_level,
}


def _check_controller_epoch(image: MetadataImage, batch: MetadataBatch) -> None:
    opens_epoch = bool(batch.records) and isinstance(batch.records[0], ActiveControllerRecord)
    if any(isinstance(r, ActiveControllerRecord) for r in batch.records[1:]):
        raise MetadataReplayError("ActiveControllerRecord must open its batch")
    if batch.controller_epoch < image.controller_epoch:
        raise MetadataReplayError(
            f"stale controller_epoch {batch.controller_epoch} < {image.controller_epoch}",
            error_code=ErrorCode.STALE_CONTROLLER_EPOCH,
        )
    if opens_epoch:
        first = batch.records[0]
        assert isinstance(first, ActiveControllerRecord)
        if first.controller_epoch != batch.controller_epoch or first.controller_epoch < 0:
            raise MetadataReplayError("ActiveControllerRecord epoch differs from the batch's")
        if first.controller_epoch <= image.controller_epoch:
            raise MetadataReplayError(
                f"controller_epoch {first.controller_epoch} is not newer than "
                f"{image.controller_epoch}",
                error_code=ErrorCode.STALE_CONTROLLER_EPOCH,
            )
    elif batch.controller_epoch != image.controller_epoch or image.controller_epoch < 0:
        raise MetadataReplayError(
            f"controller_epoch {batch.controller_epoch} was never activated "
            f"(current {image.controller_epoch})",
            error_code=ErrorCode.STALE_CONTROLLER_EPOCH,
        )


def _replay(
    image: MetadataImage, records: Iterable[MetadataRecord], offset: int, checkpoint: bool
) -> MetadataImage:
    builder = _Builder(image, checkpoint)
    builder.offset = offset
    for record in records:
        handler = _DISPATCH.get(type(record))
        if handler is None:
            raise MetadataReplayError(f"not a metadata record: {type(record).__name__}")
        handler(builder, record)
    builder.check_invariants()
    return builder.build(offset)


def replay_batch(image: MetadataImage, batch: MetadataBatch, metadata_offset: int) -> MetadataImage:
    """The image after `batch` committed at `metadata_offset`; raises MetadataReplayError (and
    `image` is unchanged) when the batch breaks an invariant. Pure and deterministic."""
    if metadata_offset <= image.last_offset:
        raise MetadataReplayError(f"offset {metadata_offset} <= last offset {image.last_offset}")
    _check_controller_epoch(image, batch)
    return _replay(image, batch.records, metadata_offset, checkpoint=False)


def replay_checkpoint_records(records: Iterable[MetadataRecord], last_offset: int) -> MetadataImage:
    """Rebuild an image from `MetadataImage.to_records()` output (no controller-epoch checks)."""
    image = MetadataImage()
    builder = _Builder(image, checkpoint=True)
    builder.offset = last_offset
    for record in records:
        handler = _DISPATCH.get(type(record))
        if handler is None:
            raise MetadataReplayError(f"not a metadata record: {type(record).__name__}")
        if isinstance(record, ActiveControllerRecord):
            builder.controller_id = record.controller_id
            builder.controller_epoch = record.controller_epoch
            continue
        handler(builder, record)
    builder.check_all = True
    builder.check_invariants()
    return builder.build(last_offset)


@dataclass(frozen=True)
class PartitionChange:
    """One partition that differs between two images (None: absent on that side)."""

    topic_id: uuid.UUID
    topic_name: str
    partition: int
    old: PartitionRegistration | None
    new: PartitionRegistration | None


def partition_changes(old: MetadataImage, new: MetadataImage) -> list[PartitionChange]:
    """Partitions created, changed or removed from `old` to `new`, in (name, partition) order.
    A broker replaying metadata uses this to become leader or follower with the new leader_epoch.
    Cheap: replay copies only the topics it touches, so untouched topics are the same object."""
    changes = []
    for topic_id in old.topics.keys() | new.topics.keys():
        before, after = old.topics.get(topic_id), new.topics.get(topic_id)
        if before is after:
            continue
        topic = after or before
        assert topic is not None  # the id comes from one of the two images
        name = topic.name
        old_parts = before.partitions if before else {}
        new_parts = after.partitions if after else {}
        for p in old_parts.keys() | new_parts.keys():
            a, b = old_parts.get(p), new_parts.get(p)
            if a is not b and a != b:
                changes.append(PartitionChange(topic_id, name, p, a, b))
    return sorted(changes, key=lambda c: (c.topic_name, c.partition, c.new is None))
