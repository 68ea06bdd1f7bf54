"""The table of APIs we speak: versions advertised, versions answered, request/response schemas.

`implemented` is what we can decode and answer. `removed` is what Kafka 4.0 removed (KIP-896:
its JSON's `validVersions` start above them): refused with UNSUPPORTED_VERSION and left out of
ApiVersions unless the node keeps legacy versions (`quorumlog.legacy.request.versions`), so
`answered(legacy)` is what a request may use. ApiVersions advertises exactly that, except two
floors kept for old clients' feature checks, as Kafka 4 does (KEEP_ADVERTISED_LOW): a real
request at such a version gets UNSUPPORTED_VERSION in that version's response layout
(`error_response_body`).
APIs come in families (CORE_APIS, GROUP_APIS, ...); DEFAULT_ADVERTISED is core + group +
replication; a broker passes its own set to `api_versions_body(api_keys=...)` and
`ServerConnection(advertised_api_keys=...)`. Every declared API is decoded whether advertised
or not (our own brokers and controllers use unadvertised ones).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

from log.common.errors import ErrorCode
from log.protocol import (
    acls,
    admin,
    api_versions,
    consumer_group,
    controller,
    coordinator,
    features,
    fetch,
    groups,
    log_dirs,
    metadata,
    metadata_quorum,
    offsets,
    produce,
    producer_id,
    producers,
    sasl,
    transaction_admin,
    transactions,
)
from log.protocol.schema import ArrayType, Message, StructType, Versions, in_range, parse_versions


@dataclasses.dataclass(frozen=True)
class Api:
    api_key: int
    name: str
    request: Message
    response: Message
    advertised: Versions
    implemented: Versions
    removed: Versions | None = None  # KIP-896: refused unless the node keeps legacy versions

    def __post_init__(self) -> None:
        assert self.request.versions[0] <= self.implemented[0]
        assert self.implemented[1] <= self.request.versions[1]
        assert self.request.versions == self.response.versions
        assert self.removed is None or self.removed[0] == 0 < self.removed[1] + 1

    def answered(self, legacy: bool = False) -> Versions:
        """The versions a request may use (`legacy`: KIP-896's removed ones too)."""
        low, high = self.implemented
        if self.removed is not None and not legacy:
            low = max(low, self.removed[1] + 1)
        return low, high

    def is_implemented(self, version: int, legacy: bool = False) -> bool:
        return in_range(version, self.answered(legacy))

    def advertised_versions(self, legacy: bool = False) -> Versions:
        """ApiVersions' range: what is answered, below it only a KEEP_ADVERTISED_LOW floor."""
        low, high = self.answered(legacy)
        if self.api_key in KEEP_ADVERTISED_LOW:
            low = min(low, self.advertised[0])
        return low, min(high, self.advertised[1])

    def is_declared(self, version: int) -> bool:
        return self.request.supports(version)


# Advertised below what is answered, for old clients' feature checks (Kafka 4 keeps both):
# Produce v0 (KAFKA-18659: librdkafka < 2.11.1 turns compression off without it) and
# SaslHandshake v0 (librdkafka's SASL_HANDSHAKE feature needs v0 in range).
KEEP_ADVERTISED_LOW = frozenset({0, 17})


def _api(
    name: str,
    request: Message,
    response: Message,
    advertised: str,
    implemented: str,
    removed: str | None = None,
) -> Api:
    assert request.api_key is not None
    return Api(request.api_key, name, request, response, parse_versions(advertised),
               parse_versions(implemented),
               None if removed is None else parse_versions(removed))  # fmt: skip


# name, request, response, advertised, implemented, removed by Kafka 4.0 (KIP-896)
# fmt: off
APIS: dict[int, Api] = {api.api_key: api for api in (
    # v11 knows TRANSACTION_ABORTABLE; v12 (KIP-890 part 2) lets a transaction version 2 producer
    # send to a partition not yet in its transaction: the leader adds it (same layout as v11);
    # v13 names topics by id (KIP-516: UNKNOWN_TOPIC_ID for an id this broker does not know).
    _api("Produce", produce.PRODUCE_REQUEST, produce.PRODUCE_RESPONSE, "0-13", "3-13", "0-2"),
    # v18 (KIP-1166): a follower's known high watermark, tagged; our leaders do not use it.
    _api("Fetch", fetch.FETCH_REQUEST, fetch.FETCH_RESPONSE, "0-18", "4-18", "0-3"),
    # v7 max timestamp (-3), v8 earliest local (-4), v9 latest tiered (-5), v10 timeout_ms,
    # v11 earliest pending upload (-6)
    _api("ListOffsets", offsets.LIST_OFFSETS_REQUEST, offsets.LIST_OFFSETS_RESPONSE, "0-11",
         "1-11", "0"),
    _api("Metadata", metadata.METADATA_REQUEST, metadata.METADATA_RESPONSE, "0-13", "1-13"),
    # v9: KIP-848 members commit with their member epoch (STALE_MEMBER_EPOCH otherwise);
    # v10 names topics by id (UNKNOWN_TOPIC_ID for an id this broker does not know)
    _api("OffsetCommit", groups.OFFSET_COMMIT_REQUEST, groups.OFFSET_COMMIT_RESPONSE, "0-10",
         "2-10", "0-1"),
    # v7's require_stable (KIP-447): UNSTABLE_OFFSET_COMMIT while a transaction's offsets wait
    # v8 batches groups, v9 checks a KIP-848 member's id and epoch (STALE_MEMBER_EPOCH), v10
    # names topics by id
    _api("OffsetFetch", groups.OFFSET_FETCH_REQUEST, groups.OFFSET_FETCH_RESPONSE, "0-10",
         "1-10", "0"),
    _api("FindCoordinator", coordinator.FIND_COORDINATOR_REQUEST,
         coordinator.FIND_COORDINATOR_RESPONSE, "0-6", "0-6"),
    # JoinGroup v7 answers the protocol type, v8 carries a reason (logged), v9 skip_assignment
    # (KIP-814); SyncGroup v5 checks the protocol type and name; LeaveGroup v5 a reason each.
    _api("JoinGroup", groups.JOIN_GROUP_REQUEST, groups.JOIN_GROUP_RESPONSE, "0-9", "0-9"),
    _api("Heartbeat", groups.HEARTBEAT_REQUEST, groups.HEARTBEAT_RESPONSE, "0-4", "0-4"),
    _api("LeaveGroup", groups.LEAVE_GROUP_REQUEST, groups.LEAVE_GROUP_RESPONSE, "0-5", "0-5"),
    _api("SyncGroup", groups.SYNC_GROUP_REQUEST, groups.SYNC_GROUP_RESPONSE, "0-5", "0-5"),
    # v6 (KIP-1043): GROUP_ID_NOT_FOUND with a message for a group that does not exist
    _api("DescribeGroups", groups.DESCRIBE_GROUPS_REQUEST, groups.DESCRIBE_GROUPS_RESPONSE,
         "0-6", "0-6"),
    _api("ListGroups", groups.LIST_GROUPS_REQUEST, groups.LIST_GROUPS_RESPONSE, "0-5", "0-5"),
    # v5+ requests are answered with the v0 error body (KIP-511), see `api_versions_error_body`.
    # v3+ carry the supported and finalized features (tagged); v4 also lists min-0 features.
    _api("ApiVersions", api_versions.API_VERSIONS_REQUEST, api_versions.API_VERSIONS_RESPONSE,
         "0-4", "0-4"),
    _api("CreateTopics", admin.CREATE_TOPICS_REQUEST, admin.CREATE_TOPICS_RESPONSE, "0-7", "0-7",
         "0-1"),
    # v5 error messages, v6 topics by name or id (UNKNOWN_TOPIC_ID)
    _api("DeleteTopics", admin.DELETE_TOPICS_REQUEST, admin.DELETE_TOPICS_RESPONSE, "0-6", "0-6",
         "0"),
    # v2-4 are flexible and v3+ let a transactional producer bump its own epoch (KIP-360):
    # librdkafka needs v3 to recover from an abortable transaction error instead of failing.
    # v5 only says the client knows TRANSACTION_ABORTABLE (KIP-890).
    _api("InitProducerId", producer_id.INIT_PRODUCER_ID_REQUEST,
         producer_id.INIT_PRODUCER_ID_RESPONSE, "0-6", "0-6"),
    _api("OffsetForLeaderEpoch", offsets.OFFSET_FOR_LEADER_EPOCH_REQUEST,
         offsets.OFFSET_FOR_LEADER_EPOCH_RESPONSE, "0-4", "0-4", "0-1"),
    # v4+ (batched, verify_only) come from partition leaders (KIP-890 part 1, CLUSTER_ACTION).
    _api("AddPartitionsToTxn", transactions.ADD_PARTITIONS_TO_TXN_REQUEST,
         transactions.ADD_PARTITIONS_TO_TXN_RESPONSE, "0-5", "0-5"),
    # v3 is flexible, v4 only says the client knows TRANSACTION_ABORTABLE
    _api("AddOffsetsToTxn", transactions.ADD_OFFSETS_TO_TXN_REQUEST,
         transactions.ADD_OFFSETS_TO_TXN_RESPONSE, "0-4", "0-4"),
    # v5 (transaction version 2): the epoch is bumped at every commit/abort and the answer
    # carries the producer id and epoch to continue with.
    _api("EndTxn", transactions.END_TXN_REQUEST, transactions.END_TXN_RESPONSE, "0-5", "0-5"),
    # v3 (KIP-447) fences by the group's generation and member id; v4 knows
    # TRANSACTION_ABORTABLE; v5 (transaction version 2) adds the group's offsets partition to
    # the transaction itself (no AddOffsetsToTxn).
    _api("TxnOffsetCommit", transactions.TXN_OFFSET_COMMIT_REQUEST,
         transactions.TXN_OFFSET_COMMIT_RESPONSE, "0-5", "0-5"),
    # Coordinator -> partition leaders (inter-broker): our coordinator sends v1; v0 is removed
    # as in Kafka 4 (KIP-896). Kafka's v2 (transaction_version per marker) is not declared.
    _api("WriteTxnMarkers", transactions.WRITE_TXN_MARKERS_REQUEST,
         transactions.WRITE_TXN_MARKERS_RESPONSE, "0-1", "0-1", "0"),
    # kafka-transactions.sh: each broker answers for the transactional ids it coordinates.
    _api("DescribeTransactions", transaction_admin.DESCRIBE_TRANSACTIONS_REQUEST,
         transaction_admin.DESCRIBE_TRANSACTIONS_RESPONSE, "0", "0"),
    # v1 a duration filter (KIP-994), v2 a transactional id pattern (KIP-1152)
    _api("ListTransactions", transaction_admin.LIST_TRANSACTIONS_REQUEST,
         transaction_admin.LIST_TRANSACTIONS_RESPONSE, "0-2", "0-2"),
    # v3: each config's type and, when asked, documentation (KIP-569); v4 flexible
    _api("DescribeConfigs", admin.DESCRIBE_CONFIGS_REQUEST, admin.DESCRIBE_CONFIGS_RESPONSE,
         "0-4", "0-4", "0"),
    _api("CreatePartitions", admin.CREATE_PARTITIONS_REQUEST, admin.CREATE_PARTITIONS_RESPONSE,
         "0-3", "0-3"),
    _api("DeleteGroups", groups.DELETE_GROUPS_REQUEST, groups.DELETE_GROUPS_RESPONSE, "0-2", "0-2"),
    # Flexible-only API (kafka-python's KafkaAdminClient.describe_cluster; librdkafka uses Metadata).
    # KIP-848 consumer groups (log/coordinator/consumer_group_state.py)
    _api("ConsumerGroupHeartbeat", consumer_group.CONSUMER_GROUP_HEARTBEAT_REQUEST,
         consumer_group.CONSUMER_GROUP_HEARTBEAT_RESPONSE, "0-1", "0-1"),
    # v1 (KIP-1099): each member's type (ours are all consumer members)
    _api("ConsumerGroupDescribe", consumer_group.CONSUMER_GROUP_DESCRIBE_REQUEST,
         consumer_group.CONSUMER_GROUP_DESCRIBE_RESPONSE, "0-1", "0-1"),
    # v2 (KIP-1073): fenced brokers too when asked, each with is_fenced
    _api("DescribeCluster", admin.DESCRIBE_CLUSTER_REQUEST, admin.DESCRIBE_CLUSTER_RESPONSE,
         "0-2", "0-2"),
    # Admin extras: declared and decodable, advertised only once the broker handles them.
    _api("AlterConfigs", admin.ALTER_CONFIGS_REQUEST, admin.ALTER_CONFIGS_RESPONSE, "0-2", "0-2"),
    _api("IncrementalAlterConfigs", admin.INCREMENTAL_ALTER_CONFIGS_REQUEST,
         admin.INCREMENTAL_ALTER_CONFIGS_RESPONSE, "0-1", "0-1"),
    _api("DeleteRecords", admin.DELETE_RECORDS_REQUEST, admin.DELETE_RECORDS_RESPONSE, "0-2", "0-2"),
    _api("OffsetDelete", admin.OFFSET_DELETE_REQUEST,
         admin.OFFSET_DELETE_RESPONSE, "0", "0"),
    _api("ElectLeaders", admin.ELECT_LEADERS_REQUEST, admin.ELECT_LEADERS_RESPONSE, "0-2", "0-2"),
    # v1 (KIP-860): allow_replication_factor_change
    _api("AlterPartitionReassignments", admin.ALTER_PARTITION_REASSIGNMENTS_REQUEST,
         admin.ALTER_PARTITION_REASSIGNMENTS_RESPONSE, "0-1", "0-1"),
    _api("ListPartitionReassignments", admin.LIST_PARTITION_REASSIGNMENTS_REQUEST,
         admin.LIST_PARTITION_REASSIGNMENTS_RESPONSE, "0", "0"),
    _api("DescribeProducers", producers.DESCRIBE_PRODUCERS_REQUEST,
         producers.DESCRIBE_PRODUCERS_RESPONSE, "0", "0"),
    _api("DescribeTopicPartitions", metadata.DESCRIBE_TOPIC_PARTITIONS_REQUEST,
         metadata.DESCRIBE_TOPIC_PARTITIONS_RESPONSE, "0", "0"),
    # kafka-metadata-quorum.sh --bootstrap-server: forwarded to the active controller
    _api("DescribeQuorum", metadata_quorum.DESCRIBE_QUORUM_REQUEST,
         metadata_quorum.DESCRIBE_QUORUM_RESPONSE, "0-2", "0-2"),
    # Each broker describes its own replicas (kafka-python's describe_log_dirs; Kafka 4 is 1-5).
    _api("DescribeLogDirs", log_dirs.DESCRIBE_LOG_DIRS_REQUEST,
         log_dirs.DESCRIBE_LOG_DIRS_RESPONSE, "0-5", "0-5", "0"),
    # A move to the broker's one log dir is done already (kafka-python's alter_replica_log_dirs).
    _api("AlterReplicaLogDirs", log_dirs.ALTER_REPLICA_LOG_DIRS_REQUEST,
         log_dirs.ALTER_REPLICA_LOG_DIRS_RESPONSE, "0-2", "0-2", "0"),
    # SASL (log/security/authenticator.py): v0 is followed by raw tokens, v1 by SaslAuthenticate.
    _api("SaslHandshake", sasl.SASL_HANDSHAKE_REQUEST, sasl.SASL_HANDSHAKE_RESPONSE, "0-1", "0-1"),
    _api("SaslAuthenticate", sasl.SASL_AUTHENTICATE_REQUEST, sasl.SASL_AUTHENTICATE_RESPONSE,
         "0-2", "0-2"),
    # ACLs (log/security/authorizer.py): advertised once handled.
    _api("DescribeAcls", acls.DESCRIBE_ACLS_REQUEST, acls.DESCRIBE_ACLS_RESPONSE, "0-3", "0-3", "0"),
    _api("CreateAcls", acls.CREATE_ACLS_REQUEST, acls.CREATE_ACLS_RESPONSE, "0-3", "0-3", "0"),
    _api("DeleteAcls", acls.DELETE_ACLS_REQUEST, acls.DELETE_ACLS_RESPONSE, "0-3", "0-3", "0"),
    _api("DescribeUserScramCredentials", sasl.DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST,
         sasl.DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE, "0", "0"),
    _api("AlterUserScramCredentials", sasl.ALTER_USER_SCRAM_CREDENTIALS_REQUEST,
         sasl.ALTER_USER_SCRAM_CREDENTIALS_RESPONSE, "0", "0"),
    # kafka-features.sh upgrade/downgrade: the finalized levels (quorum/features.py).
    _api("UpdateFeatures", features.UPDATE_FEATURES_REQUEST, features.UPDATE_FEATURES_RESPONSE,
         "0-2", "0-2"),
    # Broker-to-controller (KRaft) APIs: never advertised to clients.
    _api("BrokerRegistration", controller.BROKER_REGISTRATION_REQUEST,
         controller.BROKER_REGISTRATION_RESPONSE, "0-3", "0-3"),
    _api("BrokerHeartbeat", controller.BROKER_HEARTBEAT_REQUEST,
         controller.BROKER_HEARTBEAT_RESPONSE, "0", "0"),
    _api("AllocateProducerIds", controller.ALLOCATE_PRODUCER_IDS_REQUEST,
         controller.ALLOCATE_PRODUCER_IDS_RESPONSE, "0", "0"),
)}
# fmt: on

API_VERSIONS_KEY = 18
# API families: a broker advertises a family once it handles every API in it.
CORE_APIS = frozenset({0, 1, 2, 3, 18, 19, 20, 22, 32, 37, 60})
GROUP_APIS = frozenset({8, 9, 10, 11, 12, 13, 14, 15, 16, 42})
CONSUMER_GROUP_APIS = frozenset({68, 69})  # KIP-848: ConsumerGroupHeartbeat, ConsumerGroupDescribe
REPLICATION_APIS = frozenset({23})  # OffsetForLeaderEpoch: followers, and clients' epoch checks
TRANSACTION_APIS = frozenset({24, 25, 26, 27, 28, 65, 66})
ADMIN_EXTRA_APIS = frozenset({21, 33, 43, 44, 45, 46, 47, 55, 57, 61, 75})
CONTROLLER_APIS = frozenset({62, 63, 67})  # broker-to-controller only: never advertise
LOG_DIR_APIS = frozenset({34, 35})  # AlterReplicaLogDirs, DescribeLogDirs
SASL_APIS = frozenset({17, 36, 50, 51})  # SaslHandshake, SaslAuthenticate, SCRAM credentials
ACL_APIS = frozenset({29, 30, 31})  # DescribeAcls, CreateAcls, DeleteAcls
assert (
    CORE_APIS
    | GROUP_APIS
    | CONSUMER_GROUP_APIS
    | REPLICATION_APIS
    | TRANSACTION_APIS
    | ADMIN_EXTRA_APIS
    | CONTROLLER_APIS
    | LOG_DIR_APIS
    | SASL_APIS
    | ACL_APIS
) == set(APIS)
DEFAULT_ADVERTISED: frozenset[int] = CORE_APIS | GROUP_APIS | REPLICATION_APIS


def supported_api_versions(
    api_keys: frozenset[int] | None = None, legacy: bool = False
) -> list[Any]:
    """ApiVersions' api_keys entries for `api_keys` (default: DEFAULT_ADVERTISED); `legacy`:
    with KIP-896's removed versions."""
    return list(_api_version_entries(DEFAULT_ADVERTISED if api_keys is None else api_keys, legacy))


@functools.lru_cache(maxsize=32)  # a broker asks for one or two sets (per listener, legacy)
def _api_version_entries(api_keys: frozenset[int], legacy: bool) -> tuple[Any, ...]:
    """The entries, made once per set: working out ~50 ranges took 2/3 of an ApiVersions
    answer's CPU (~0.3 ms on a 2-core box), and every client connection starts with one."""
    response_cls: Any = (
        api_versions.API_VERSIONS_RESPONSE.cls
    )  # made at run time by schema.py: untyped
    entry = response_cls.ApiVersion
    ranges = {key: APIS[key].advertised_versions(legacy) for key in sorted(api_keys)}
    return tuple(entry(api_key=key, min_version=low, max_version=high)
                 for key, (low, high) in ranges.items())  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Features:
    """ApiVersions v3+'s features: `supported` name -> (min, max) levels this broker implements,
    `finalized` name -> the cluster's level, valid from metadata offset `finalized_epoch`."""

    supported: Mapping[str, tuple[int, int]]
    finalized: Mapping[str, int]
    finalized_epoch: int


def api_versions_body(
    api_keys: frozenset[int] | None = None,
    throttle_time_ms: int = 0,
    legacy: bool = False,
    features: Features | None = None,
    version: int = 4,
) -> Any:
    """The ApiVersions response body (any version 0-4) advertising `api_keys` and, from v3,
    `features` (a v3 answer leaves out supported features whose min is 0, as Kafka's does)."""
    cls: Any = api_versions.API_VERSIONS_RESPONSE.cls  # made at run time by schema.py: untyped
    extra: dict[str, Any] = {}
    if features is not None:
        extra["supported_features"] = [
            cls.SupportedFeatureKey(name=name, min_version=low, max_version=high)
            for name, (low, high) in sorted(features.supported.items())
            if version >= 4 or low > 0
        ]
        extra["finalized_features_epoch"] = features.finalized_epoch
        extra["finalized_features"] = [
            cls.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
            for name, level in sorted(features.finalized.items())
        ]
    return cls(
        error_code=ErrorCode.NONE,
        api_keys=supported_api_versions(api_keys, legacy),
        throttle_time_ms=throttle_time_ms,
        **extra,
    )


def api_versions_error_body(api_keys: frozenset[int] | None = None, legacy: bool = False) -> Any:
    """KIP-511: the v0-layout body answering an ApiVersions request at a version we lack.

    Apache Kafka lists only its ApiVersions range here; we list all ranges, which clients
    ignore on error (kafka-python and librdkafka read only the ApiVersions entry).
    """
    return api_versions.API_VERSIONS_RESPONSE.cls(
        error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=supported_api_versions(api_keys, legacy)
    )


# Field names that identify what an error is about, in requests and responses.
_PARTITION_ID_FIELDS = ("index", "partition", "partition_index")
_NAME_FIELDS = ("name", "topic", "group_id", "resource_name", "key")
_COPIED_FIELDS = ("resource_type", "transactional_id", "topic_id")  # topic_id: v13/v10 by id
_UNKNOWN_OFFSET_FIELDS = ("base_offset", "offset", "high_watermark", "committed_offset")


def error_response_body(api: Api, version: int, request_body: Any, error_code: int) -> Any:
    """A response body at `version` answering every part of `request_body` with `error_code`.

    Kafka's `AbstractRequest.getErrorResponse`, derived from the schema: every error code
    field gets the code; response arrays that carry errors mirror the request's items
    (topics, partitions, groups, resources) by name/partition id; offsets are -1.
    Used for UNSUPPORTED_VERSION refusals, and by handlers that fail a whole request.
    """
    assert api.is_declared(version)
    return _error_struct(api.response.struct, version, request_body, error_code)


def _is_error_field(name: str) -> bool:
    return name == "error_code" or name.endswith("_error_code")


def _has_error_field(struct_type: StructType) -> bool:
    for field in struct_type.fields:
        element = field.type.element if isinstance(field.type, ArrayType) else field.type
        if _is_error_field(field.name) or (
            isinstance(element, StructType) and _has_error_field(element)
        ):
            return True
    return False


def _error_struct(struct_type: StructType, version: int, source: Any, error_code: int) -> Any:
    values: dict[str, Any] = {}
    for field in struct_type.fields:
        if not in_range(version, field.versions):
            continue
        element = field.type.element if isinstance(field.type, ArrayType) else None
        if _is_error_field(field.name):
            values[field.name] = error_code
        elif field.name in _UNKNOWN_OFFSET_FIELDS:
            values[field.name] = -1
        elif field.name in _NAME_FIELDS + _PARTITION_ID_FIELDS + _COPIED_FIELDS:
            values[field.name] = _source_value(source, field.name)
        elif isinstance(element, StructType) and _has_error_field(element):
            items = _source_items(source)
            if items is not None:
                values[field.name] = [
                    _error_struct(element, version, item, error_code) for item in items
                ]
    return struct_type.cls(**{k: v for k, v in values.items() if v is not None})


def _source_value(source: Any, name: str) -> Any:
    if source is None:
        return None
    group: tuple[str, ...]
    if name in _NAME_FIELDS:
        group = _NAME_FIELDS
    elif name in _PARTITION_ID_FIELDS:
        group = _PARTITION_ID_FIELDS
    else:
        group = (name,)
    for candidate in group:
        value = getattr(source, candidate, None)
        if value is not None:
            return value
    return None


def _source_items(source: Any) -> list[Any] | None:
    """The first non-empty list in `source`: a request's topics/groups, a topic's partitions."""
    if source is None or not dataclasses.is_dataclass(source):
        return None
    for field in dataclasses.fields(source):
        value = getattr(source, field.name)
        if not isinstance(value, list) or not value:
            continue
        if dataclasses.is_dataclass(value[0]):
            return value
        if isinstance(value[0], str):
            return [_Named(name) for name in value]
        if isinstance(value[0], int) and field.name in ("partitions", "partition_indexes"):
            return [_PartitionId(partition) for partition in value]
    return None


@dataclasses.dataclass(frozen=True)
class _Named:
    name: str


@dataclasses.dataclass(frozen=True)
class _PartitionId:
    partition_index: int
