"""Produce: append each partition's record batch as leader; answer per partition.

The work is the ReplicaManager's (`append_records`, Kafka's ReplicaManager.appendRecords):
per partition, unknown topic/partition -> UNKNOWN_TOPIC_OR_PARTITION; not the leader ->
NOT_LEADER_OR_FOLLOWER; acks=-1 with ISR size < min.insync.replicas -> NOT_ENOUGH_REPLICAS
(nothing appended); then `UnifiedLog.append_as_leader` on the received memoryview (header + CRC
only, records never decoded): CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE,
INVALID_RECORD, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH come back as that
partition's error; an idempotent retry answers the original offsets. A failure affects only
its partition. acks=-1 then waits until the high watermark passes the appended batch
(`ReplicaManager.await_high_watermark`): NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR
fell below min.insync.replicas meanwhile, NOT_LEADER_OR_FOLLOWER when leadership moved,
REQUEST_TIMED_OUT after the request's timeout_ms.

Transactional batches are verified first (KIP-890 part 1): the first batch of a transaction on
a partition is appended only once the transaction coordinator confirmed the partition is in the
transaction (INVALID_TXN_STATE if not; NOT_ENOUGH_REPLICAS when it could not be asked, which
clients retry); see log/coordinator/add_partitions_to_txn_manager.py.

Two steps: `append_produce` verifies (transactional batches, above) and appends, in the
connection's arrival order (so an idempotent producer's pipelined batches stay in sequence
order), and `complete_produce` waits for acks=-1 and builds the answer; broker.py lets a connection's next requests be read and appended while
an acks=-1 answer waits (the answers still go out in request order), `handle_produce` does
both steps in one.

This handler adds what is Produce's own: acks outside {-1, 0, 1} -> INVALID_REQUIRED_ACKS for
every partition; NOT_LEADER_OR_FOLLOWER answers (v10+, KIP-951) carry the partition's current
leader and epoch from this broker's image, and that leader's endpoint in node_endpoints, so the
client retries there without a metadata request. v13+ names topics by id (KIP-516): resolved
through this broker's image; an id it does not know is UNKNOWN_TOPIC_ID for its partitions,
before any authorization (as Kafka's KafkaApis), and the answer names topics by the ids asked.
acks=0 gets no response; broker.py closes the
connection when such a request had an error (Kafka does, so the client refreshes its metadata).
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from log.common.acl import AclOperation, ResourceType
from log.common.errors import (
    ErrorCode,
)
from log.protocol.connection import Request
from log.protocol.produce import PRODUCE_RESPONSE
from log.replication.replica_manager import AppendResult
from log.server.authorization import allowed
from log.server.broker_context import BrokerContext
from log.server.handlers.leader_hints import LeaderHints
from log.server.handlers.metadata import listener_of

R = PRODUCE_RESPONSE.cls


async def handle_produce(ctx: BrokerContext, request: Request) -> object:
    return await complete_produce(ctx, request, await append_produce(ctx, request))


async def append_produce(ctx: BrokerContext, request: Request) -> list[AppendResult]:
    """Authorize and append each partition's batch now; one result per partition, in the
    request's order (acks=-1 ones still to be acknowledged: `complete_produce`)."""
    body = request.body
    acks = body.acks
    entries = _entries(ctx, request)
    # -- authorization: WRITE on each topic (and the transactional id) ------------------
    refused = _refusals(ctx, request, entries)
    entries_allowed = [entry for entry, code in zip(entries, refused, strict=True) if not code]
    # -- end authorization -------------------------------------------------------------------
    if acks in (-1, 0, 1):
        # A partition led by a broker this node's fetchers just lost: wait for its new leader
        # (perhaps us) rather than answer NOT_LEADER naming the dead one (broker_failure_view.py)
        named = ((topic, index) for topic, index, _ in entries_allowed if topic is not None)
        await ctx.await_new_leaders(ctx.replica_manager.sync(), partitions=named)
        appended = await _verify_and_append(ctx, request, acks, entries_allowed)
    else:
        appended = [AppendResult(ErrorCode.INVALID_REQUIRED_ACKS, None)] * len(entries_allowed)
    appended_iter = iter(appended)
    return [AppendResult(code, None) if code else next(appended_iter) for code in refused]


