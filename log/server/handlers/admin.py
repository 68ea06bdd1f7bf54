"""CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs, IncrementalAlterConfigs (forwarded
to the controller), DescribeConfigs.

Forwarded requests become `quorum.controller` requests; after the controller answers, we wait
(up to the request's timeout_ms) until this broker's own image shows every successful change,
so the client's next Metadata (to any broker that caught up, in particular this one) sees it.
Explicit replica assignments (CreateTopics, CreatePartitions) are checked as Kafka does:
INVALID_REPLICA_ASSIGNMENT for empty, duplicate, unregistered or all-fenced replica lists, or
lists of different lengths; a new partition's ISR is its live replicas, led by the first.

DescribeConfigs, Kafka's sources (ConfigHelper): topic resources list every topic config
LogConfig models (plus any override it does not); each one's synonyms, highest first, are the
topic's override (1 TOPIC_CONFIG), then its broker-level name's layers: this broker's dynamic
value (2 DYNAMIC_BROKER_CONFIG), the cluster default (3 DYNAMIC_DEFAULT_BROKER_CONFIG), the
node's value when its properties set the key (4 STATIC_BROKER_CONFIG), the default (5
DEFAULT_CONFIG); the first gives the entry's source; none is read-only. Broker resources: this
broker's id lists the node's configuration (4 for the keys its properties set, 5 for the rest) under its dynamic
configs (2, then 3), read_only unless Kafka can change the key dynamically; "" lists the
cluster-wide dynamic defaults only (3), as Kafka does. Synonyms when asked (v1+); each config's
type (v3+) and, when asked, documentation (config_types.py).
kafka-python rejects config_source -1: never sent.

AlterConfigs / IncrementalAlterConfigs on BROKER resources (this broker's id, or "" for the
cluster default) are checked here as Kafka's ConfigAdminManager does (INVALID_REQUEST for
another broker's id, a null value, a key that is not dynamic; quorum/broker_configs.py) and
forwarded to the controller, which checks again and stores ConfigRecords.
"""

from __future__ import annotations

import uuid
from typing import Any

from log.common.acl import AclOperation, ResourceType
from log.common.errors import ErrorCode
from log.common.node_config import CONFIG_KEYS
from log.protocol.admin import (
    ALTER_CONFIGS_RESPONSE,
    CREATE_PARTITIONS_RESPONSE,
    CREATE_TOPICS_RESPONSE,
    DELETE_TOPICS_RESPONSE,
    DESCRIBE_CONFIGS_RESPONSE,
    INCREMENTAL_ALTER_CONFIGS_RESPONSE,
)
from log.protocol.connection import Request
from log.server.authorization import allowed, allowed_cluster
from log.server.broker_context import MAX_ADMIN_WAIT_MS, BrokerContext
from log.server.config_types import broker_config_type, topic_config_type
from log.storage.config import default_log_config_properties
from quorum.broker_configs import (
    LIST_BROKER_CONFIGS,
    LOG_CONFIG_SYNONYMS,
    AlterBrokerConfigsRequest,
    broker_configs_error,
    is_dynamic,
    min_isr_change_error,
)
from quorum.controller import (
    IGNORED_TOPIC_CONFIGS,
    AlterConfigsRequest,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    topic_config_error,
)
from quorum.image import MetadataImage

# The response classes are made at run time by schema.py: untyped.
CT: Any = CREATE_TOPICS_RESPONSE.cls
DT: Any = DELETE_TOPICS_RESPONSE.cls
CP: Any = CREATE_PARTITIONS_RESPONSE.cls
DC: Any = DESCRIBE_CONFIGS_RESPONSE.cls
AC: Any = ALTER_CONFIGS_RESPONSE.cls
IAC: Any = INCREMENTAL_ALTER_CONFIGS_RESPONSE.cls

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
TOPIC = ResourceType.TOPIC
SOURCE_TOPIC_CONFIG = 1
SOURCE_DYNAMIC_BROKER_CONFIG = 2
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5
ZERO_UUID = uuid.UUID(int=0)
_NODE_SOURCES = frozenset({SOURCE_STATIC_BROKER_CONFIG, SOURCE_DEFAULT_CONFIG})


