"""AdminClient: topics, configs, cluster description and offsets over BrokerConnection (driver).

    async with AdminClient("127.0.0.1:9092") as admin:
        await admin.create_topic("events", 6, 1, {"retention.ms": "60000"})
        cluster = await admin.describe_cluster()           # ClusterDescription
        topics = await admin.describe_topics(["events"])   # [TopicDescription]
        configs = await admin.describe_topic_configs("events")
        await admin.alter_topic_configs("events", {"retention.ms": "1000"}, delete=["x"])
        hw = await admin.high_watermarks("events", [0, 1])  # {partition: high watermark}
        dirs = await admin.describe_log_dirs(cluster.brokers[0])  # [LogDirDescription]
        await admin.delete_topic("events")

It composes a FetchClient, so connections, bootstrap handling, leader lookup and ListOffsets
are the producer's (producer/connection.py, producer/metadata.py, producer/fetch_client.py).
Admin requests (CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs) go to
any broker, which forwards them to the active controller and answers once its own image shows
the change. DescribeLogDirs goes to the one broker it describes. Metadata here is asked with allow_auto_topic_creation off: describing an unknown
topic never creates it. Every call is bounded by `request_timeout_ms` (connecting included);
an unreachable cluster is a ConnectionFailedError, a broker's error the KafkaError for its code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from log.common.errors import ErrorCode, KafkaError, UnknownTopicOrPartitionError, error_for
from log.protocol.admin import (
    ALTER_PARTITION_REASSIGNMENTS_REQUEST,
    CREATE_PARTITIONS_REQUEST,
    DELETE_TOPICS_REQUEST,
    DESCRIBE_CLUSTER_REQUEST,
    DESCRIBE_CONFIGS_REQUEST,
    ELECT_LEADERS_REQUEST,
    INCREMENTAL_ALTER_CONFIGS_REQUEST,
    LIST_PARTITION_REASSIGNMENTS_REQUEST,
)
from log.protocol.coordinator import find_coordinator_request, single_coordinator
from log.protocol.log_dirs import DESCRIBE_LOG_DIRS_REQUEST
from log.protocol.metadata import METADATA_REQUEST
from producer.admin_requests import CREATE_TOPICS_KEY, create_topics_request
from producer.connection import (
    BrokerConnection,
    ConnectionFailedError,
    Connector,
    open_plaintext,
)
from producer.fetch_client import FetchClient

METADATA_KEY = 3
DELETE_TOPICS_KEY = 20
DESCRIBE_CONFIGS_KEY = 32
DESCRIBE_LOG_DIRS_KEY = 35
CREATE_PARTITIONS_KEY = 37
ELECT_LEADERS_KEY = 43
ALTER_PARTITION_REASSIGNMENTS_KEY = 45
LIST_PARTITION_REASSIGNMENTS_KEY = 46
INCREMENTAL_ALTER_CONFIGS_KEY = 44
DESCRIBE_CLUSTER_KEY = 60
FIND_COORDINATOR_KEY = 10
KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION = 0, 1  # FindCoordinator key types
# FindCoordinator is retried while __consumer_offsets / __transaction_state is being created
COORDINATOR_ATTEMPTS, COORDINATOR_BACKOFF_S = 20, 0.25
COORDINATOR_RETRIABLE = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
}
_READ_ONLY_KEYS = frozenset({METADATA_KEY, DESCRIBE_CONFIGS_KEY, DESCRIBE_CLUSTER_KEY})
RESOURCE_TOPIC = 2
OP_SET, OP_DELETE = 0, 1  # IncrementalAlterConfigs config_operation
DEFAULT_REQUEST_TIMEOUT_MS = 15000
ADMIN_TIMEOUT_MS = 30000  # timeout_ms the broker gets for forwarded changes to become visible
CONNECT_TIMEOUT_MS = 3000  # per candidate broker: a refused port is retried with backoff until then


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    error_code: int = 0

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    partitions: tuple[PartitionInfo, ...]
    is_internal: bool = False

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    is_default: bool
    read_only: bool
    is_sensitive: bool
    source: int

    @property
    def is_override(self) -> bool:
        """The topic's own value (DYNAMIC_TOPIC_CONFIG), not one it inherits from the brokers'
        configs (a cluster default such as KIP-966's min.insync.replicas is not a default)."""
        return self.source == 1 if self.source != -1 else not self.is_default


@dataclass(frozen=True, slots=True)
class ReplicaLogInfo:
    """One replica's log as its broker describes it (DescribeLogDirs)."""

    topic: str
    partition: int
    partition_size: int  # bytes of all its segments
    offset_lag: int  # Kafka's: max(high_watermark - log_end_offset, 0) for a current log
    is_future_key: bool


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    log_dir: str
    error_code: int
    total_bytes: int  # the volume's; -1 when unknown (brokers answering below v4)
    usable_bytes: int
    replicas: tuple[ReplicaLogInfo, ...]


class AdminClient:
    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        client_id: str = "quorumlog-admin",
        request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
        connector: Connector = open_plaintext,
    ) -> None:
        self.request_timeout_ms = request_timeout_ms
        self.fetch_client = FetchClient(
            bootstrap_servers,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            connector=connector,
        )

    async def __aenter__(self) -> AdminClient:
        await self.fetch_client.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return await self.fetch_client.__aexit__(*exc_info)

    # -- plumbing -------------------------------------------------------------------------------

    async def _any_broker(self) -> BrokerConnection:
        """A connection to any broker: a connected one, a known one, else a bootstrap server."""
        client = self.fetch_client
        last: str = "no broker address"
        for address in client.metadata.candidate_nodes():
            with trio.move_on_after(min(self.request_timeout_ms, CONNECT_TIMEOUT_MS) / 1000):
                connection = client.connections.get(address.node_id)
                if connection is not None:
                    return connection
                try:
                    return await client.connections.connected(
                        address.node_id, address.host, address.port
                    )
                except ConnectionFailedError:
                    pass  # refused (a stopped broker): try the next one
            last = f"{address.host}:{address.port}"
        raise ConnectionFailedError(f"cannot connect to any broker (last tried {last})")

    async def request(self, api_key: int, body: Any) -> Any:
        """Send one request to any broker. Reads (Metadata, Describe*) are retried once on a
        fresh connection; changes are not (a lost answer could hide a success)."""
        attempts = 2 if api_key in _READ_ONLY_KEYS else 1
        for attempt in range(attempts):
            connection = await self._any_broker()
            try:
                with trio.fail_after(self.request_timeout_ms / 1000):
                    return await connection.request(api_key, body)
            except (ConnectionFailedError, trio.TooSlowError) as exc:
                connection.close()
                if attempt == attempts - 1:
                    raise ConnectionFailedError(f"request failed: {exc}") from None
        raise AssertionError("unreachable")

    async def coordinator(self, key: str, key_type: int) -> BrokerConnection:
        """A connection to the coordinator of group `key` (key_type 0) or transactional id
        `key` (1). FindCoordinator is retried while its internal topic is being created or
        loaded (COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS)."""
        what = f"FindCoordinator {key}"
        for _ in range(COORDINATOR_ATTEMPTS):
            body = await self.request(FIND_COORDINATOR_KEY, find_coordinator_request(key, key_type))
            code, node_id, host, port = single_coordinator(body)
            if code in COORDINATOR_RETRIABLE:
                await trio.sleep(COORDINATOR_BACKOFF_S)
                continue
            raise_for(code, what)
            return await self.fetch_client.connections.connected(node_id, host, port)
        raise_for(ErrorCode.COORDINATOR_NOT_AVAILABLE, what)
        raise AssertionError("unreachable")

    # -- cluster and topics ---------------------------------------------------------------------

    async def metadata(self, topics: Iterable[str] | None = None) -> Any:
        """A raw Metadata response (all topics when `topics` is None); never auto-creates."""
        request: Any = METADATA_REQUEST.cls
        body = request(
            topics=None
            if topics is None
            else [request.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False,
        )
        return await self.request(METADATA_KEY, body)

    async def describe_cluster(self) -> ClusterDescription:
        body = await self.request(
            DESCRIBE_CLUSTER_KEY,
            DESCRIBE_CLUSTER_REQUEST.cls(include_cluster_authorized_operations=False),
        )
        if body.error_code != ErrorCode.NONE:
            raise error_for(body.error_code, body.error_message or "DescribeCluster")
        brokers = tuple(
            sorted(
                (BrokerInfo(b.broker_id, b.host, b.port, b.rack) for b in body.brokers),
                key=lambda b: b.node_id,
            )
        )
        return ClusterDescription(body.cluster_id, body.controller_id, brokers)

    async def list_topics(self) -> list[str]:
        body = await self.metadata(None)
        return sorted(t.name for t in body.topics if t.error_code == ErrorCode.NONE)

    async def describe_topics(self, topics: Iterable[str] | None = None) -> list[TopicDescription]:
        """Topics with their partitions; raises UnknownTopicOrPartitionError for a missing one."""
        body = await self.metadata(topics)
        out = []
        for topic in body.topics:
            if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise UnknownTopicOrPartitionError(f"topic {topic.name!r} does not exist")
            if topic.error_code not in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE):
                raise error_for(topic.error_code, f"topic {topic.name!r}")
            partitions = tuple(
                PartitionInfo(
                    p.partition_index,
                    p.leader_id,
                    p.leader_epoch,
                    tuple(p.replica_nodes),
                    tuple(p.isr_nodes),
                    tuple(p.offline_replicas or ()),
                    p.error_code,
                )
                for p in sorted(topic.partitions, key=lambda p: p.partition_index)
            )
            out.append(TopicDescription(topic.name, partitions, bool(topic.is_internal)))
        return sorted(out, key=lambda t: t.name)

    async def describe_topic(self, topic: str) -> TopicDescription:
        (description,) = await self.describe_topics([topic])
        return description

    async def create_topic(
        self,
        topic: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> None:
        body = create_topics_request(
            topic,
            partitions,
            replication_factor,
            configs,
            timeout_ms=ADMIN_TIMEOUT_MS,
            validate_only=validate_only,
        )
        response = await self.request(CREATE_TOPICS_KEY, body)
        for result in response.topics:
            _check(result.error_code, getattr(result, "error_message", None), topic)

    async def delete_topic(self, topic: str) -> None:
        request: Any = DELETE_TOPICS_REQUEST.cls
        # v6 names topics in `topics` (by name or id), v0-5 in `topic_names`: the encoder writes
        # the one the negotiated version has.
        body = request(
            topics=[request.DeleteTopicState(name=topic)],
            topic_names=[topic],
            timeout_ms=ADMIN_TIMEOUT_MS,
        )
        response = await self.request(DELETE_TOPICS_KEY, body)
        for result in response.responses:
            _check(result.error_code, None, topic)

    async def create_partitions(self, topic: str, total_count: int) -> None:
        request: Any = CREATE_PARTITIONS_REQUEST.cls
        body = request(
            topics=[request.CreatePartitionsTopic(name=topic, count=total_count, assignments=None)],
            timeout_ms=ADMIN_TIMEOUT_MS,
            validate_only=False,
        )
        response = await self.request(CREATE_PARTITIONS_KEY, body)
        for result in response.results:
            _check(result.error_code, result.error_message, topic)

    async def elect_leaders(
        self, election_type: int, partitions: Mapping[str, Sequence[int]] | None
    ) -> dict[tuple[str, int], ErrorCode]:
        """ElectLeaders (0 preferred, 1 unclean) for `partitions` (None: every partition; then
        only the partitions that needed an election are answered): error code per partition."""
        request: Any = ELECT_LEADERS_REQUEST.cls
        body = request(
            election_type=election_type,
            topic_partitions=None
            if partitions is None
            else [
                request.TopicPartitions(topic=t, partitions=list(p)) for t, p in partitions.items()
            ],
            timeout_ms=ADMIN_TIMEOUT_MS,
        )
        response = await self.request(ELECT_LEADERS_KEY, body)
        if response.error_code:
            raise error_for(response.error_code, "ElectLeaders refused")
        return {
            (topic.topic, result.partition_id): ErrorCode(result.error_code)
            for topic in response.replica_election_results
            for result in topic.partition_result
        }

    async def alter_partition_reassignment(
        self, topic: str, partition: int, replicas: Sequence[int] | None
    ) -> None:
        """Move `topic`-`partition` to `replicas` (None: cancel its ongoing reassignment)."""
        request: Any = ALTER_PARTITION_REASSIGNMENTS_REQUEST.cls
        body = request(
            timeout_ms=ADMIN_TIMEOUT_MS,
            topics=[
                request.ReassignableTopic(
                    name=topic,
                    partitions=[
                        request.ReassignablePartition(
                            partition_index=partition,
                            replicas=None if replicas is None else list(replicas),
                        )
                    ],
                )
            ],
        )
        response = await self.request(ALTER_PARTITION_REASSIGNMENTS_KEY, body)
        _check(response.error_code, response.error_message, topic)
        for result in response.responses:
            for item in result.partitions:
                _check(item.error_code, item.error_message, f"{topic}-{partition}")

    async def list_partition_reassignments(
        self,
    ) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
        """Ongoing reassignments: (topic, partition) -> (replicas, adding, removing)."""
        body = LIST_PARTITION_REASSIGNMENTS_REQUEST.cls(timeout_ms=ADMIN_TIMEOUT_MS, topics=None)
        response = await self.request(LIST_PARTITION_REASSIGNMENTS_KEY, body)
        _check(response.error_code, response.error_message, "")
        return {
            (topic.name, p.partition_index): (
                list(p.replicas),
                list(p.adding_replicas),
                list(p.removing_replicas),
            )
            for topic in response.topics
            for p in topic.partitions
        }

    # -- configs --------------------------------------------------------------------------------

    async def describe_topic_configs(self, topic: str) -> list[ConfigEntry]:
        request: Any = DESCRIBE_CONFIGS_REQUEST.cls
        body = request(
            resources=[
                request.DescribeConfigsResource(
                    resource_type=RESOURCE_TOPIC, resource_name=topic, configuration_keys=None
                )
            ],
            include_synonyms=False,
        )
        response = await self.request(DESCRIBE_CONFIGS_KEY, body)
        entries: list[ConfigEntry] = []
        for result in response.results:
            _check(result.error_code, result.error_message, topic)
            for c in result.configs:
                source = getattr(c, "config_source", -1)
                is_default = source == 5 if source != -1 else bool(getattr(c, "is_default", False))
                entries.append(
                    ConfigEntry(c.name, c.value, is_default, c.read_only, c.is_sensitive, source)
                )
        return sorted(entries, key=lambda e: e.name)

    async def alter_topic_configs(
        self,
        topic: str,
        set_configs: Mapping[str, str],
        delete: Iterable[str] = (),
        *,
        validate_only: bool = False,
    ) -> None:
        """IncrementalAlterConfigs: SET each of `set_configs`, DELETE (revert) each of `delete`."""
        request: Any = INCREMENTAL_ALTER_CONFIGS_REQUEST.cls
        resource = request.AlterConfigsResource
        configs = [
            resource.AlterableConfig(name=k, config_operation=OP_SET, value=v)
            for k, v in set_configs.items()
        ] + [
            resource.AlterableConfig(name=k, config_operation=OP_DELETE, value=None) for k in delete
        ]
        body = request(
            resources=[
                resource(resource_type=RESOURCE_TOPIC, resource_name=topic, configs=configs)
            ],
            validate_only=validate_only,
        )
        response = await self.request(INCREMENTAL_ALTER_CONFIGS_KEY, body)
        for result in response.responses:
            _check(result.error_code, result.error_message, topic)

    # -- log dirs -------------------------------------------------------------------------------

    async def describe_log_dirs(
        self, broker: BrokerInfo, topics: Mapping[str, Iterable[int]] | None = None
    ) -> list[LogDirDescription]:
        """`broker`'s log dirs and the replica logs in them (all when `topics` is None, else
        those partitions it has). Bounded by `request_timeout_ms`, connecting included; a
        broker that cannot be reached is a ConnectionFailedError."""
        request: Any = DESCRIBE_LOG_DIRS_REQUEST.cls
        body = request(
            topics=None
            if topics is None
            else [
                request.DescribableLogDirTopic(topic=t, partitions=sorted(set(ps)))
                for t, ps in topics.items()
            ]
        )
        connection: BrokerConnection | None = None
        try:
            with trio.fail_after(self.request_timeout_ms / 1000):
                connection = await self.fetch_client.connections.connected(
                    broker.node_id, broker.host, broker.port
                )
                response = await connection.request(DESCRIBE_LOG_DIRS_KEY, body)
        except (ConnectionFailedError, trio.TooSlowError) as exc:
            if connection is not None:
                connection.close()
            raise ConnectionFailedError(
                f"DescribeLogDirs to broker {broker.node_id} failed: {exc!r}"
            ) from None
        if response.error_code != ErrorCode.NONE:
            raise error_for(response.error_code, f"DescribeLogDirs on broker {broker.node_id}")
        return [
            LogDirDescription(
                result.log_dir,
                result.error_code,
                result.total_bytes,
                result.usable_bytes,
                tuple(
                    ReplicaLogInfo(
                        t.name, p.partition_index, p.partition_size, p.offset_lag, p.is_future_key
                    )
                    for t in result.topics
                    for p in t.partitions
                ),
            )
            for result in response.results
        ]

    # -- offsets --------------------------------------------------------------------------------

    async def high_watermarks(self, topic: str, partitions: Iterable[int]) -> dict[int, int]:
        """{partition: high watermark} (ListOffsets latest); -1 for a partition without leader."""
        client = self.fetch_client
        out: dict[int, int] = {}
        for partition in partitions:
            try:
                out[partition] = await client.latest_offset(topic, partition)
            except KafkaError as exc:
                if exc.error_code != ErrorCode.LEADER_NOT_AVAILABLE:
                    raise
                out[partition] = -1
        return out

    async def log_start_offsets(self, topic: str, partitions: Iterable[int]) -> dict[int, int]:
        client = self.fetch_client
        return {p: await client.earliest_offset(topic, p) for p in partitions}


def raise_for(code: int, what: str) -> None:
    """The Kafka error of `code` (`what`: the request it answered), unless it is NONE."""
    if code != ErrorCode.NONE:
        raise error_for(code, f"{what}: {ErrorCode(code).name}")


def _check(error_code: int, message: str | None, topic: str) -> None:
    if error_code == ErrorCode.NONE:
        return
    if error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
    raise error_for(error_code, message or f"topic {topic!r}")