async def complete_produce(
    ctx: BrokerContext, request: Request, results: list[AppendResult]
) -> object:
    """acks=-1: wait until the high watermark passes each appended batch; the response."""
    await ctx.replica_manager.await_acks(results, request.body.timeout_ms)
    with_hints = request.api_version >= 10
    by_id = request.api_version >= 13
    entries = _entries(ctx, request)
    topic_ids = _topic_ids(request.body) if by_id else []
    hints = LeaderHints(
        ctx.replica_manager.sync(), R.PartitionProduceResponse.LeaderIdAndEpoch, R.NodeEndpoint
    )
    hints.listener = listener_of(request)
    by_topic: dict[Any, list] = {}  # by name, v13+ by the topic id asked
    for position, ((topic, index, _), result) in enumerate(zip(entries, results, strict=True)):
        info = result.info
        hint = hints.no_hint
        if with_hints and result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            hint = hints.current_leader(topic, index)
        key = topic_ids[position] if by_id else topic
        by_topic.setdefault(key, []).append(
            R.PartitionProduceResponse(
                index=index,
                error_code=result.error_code,
                base_offset=info.first_offset if info is not None else -1,
                log_append_time_ms=info.log_append_time_ms if info is not None else -1,
                log_start_offset=info.log_start_offset if info is not None else -1,
                error_message=result.message,
                current_leader=hint,
            )
        )
    if by_id:
        responses = [
            R.TopicProduceResponse(topic_id=topic_id, partition_responses=partitions)
            for topic_id, partitions in by_topic.items()
        ]
    else:
        responses = [
            R.TopicProduceResponse(name=name, partition_responses=partitions)
            for name, partitions in by_topic.items()
        ]
    return R(
        responses=responses,
        node_endpoints=hints.node_endpoints(),
    )


async def _verify_and_append(
    ctx: BrokerContext, request: Request, acks: int, entries: list[Any]
) -> list[AppendResult]:
    """Transaction verification (KIP-890 part 1, add_partitions_to_txn_manager.py), then the
    append of the entries that passed, with their verification guards."""
    verification = await ctx.add_partitions_to_txn_manager.verify_produce(
        getattr(request.body, "transactional_id", None), entries, request.api_version
    )
    if not verification.errors:
        return ctx.replica_manager.append_records(acks, entries, verification.guards)
    kept = [i for i in range(len(entries)) if i not in verification.errors]
    guards = {
        position: verification.guards[i]
        for position, i in enumerate(kept)
        if i in verification.guards
    }
    appended = ctx.replica_manager.append_records(acks, [entries[i] for i in kept], guards)
    results = dict(zip(kept, appended, strict=True))
    for i, (code, message) in verification.errors.items():
        results[i] = AppendResult(code, None, message)
    return [results[i] for i in range(len(entries))]


def _entries(ctx: BrokerContext, request: Request) -> list[tuple[Any, int, Any]]:
    """(topic name, partition, records) per partition of the request, in its order; v13+
    topics come by id: a name from this broker's image, None for an id it does not know."""
    body = request.body
    if request.api_version < 13:
        return [
            (topic_data.name, partition_data.index, partition_data.records)
            for topic_data in body.topic_data
            for partition_data in topic_data.partition_data
        ]
    names = {t.topic_id: ctx.image.topic_name(t.topic_id) for t in body.topic_data}
    return [
        (names[topic_data.topic_id], partition_data.index, partition_data.records)
        for topic_data in body.topic_data
        for partition_data in topic_data.partition_data
    ]


def _topic_ids(body: Any) -> list[uuid.UUID]:
    """The topic id of each partition of a v13+ request, in the order of `_entries`."""
    return [t.topic_id for t in body.topic_data for _ in t.partition_data]


def _refusals(ctx: BrokerContext, request: Request, entries: list[Any]) -> list[ErrorCode]:
    """Per entry: NONE, or the error it gets instead of being appended (Kafka's order: every
    partition fails when the transactional id may not be written; then a v13+ topic id this
    broker does not know (name None) is UNKNOWN_TOPIC_ID; then WRITE on each topic)."""
    transactional_id = getattr(request.body, "transactional_id", None)
    if transactional_id is not None and not allowed(
        ctx, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        return [ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED] * len(entries)
    may_write = {
        topic: allowed(ctx, request, AclOperation.WRITE, ResourceType.TOPIC, topic)
        for topic in {entry[0] for entry in entries}
        if topic is not None
    }
    return [
        ErrorCode.UNKNOWN_TOPIC_ID if entry[0] is None
        else ErrorCode.NONE if may_write[entry[0]]
        else ErrorCode.TOPIC_AUTHORIZATION_FAILED
        for entry in entries
    ]  # fmt: skip


def without_records(request: Request) -> Request:
    """The request with its record batches dropped (Kafka's clearPartitionRecords): once they
    are appended, an answer still waiting for acks need not keep the request's frame alive."""
    body = request.body
    topic_data = [
        dataclasses.replace(t, partition_data=[
            dataclasses.replace(p, records=None) for p in t.partition_data
        ])
        for t in body.topic_data
    ]  # fmt: skip
    return dataclasses.replace(request, body=dataclasses.replace(body, topic_data=topic_data))


def has_error(body: Any) -> bool:
    """True when any partition of a produce response carries an error (acks=0: close)."""
    return any(
        p.error_code != ErrorCode.NONE for t in body.responses for p in t.partition_responses
    )