def _sensitive(name: str) -> bool:
    """Kafka hides PASSWORD-typed values (any listener prefix): we hide those names."""
    return name.endswith((".password", "sasl.jaas.config"))


async def handle_create_topics(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    refused: dict[str, tuple[int, str]] = {}
    topics = []
    may_create_any = allowed_cluster(ctx, request, AclOperation.CREATE, count=False)
    for t in body.topics:
        if not may_create_any and not allowed(ctx, request, AclOperation.CREATE, TOPIC, t.name):
            refused[t.name] = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "CREATE refused")
            continue  # authorization: CREATE on the cluster or the topic
        configs = {c.name: c.value for c in t.configs if c.value is not None}
        by_index = {a.partition_index: tuple(a.broker_ids) for a in t.assignments}
        if sorted(by_index) != list(range(len(t.assignments))):
            message = "assignments must number the partitions 0..n-1, each once"
            refused[t.name] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)
            continue
        assignments = tuple(by_index[i] for i in range(len(by_index)))
        # The topic's id is drawn here, once per request: the controller client retries an
        # attempt that timed out, and the controller knows a retry of a creation it applied by it.
        topics.append(CreatableTopic(t.name, t.num_partitions, t.replication_factor, configs,
                                     assignments, topic_id=uuid.uuid4()))  # fmt: skip
    results: dict[str, tuple[int, str | None]] = dict(refused)
    outcome: dict[str, Any] = {}  # the controller's result of each topic it decided
    if topics:
        response = await ctx.controller.create_topics(
            CreateTopicsRequest(tuple(topics), validate_only=body.validate_only)
        )
        for result in response.results:
            results[result.name] = (result.error_code, result.error_message)
            outcome[result.name] = result
    created = {
        name: next(t.num_partitions for t in topics if t.name == name)
        for name, (code, _) in results.items()
        if code == ErrorCode.NONE and not body.validate_only
    }

    def visible(image: MetadataImage) -> bool:
        return all(image.topic(name) is not None for name in created)

    if created and not await ctx.wait_until(visible, body.timeout_ms):
        for name in created:
            results[name] = (ErrorCode.REQUEST_TIMED_OUT, "created; not yet visible here")
    answers = []
    image = ctx.image
    for t in body.topics:
        code, error = results.get(t.name, (ErrorCode.UNKNOWN_SERVER_ERROR, None))
        created_with: dict[str, Any] = {}
        if code == ErrorCode.NONE and request.api_version >= 5:  # KIP-525
            decided = outcome[t.name]
            if not body.validate_only and decided.topic_id is not None:
                created_with["topic_id"] = decided.topic_id
            overrides = {c.name: c.value for c in t.configs if c.value is not None}
            created_with.update(
                num_partitions=decided.num_partitions,
                replication_factor=decided.replication_factor,
                configs=[
                    CT.CreatableTopicResult.CreatableTopicConfigs(
                        name=key,
                        value=None if _sensitive(key) else value,
                        read_only=False,  # a topic's configs may all be overridden
                        config_source=source,
                        is_sensitive=_sensitive(key),
                    )
                    for key, value, source, _ in _topic_configs(ctx, image, overrides)
                ],
            )
        answers.append(
            CT.CreatableTopicResult(
                name=t.name, error_code=code, error_message=error, **created_with
            )
        )
    return CT(topics=answers)


