"""ApiVersions, Metadata, DescribeCluster: what clients learn about the cluster.

Metadata lists the unfenced brokers with their endpoint on the listener the client connected
to (Kafka's rule: a client on SASL_SSL://...:9094 is told every broker's SASL_SSL endpoint), and each requested topic's
partitions (leader, leader_epoch, replicas, isr, offline replicas = replicas not live). An
unknown topic is auto-created (when `auto.create.topics.enable` and the request allows it)
through the controller, and answered LEADER_NOT_AVAILABLE as Kafka does; clients retry.
v10+ answers each topic's id (KIP-516) and takes topics by id too (name null): an id nobody
knows is answered UNKNOWN_TOPIC_ID; topics are auto-created by name only.

Around a broker's death (log/server/broker_failure_view.py) Metadata departs from that, so
that clients move to the new leader at once: an answer about partitions led by a broker this
node's fetchers just lost waits (up to broker.disconnect.fence.ms + 2 s) for the image that
elects their new leader, and a broker this node saw fenced is still listed in the first
answer on each connection (within broker.session.timeout.ms). With every broker fenced,
every registered one is listed: never none.

controller_id: clients (kafka-python's admin) send CreateTopics to it, so it must be a broker
in the list. KRaft brokers answer a live broker there too; we answer the active controller's
id when it is also a live broker (combined nodes), else this broker. DescribeCluster lists the
unfenced brokers; v2 (KIP-1073) with include_fenced_brokers lists every registered one, each with
is_fenced.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from log.common.acl import CLUSTER_NAME, AclOperation, ResourceType
from log.common.errors import ErrorCode, KafkaError
from log.protocol.admin import DESCRIBE_CLUSTER_RESPONSE
from log.protocol.apis import Features, api_versions_body
from log.protocol.connection import Request
from log.protocol.metadata import METADATA_RESPONSE
from log.server.authorization import allowed, allowed_cluster, authorized_operations
from log.server.broker_context import BrokerContext
from log.server.broker_failure_view import listener_endpoints
from quorum.controller import CreatableTopic, CreateTopicsRequest
from quorum.features import SUPPORTED
from quorum.image import MetadataImage, topic_name_error
from quorum.records import NO_LEADER

logger = logging.getLogger(__name__)

M: Any = METADATA_RESPONSE.cls  # made at run time by schema.py: untyped
DESCRIBE, CREATE, TOPIC = AclOperation.DESCRIBE, AclOperation.CREATE, ResourceType.TOPIC
LISTENER = "PLAINTEXT"  # the listener of a request that did not come through KafkaServer


def listener_of(request: Request) -> str:
    """The listener name `request` arrived on (set by the broker's connection loop)."""
    return request.connection_state.get("listener", LISTENER)


async def handle_api_versions(ctx: BrokerContext, request: Request) -> object:
    """Our API ranges and (v3+) the features: those we support, and the levels the metadata
    log finalized (quorum/features.py), valid as of the image's metadata offset."""
    legacy = ctx.config.props["quorumlog.legacy.request.versions"]
    image = ctx.replica_manager.sync()
    features = Features(SUPPORTED, image.features, image.last_offset)
    return api_versions_body(
        ctx.advertised_api_keys, legacy=legacy, features=features, version=request.api_version
    )


def live_brokers(
    image: MetadataImage, listener: str = LISTENER
) -> list[tuple[int, str, int, str | None]]:
    """(broker_id, host, port, rack) of every unfenced broker with an endpoint on `listener`."""
    brokers = []
    for broker_id in image.live_broker_ids():
        brokers.extend(listener_endpoints(broker_id, image.brokers[broker_id], listener))
    return brokers


def visible_controller_id(ctx: BrokerContext, image: MetadataImage) -> int:
    return image.controller_id if image.is_live(image.controller_id) else ctx.node_id


# The topic entries of the newest image asked about: (image, name -> entry). An entry depends
# on nothing but the image (immutable; every change makes a new one), so clients refreshing the
# same topics share one, made once per image, not per request: a Metadata request for a
# 1,000-partition topic took 17.6-18.9 ms of a node's CPU on a 2-core box, 5-8.5 ms with it
# (encoding the answer is most of what is left; every Spark task asks for its topic).
_topic_entries: tuple[MetadataImage | None, dict[str, object]] = (None, {})


def _cached_topic_metadata(image: MetadataImage, name: str) -> object:
    global _topic_entries
    entries = _topic_entries
    if entries[0] is not image:
        entries = _topic_entries = (image, {})  # one pair: a racing thread keeps its own
    entry = entries[1].get(name)
    if entry is None:
        entry = entries[1][name] = _topic_metadata(image, name)
    return entry


def _topic_metadata(image: MetadataImage, name: str) -> object:
    topic = image.topic(name)
    assert topic is not None
    partitions = []
    for index in sorted(topic.partitions):
        state = topic.partitions[index]
        partitions.append(
            M.MetadataResponsePartition(
                error_code=ErrorCode.LEADER_NOT_AVAILABLE if state.leader == NO_LEADER else 0,
                partition_index=index,
                leader_id=state.leader,
                leader_epoch=state.leader_epoch,
                replica_nodes=list(state.replicas),
                isr_nodes=list(state.isr),
                offline_replicas=[b for b in state.replicas if not image.is_live(b)],
            )
        )
    return M.MetadataResponseTopic(
        error_code=0, name=name, topic_id=topic.topic_id, is_internal=name.startswith("__"),
        partitions=partitions,
    )  # fmt: skip


async def _auto_create(ctx: BrokerContext, names: list[str]) -> dict[str, ErrorCode]:
    """Ask the controller to create `names` with the node's defaults; error code per name."""
    request = CreateTopicsRequest(
        tuple(
            CreatableTopic(
                name,
                ctx.config.props["num.partitions"],
                ctx.config.props["default.replication.factor"],
            )
            for name in names
        )
    )
    try:
        response = await ctx.controller.create_topics(request)
    except KafkaError as exc:
        logger.warning("auto-creating %s failed: %r", names, exc)
        return {name: ErrorCode.LEADER_NOT_AVAILABLE for name in names}
    codes: dict[str, ErrorCode] = {}
    for result in response.results:
        code = result.error_code
        if code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            code = ErrorCode.LEADER_NOT_AVAILABLE
        codes[result.name] = code
    return codes


async def _await_new_leaders(ctx: BrokerContext, image: MetadataImage, body: Any) -> MetadataImage:
    """The image to answer from: a newer one where a partition asked about is led by a broker
    this node's fetchers just lost (BrokerContext.await_new_leaders). The names asked by id
    are resolved only while a broker is lost: the usual answer pays nothing for this."""
    if body.topics is None:
        return await ctx.await_new_leaders(image)
    names = (
        t.name if t.name is not None else image.topics[t.topic_id].name
        for t in body.topics
        if t.name is not None or t.topic_id in image.topics
    )
    return await ctx.await_new_leaders(image, names)


async def handle_metadata(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    image = await _await_new_leaders(ctx, ctx.replica_manager.sync(), body)
    unknown_ids: list = []  # v10+: topics asked by an id nobody knows
    if body.topics is None:
        names = sorted(image.topic_ids_by_name)
    else:
        names = []
        for t in body.topics:
            if t.name is not None:
                names.append(t.name)
            elif t.topic_id in image.topics:
                names.append(image.topics[t.topic_id].name)
            else:
                unknown_ids.append(t.topic_id)
        names = list(dict.fromkeys(names))
    errors: dict[str, int] = {}
    # -- authorization: unauthorized topics are left out of a listing of all topics and
    # answered TOPIC_AUTHORIZATION_FAILED when named; auto-creating needs CREATE on the
    # cluster or the topic (Kafka's KafkaApis.handleTopicMetadataRequest) ------------------
    may_describe = {n: allowed(ctx, request, DESCRIBE, TOPIC, n, count=body.topics is not None)
                    for n in names}  # fmt: skip
    if body.topics is None:
        names = [n for n in names if may_describe[n]]
    errors.update((n, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for n in names if not may_describe[n])
    # -- end authorization ---------------------------------------------------------------
    missing = [n for n in names if image.topic(n) is None and n not in errors]
    creatable = []
    for name in missing:
        if topic_name_error(name) is not None:
            errors[name] = ErrorCode.INVALID_TOPIC_EXCEPTION
        elif ctx.config.props["auto.create.topics.enable"] and body.allow_auto_topic_creation:
            if not (allowed_cluster(ctx, request, CREATE, count=False)
                    or allowed(ctx, request, CREATE, TOPIC, name)):  # fmt: skip
                errors[name] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            creatable.append(name)
        else:
            errors[name] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if creatable:
        errors.update(await _auto_create(ctx, creatable))
    topics = []
    for name in names:
        if name in errors or image.topic(name) is None:
            code = errors.get(name, ErrorCode.LEADER_NOT_AVAILABLE)
            topics.append(M.MetadataResponseTopic(error_code=code, name=name, partitions=[]))
        else:
            topics.append(_cached_topic_metadata(image, name))
    for topic_id in dict.fromkeys(unknown_ids):
        topics.append(M.MetadataResponseTopic(
            error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=topic_id, partitions=[]
        ))  # fmt: skip
    # KIP-430: what the caller may do, when asked (v8+)
    if getattr(body, "include_topic_authorized_operations", False):
        topics = [
            dataclasses.replace(t, topic_authorized_operations=authorized_operations(
                ctx, request, TOPIC, t.name)) if t.error_code == 0 else t
            for t in topics
        ]  # fmt: skip
    cluster_operations = -2147483648  # INT32 min: not asked
    if getattr(body, "include_cluster_authorized_operations", False):
        cluster_operations = authorized_operations(ctx, request, ResourceType.CLUSTER,
                                                   CLUSTER_NAME)  # fmt: skip
    return M(
        brokers=[
            M.MetadataResponseBroker(node_id=b, host=host, port=port, rack=rack)
            for b, host, port, rack in ctx.broker_failure_view.listed_brokers(
                image, listener_of(request), ctx.clock_ms(), request.connection_state
            )
        ],
        cluster_id=ctx.cluster_id,
        controller_id=visible_controller_id(ctx, image),
        topics=topics,
        cluster_authorized_operations=cluster_operations,
    )


async def handle_describe_cluster(ctx: BrokerContext, request: Request) -> object:
    image = ctx.image
    D: Any = DESCRIBE_CLUSTER_RESPONSE.cls  # made at run time by schema.py: untyped
    cluster_operations = -2147483648  # INT32 min: not asked
    if request.body.include_cluster_authorized_operations:  # KIP-430
        cluster_operations = authorized_operations(ctx, request, ResourceType.CLUSTER,
                                                   CLUSTER_NAME)  # fmt: skip
    listener = listener_of(request)
    if request.api_version >= 2 and request.body.include_fenced_brokers:  # KIP-1073
        brokers = [
            D.DescribeClusterBroker(broker_id=registration.broker_id, host=endpoint.host,
                                    port=endpoint.port, rack=registration.rack,
                                    is_fenced=registration.fenced)
            for _, registration in sorted(image.brokers.items())
            for endpoint in registration.endpoints
            if endpoint.name == listener
        ]  # fmt: skip
    else:
        brokers = [
            D.DescribeClusterBroker(broker_id=b, host=host, port=port, rack=rack)
            for b, host, port, rack in live_brokers(image, listener)
        ]
    return D(
        error_code=0,
        cluster_authorized_operations=cluster_operations,
        cluster_id=ctx.cluster_id,
        controller_id=visible_controller_id(ctx, image),
        brokers=brokers,
    )