async def handle_delete_topics(ctx: BrokerContext, request: Request) -> object:
    """Topics by name (v0-5 `topic_names`, v6 `topics` with a name) or by id (v6), checked as
    Kafka's ControllerApis.deleteTopics does: neither or both given, or one given twice, is
    INVALID_REQUEST; an unknown id UNKNOWN_TOPIC_ID; DELETE on each topic (a topic asked by id
    is named in the refusal only to who may DESCRIBE it)."""
    body = request.body
    image = ctx.image
    refused: list[tuple[str | None, uuid.UUID | None, int, str | None]] = []
    names: dict[str, int] = {}
    ids: dict[uuid.UUID, int] = {}
    if request.api_version >= 6:
        for t in body.topics:
            if t.name is not None and t.topic_id != ZERO_UUID:
                refused.append((t.name, t.topic_id, ErrorCode.INVALID_REQUEST,
                                "You may not specify both topic name and topic id."))  # fmt: skip
            elif t.name is not None:
                names[t.name] = names.get(t.name, 0) + 1
            elif t.topic_id != ZERO_UUID:
                ids[t.topic_id] = ids.get(t.topic_id, 0) + 1
            else:
                refused.append((None, None, ErrorCode.INVALID_REQUEST,
                                "Neither topic name nor id were specified."))  # fmt: skip
    else:
        for name in body.topic_names:
            names[name] = names.get(name, 0) + 1
    for name in [n for n, count in names.items() if count > 1]:
        del names[name]
        refused.append((name, None, ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
    for topic_id in [i for i, count in ids.items() if count > 1]:
        del ids[topic_id]
        refused.append((None, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic id."))
    # authorization: DELETE on each topic
    by_id: list[uuid.UUID] = []
    for topic_id in ids:
        topic = image.topics.get(topic_id)
        if topic is None:
            refused.append((None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, None))
        elif not allowed(ctx, request, AclOperation.DELETE, TOPIC, topic.name):
            describable = allowed(ctx, request, AclOperation.DESCRIBE, TOPIC, topic.name)
            refused.append((topic.name if describable else None, topic_id,
                            ErrorCode.TOPIC_AUTHORIZATION_FAILED, None))  # fmt: skip
        else:
            by_id.append(topic_id)
    by_name: list[str] = []
    for name in names:
        if not allowed(ctx, request, AclOperation.DELETE, TOPIC, name):
            refused.append((name, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None))
        elif image.topic_ids_by_name.get(name) in by_id:
            refused.append((name, image.topic_ids_by_name[name], ErrorCode.INVALID_REQUEST,
                            "The provided topic name maps to an ID that was already supplied."))  # fmt: skip
        else:
            by_name.append(name)
    # The request's id is drawn here, once: the controller client retries an attempt that timed
    # out, and the controller knows a retry of a deletion it applied by it.
    response = await ctx.controller.delete_topics(
        DeleteTopicsRequest(tuple(by_name), tuple(by_id), request_id=uuid.uuid4())
    )
    # A topic the controller deleted always has its id in the result (names are resolved); by
    # id, since a retry's answer may name a topic that has been created again since.
    deleted = {
        r.topic_id
        for r in response.results
        if r.error_code == ErrorCode.NONE and r.topic_id is not None
    }

    def gone(image: MetadataImage) -> bool:
        return all(topic_id not in image.topics for topic_id in deleted)

    timed_out = bool(deleted) and not await ctx.wait_until(gone, body.timeout_ms)
    answers = [
        (r.name, r.topic_id,
         ErrorCode.REQUEST_TIMED_OUT if timed_out and r.topic_id in deleted else r.error_code,
         None)
        for r in response.results
    ] + refused  # fmt: skip
    return DT(
        responses=[
            DT.DeletableTopicResult(
                name=name if name is not None or request.api_version >= 6 else "",
                topic_id=ZERO_UUID if topic_id is None else topic_id,
                error_code=code,
                error_message=message,
            )
            for name, topic_id, code, message in answers
        ]
    )


async def handle_create_partitions(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    wanted = tuple(
        CreatePartitionsTopic(
            t.name,
            t.count,
            None if t.assignments is None else tuple(tuple(a.broker_ids) for a in t.assignments),
        )
        for t in body.topics
        if allowed(ctx, request, AclOperation.ALTER, TOPIC, t.name)  # authorization
    )
    results: dict[str, tuple[int, str | None]] = {
        t.name: (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "ALTER refused")
        for t in body.topics
        if t.name not in {w.name for w in wanted}
    }
    if wanted:
        # Drawn once per request, as DeleteTopics' is: the controller knows a retry by it.
        response = await ctx.controller.create_partitions(
            CreatePartitionsRequest(wanted, body.validate_only, request_id=uuid.uuid4())
        )
        for r in response.results:
            results[r.name] = (r.error_code, r.error_message)
    grown = {
        t.name: t.count
        for t in wanted
        if results[t.name][0] == ErrorCode.NONE and not body.validate_only
    }

    def visible(image: MetadataImage) -> bool:
        for name, count in grown.items():
            topic = image.topic(name)
            if topic is None or len(topic.partitions) < count:
                return False
        return True

    if grown and not await ctx.wait_until(visible, body.timeout_ms):
        for name in grown:
            results[name] = (ErrorCode.REQUEST_TIMED_OUT, "created; not yet visible here")
    return CP(
        results=[
            CP.CreatePartitionsTopicResult(
                name=t.name, error_code=results[t.name][0], error_message=results[t.name][1]
            )
            for t in body.topics
        ]
    )


def _config_entry(
    name: str,
    value: str | None,
    source: int,
    version: int,
    read_only: bool = False,
    synonyms: list[tuple[str, str | None, int]] | None = None,
    broker: bool = False,
    documentation: bool = False,
) -> object:
    """One described config; `synonyms` are (name, value, source), highest precedence first;
    `broker`: a broker config (else a topic's); `documentation`: with its doc (v3+). A topic's
    configs are never read-only (Kafka's ConfigHelper: any of them may be overridden)."""
    sensitive = _sensitive(name)
    config_type, doc = broker_config_type(name, sensitive) if broker else topic_config_type(name)
    return DC.DescribeConfigsResourceResult(
        name=name,
        value=None if sensitive else value,
        read_only=read_only,
        config_source=source,
        is_default=source == SOURCE_DEFAULT_CONFIG,
        is_sensitive=sensitive,
        synonyms=[
            DC.DescribeConfigsSynonym(name=n, value=None if _sensitive(n) else v, source=s)
            for n, v, s in synonyms or ()
        ],
        config_type=config_type,
        documentation=doc if documentation else None,
    )


TopicConfig = tuple[str, str | None, int, list[tuple[str, str | None, int]]]


def _topic_configs(ctx: BrokerContext, image: MetadataImage, overrides: dict[str, str]
                   ) -> list[TopicConfig]:  # fmt: skip
    """Kafka's ConfigHelper.createTopicConfigEntry for a topic with `overrides`: each config's
    (name, value, source, synonyms); the synonyms are the override, then its broker-level
    name's layers (this broker's dynamic value, the cluster default, the node's static value
    when its properties set it, the default), and the first gives the source."""
    defaults = default_log_config_properties(ctx.config)
    broker_names = {topic_key: broker_key for broker_key, topic_key in LOG_CONFIG_SYNONYMS.items()}
    configs: list[TopicConfig] = []
    for key in sorted(set(defaults) | set(overrides)):
        synonyms: list[tuple[str, str | None, int]] = []
        if key in overrides:
            synonyms.append((key, overrides[key], SOURCE_TOPIC_CONFIG))
        broker_key = broker_names.get(key)
        if broker_key is not None:
            for broker, source in ((str(ctx.node_id), SOURCE_DYNAMIC_BROKER_CONFIG),
                                   ("", SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG)):  # fmt: skip
                value = image.broker_configs(broker).get(broker_key)
                if value is not None:
                    synonyms.append((broker_key, value, source))
        if broker_key is not None and broker_key in ctx.config.props:
            if broker_key in ctx.config.explicit:
                static = _node_value(ctx.config.props[broker_key])
                synonyms.append((broker_key, static, SOURCE_STATIC_BROKER_CONFIG))
            default = next(k.default for k in CONFIG_KEYS if k.name == broker_key)
            synonyms.append((broker_key, _node_value(default), SOURCE_DEFAULT_CONFIG))
        elif key in defaults:  # no node key behind it: Kafka's default
            synonyms.append((key, defaults[key], SOURCE_DEFAULT_CONFIG))
        source = synonyms[0][2]
        # the node-derived value as the log uses it (flush.* -1 is Long.MAX_VALUE, ...)
        value = defaults[key] if source in _NODE_SOURCES else synonyms[0][1]
        configs.append((key, value, source, synonyms))
    return configs


def _describe_topic(
    ctx: BrokerContext,
    image: MetadataImage,
    resource,  # noqa: ANN001
    version: int,
    include_synonyms: bool,
    include_documentation: bool,
) -> object:
    name = resource.resource_name
    if image.topic(name) is None:
        return DC.DescribeConfigsResult(
            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            error_message=f"topic {name!r} does not exist",
            resource_type=resource.resource_type,
            resource_name=name,
            configs=[],
        )
    keys = resource.configuration_keys
    synonyms_too = include_synonyms and version >= 1
    return DC.DescribeConfigsResult(
        error_code=0,
        resource_type=resource.resource_type,
        resource_name=name,
        configs=[
            _config_entry(
                key,
                value,
                source,
                version,
                synonyms=synonyms if synonyms_too else None,
                documentation=include_documentation,
            )
            for key, value, source, synonyms in _topic_configs(
                ctx, image, dict(image.topic_configs(name))
            )
            if keys is None or key in keys
        ],  # fmt: skip
    )


def _node_value(value: object) -> str | None:
    if value is None:
        return None
    return str(value).lower() if isinstance(value, bool) else str(value)


def _describe_broker(
    ctx: BrokerContext,
    image: MetadataImage,
    resource,  # noqa: ANN001
    version: int,
    include_synonyms: bool,
    include_documentation: bool,
) -> object:
    name = resource.resource_name
    if name not in ("", str(ctx.node_id)):
        return DC.DescribeConfigsResult(
            error_code=ErrorCode.INVALID_REQUEST,
            error_message=(
                f"Unexpected broker id, expected {ctx.node_id} or empty string, but received {name}"
            ),
            resource_type=resource.resource_type,
            resource_name=name,
            configs=[],
        )
    # key -> [(key, value, source)], highest precedence first
    layers: dict[str, list[tuple[str, str | None, int]]] = {}
    if name:  # this broker: its own dynamic configs over the cluster's over its static ones
        for key, value in image.broker_configs(name).items():
            layers.setdefault(key, []).append((key, value, SOURCE_DYNAMIC_BROKER_CONFIG))
    for key, value in image.broker_configs("").items():
        layers.setdefault(key, []).append((key, value, SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG))
    if name:  # the node's properties: what they set is static, the rest Kafka's defaults
        for key, static in ctx.config.props.items():
            source = (SOURCE_STATIC_BROKER_CONFIG if key in ctx.config.explicit
                      else SOURCE_DEFAULT_CONFIG)  # fmt: skip
            layers.setdefault(key, []).append((key, _node_value(static), source))
    keys = resource.configuration_keys
    configs = [
        _config_entry(
            key,
            synonyms[0][1],
            synonyms[0][2],
            version,
            read_only=not is_dynamic(key),
            synonyms=synonyms if include_synonyms and version >= 1 else None,
            broker=True,
            documentation=include_documentation,
        )
        for key, synonyms in sorted(layers.items())
        if keys is None or key in keys
    ]
    return DC.DescribeConfigsResult(
        error_code=0,
        resource_type=resource.resource_type,
        resource_name=name,
        configs=configs,
    )


async def handle_describe_configs(ctx: BrokerContext, request: Request) -> object:
    image = ctx.image
    results = []
    for resource in request.body.resources:
        refusal = _config_refusal(ctx, request, resource, AclOperation.DESCRIBE_CONFIGS)
        if refusal is not None:
            results.append(DC.DescribeConfigsResult(
                error_code=refusal, error_message="DESCRIBE_CONFIGS refused",
                resource_type=resource.resource_type, resource_name=resource.resource_name,
                configs=[],
            ))  # fmt: skip
        elif resource.resource_type == RESOURCE_TOPIC:
            results.append(_describe_topic(
                ctx, image, resource, request.api_version, request.body.include_synonyms,
                request.body.include_documentation,
            ))  # fmt: skip
        elif resource.resource_type == RESOURCE_BROKER:
            results.append(_describe_broker(
                ctx, image, resource, request.api_version, request.body.include_synonyms,
                request.body.include_documentation,
            ))  # fmt: skip
        else:
            results.append(
                DC.DescribeConfigsResult(
                    error_code=ErrorCode.INVALID_REQUEST,
                    error_message=f"resource type {resource.resource_type} is not supported",
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    configs=[],
                )
            )
    return DC(results=results)


def _config_refusal(
    ctx: BrokerContext, request: Request, resource: Any, operation: AclOperation
) -> ErrorCode | None:
    """Authorization of a config resource: the topic's, or the cluster's for a broker."""
    if resource.resource_type == RESOURCE_TOPIC:
        if not allowed(ctx, request, operation, TOPIC, resource.resource_name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    elif resource.resource_type == RESOURCE_BROKER and not allowed_cluster(ctx, request, operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return None


# -- AlterConfigs / IncrementalAlterConfigs (topic resources, forwarded) ------------------------

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3  # IncrementalAlterConfigs operations
# Kafka's LIST-type topic configs: the only ones APPEND/SUBTRACT apply to
LIST_TOPIC_CONFIGS = frozenset(
    {"cleanup.policy", "leader.replication.throttled.replicas",
     "follower.replication.throttled.replicas"}
)  # fmt: skip


def _merged_list(current: str, values: str | None, operation: int) -> str:
    """APPEND/SUBTRACT `values` to/from `current`, both comma-separated lists: appended items
    not already there, subtracted ones removed."""
    items = [item.strip() for item in current.split(",") if item.strip()]
    given = [item.strip() for item in (values or "").split(",") if item.strip()]
    if operation == OP_APPEND:
        items += [item for item in dict.fromkeys(given) if item not in items]
    else:
        items = [item for item in items if item not in given]
    return ",".join(items)


def _list_change(
    ctx: BrokerContext, topic: str, key: str, values: str | None, operation: int
) -> str:
    """APPEND/SUBTRACT as Kafka applies them: to the topic's value, else the node's default,
    as a comma-separated list (appended items not already there; subtracted ones removed)."""
    current = ctx.image.topic_configs(topic).get(key)
    if current is None:
        current = default_log_config_properties(ctx.config).get(key, "")
    return _merged_list(current, values, operation)


async def _alter_topic(
    ctx: BrokerContext, name: str, changes: dict[str, str | None], validate_only: bool
) -> tuple[ErrorCode, str | None]:
    """Forward one topic's changes; wait until the local image shows them."""
    if validate_only:
        for key, value in changes.items():
            error = topic_config_error(key, value)
            if error:
                return ErrorCode.INVALID_CONFIG, error
        if ctx.image.topic(name) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        return ErrorCode.NONE, None
    response = await ctx.controller.alter_topic_configs(AlterConfigsRequest(name, changes))
    if response.error_code != ErrorCode.NONE:
        return response.error_code, response.error_message

    def applied(image: MetadataImage) -> bool:
        configs = image.topic_configs(name)
        return all(
            configs.get(k) == v for k, v in changes.items() if k not in IGNORED_TOPIC_CONFIGS
        )

    if not await ctx.wait_until(applied, MAX_ADMIN_WAIT_MS):
        return ErrorCode.REQUEST_TIMED_OUT, "altered; not yet visible here"
    return ErrorCode.NONE, None


def _broker_name_error(ctx: BrokerContext, name: str) -> str | None:
    """Kafka's validateResourceNameIsCurrentNodeId: "" (the cluster default) or our own id."""
    if not name:
        return None
    try:
        broker_id = int(name)
    except ValueError:
        return f"Node id must be an integer, but it is: {name}"
    if broker_id != ctx.node_id:
        return f"Unexpected broker id, expected {ctx.node_id}, but received {name}"
    return None


def _broker_list_change(
    ctx: BrokerContext, broker: str, key: str, values: str | None, operation: int
) -> str:
    """APPEND/SUBTRACT on a list-type broker config: to the resource's dynamic value, else
    the node's own (static) value."""
    current = ctx.image.broker_configs(broker).get(key)
    if current is None:
        current = _node_value(ctx.config.props.get(key)) or ""
    return _merged_list(current, values, operation)


async def _alter_broker(
    ctx: BrokerContext, broker: str, changes: dict[str, str | None], validate_only: bool
) -> tuple[ErrorCode, str | None]:
    """Check one BROKER resource's changes as Kafka's broker does, forward them to the
    controller, and wait until the local image shows them."""
    error = _broker_name_error(ctx, broker) or broker_configs_error(broker, changes)
    if error:
        return ErrorCode.INVALID_REQUEST, error
    error = min_isr_change_error(broker, changes)  # the controller's check, for validate_only
    if error:
        return ErrorCode.INVALID_CONFIG, error
    if validate_only:
        return ErrorCode.NONE, None
    response = await ctx.controller.alter_broker_configs(AlterBrokerConfigsRequest(broker, changes))
    if response.error_code != ErrorCode.NONE:
        return response.error_code, response.error_message

    def applied(image: MetadataImage) -> bool:
        configs = image.broker_configs(broker)
        return all(configs.get(k) == v for k, v in changes.items())

    if not await ctx.wait_until(applied, MAX_ADMIN_WAIT_MS):
        return ErrorCode.REQUEST_TIMED_OUT, "altered; not yet visible here"
    return ErrorCode.NONE, None


def _alter_result(cls: type, resource, code: int, message: str | None) -> object:  # noqa: ANN001
    return cls(
        error_code=code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )


async def handle_alter_configs(ctx: BrokerContext, request: Request) -> object:
    """Kafka's AlterConfigs replaces a resource's whole override set: keys not given revert."""
    body = request.body
    responses = []
    for resource in body.resources:
        message: str | None
        refusal = _config_refusal(ctx, request, resource, AclOperation.ALTER_CONFIGS)
        if refusal is not None:
            code, message = refusal, "ALTER_CONFIGS refused"
        elif resource.resource_type == RESOURCE_BROKER:
            nulls = [c.name for c in resource.configs if c.value is None]
            if nulls:
                code, message = (
                    ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}"
                )  # fmt: skip
            else:
                replaced: dict[str, str | None] = {c.name: c.value for c in resource.configs}
                name = resource.resource_name
                for key in ctx.image.broker_configs(name):  # the whole set is replaced
                    replaced.setdefault(key, None)
                code, message = await _alter_broker(ctx, name, replaced, body.validate_only)
        elif resource.resource_type != RESOURCE_TOPIC:
            code, message = (
                ErrorCode.INVALID_REQUEST,
                "only topic and broker configs can be altered",
            )
        else:
            changes: dict[str, str | None] = {c.name: c.value for c in resource.configs}
            for key in ctx.image.topic_configs(resource.resource_name):
                changes.setdefault(key, None)
            code, message = await _alter_topic(
                ctx, resource.resource_name, changes, body.validate_only
            )
        responses.append(_alter_result(AC.AlterConfigsResourceResponse, resource, code, message))
    return AC(responses=responses)


async def handle_incremental_alter_configs(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    responses = []
    for resource in body.resources:
        code, message = ErrorCode.NONE, None
        changes: dict[str, str | None] = {}
        broker = resource.resource_type == RESOURCE_BROKER
        if resource.resource_type not in (RESOURCE_TOPIC, RESOURCE_BROKER):
            code, message = (
                ErrorCode.INVALID_REQUEST,
                "only topic and broker configs can be altered",
            )
        for c in resource.configs:
            if c.config_operation != OP_DELETE and c.value is None and code == ErrorCode.NONE:
                code, message = (
                    ErrorCode.INVALID_REQUEST,
                    f"Null value not supported for : {c.name}",
                )
            elif c.config_operation == OP_SET:
                changes[c.name] = c.value
            elif c.config_operation == OP_DELETE:
                changes[c.name] = None
            elif c.config_operation not in (OP_APPEND, OP_SUBTRACT):
                code, message = ErrorCode.INVALID_REQUEST, f"unknown operation {c.config_operation}"
            elif c.name not in (LIST_BROKER_CONFIGS if broker else LIST_TOPIC_CONFIGS):
                verb = "append" if c.config_operation == OP_APPEND else "subtract"
                code, message = (
                    ErrorCode.INVALID_CONFIG,
                    (f"Config value {verb} is not allowed for config key: {c.name}"),
                )
            elif code == ErrorCode.NONE:
                change = _broker_list_change if broker else _list_change
                changes[c.name] = change(
                    ctx, resource.resource_name, c.name, c.value, c.config_operation
                )
        refusal = _config_refusal(ctx, request, resource, AclOperation.ALTER_CONFIGS)
        if refusal is not None:
            code, message = refusal, "ALTER_CONFIGS refused"
        alter = _alter_broker if broker else _alter_topic
        if code == ErrorCode.NONE:
            code, message = await alter(ctx, resource.resource_name, changes, body.validate_only)
        responses.append(_alter_result(IAC.AlterConfigsResourceResponse, resource, code, message))
    return IAC(responses=responses)
