"""The transaction APIs at the coordinators: FindCoordinator key_type 1, InitProducerId with a
transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and
ListTransactions (transaction coordinator, log/coordinator/transaction_driver.py), and
TxnOffsetCommit (group coordinator, group_driver.py).

Thin: each handler turns the request body into one driver call and the result into the response
body. The transaction APIs are answered at the versions declared in log/protocol/transactions.py.
Transaction version 2 (KIP-890 part 2) is what EndTxn v5 and TxnOffsetCommit v5 ask for (and
AddPartitionsToTxn v5 from a partition leader adding a Produce v12's partition); they get it when
the cluster finalized transaction.version 2, else version 0 semantics (no epoch bump, no
implicit add), as a Kafka 4 client on such a cluster would not ask.

AddPartitionsToTxn v4+ (KIP-890 part 1) comes from partition leaders, not clients: CLUSTER_ACTION
is required for the whole request (CLUSTER_AUTHORIZATION_FAILED otherwise, Kafka's), topics are
not checked for WRITE, and each transaction of the batch is either added (verify_only false) or
verified (verify_only true: nothing written; a partition not in the transaction is
TRANSACTION_ABORTABLE). Every version: a partition of an unknown topic fails the transaction with
UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED.

TxnOffsetCommit verifies (KIP-890 part 1, add_partitions_to_txn_manager.py) that the group's
__consumer_offsets partition is in the transaction before writing the offsets; v5 on a
transaction version 2 cluster adds it instead. v3+ (KIP-447) names the consumer's generation and
member: a commit from a member the group no longer knows, or of an older generation, is fenced
(UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID) before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable

from log.common.acl import AclOperation, ResourceType
from log.common.errors import ErrorCode
from log.coordinator.group_coordinator import (
    OFFSET_METADATA_MAX_BYTES,
    OFFSETS_TOPIC,
    CoordinatorError,
    OffsetAndMetadata,
)
from log.coordinator.topic_regex import InvalidRegularExpression, compile_topic_regex
from log.coordinator.transaction_driver import TRANSACTION_STATE_TOPIC, TransactionCoordinatorDriver
from log.coordinator.transaction_state import TransactionState
from log.protocol.connection import Request
from log.protocol.coordinator import FIND_COORDINATOR_RESPONSE
from log.protocol.producer_id import INIT_PRODUCER_ID_RESPONSE
from log.protocol.transaction_admin import (
    DESCRIBE_TRANSACTIONS_RESPONSE,
    LIST_TRANSACTIONS_RESPONSE,
)
from log.protocol.transactions import (
    ADD_OFFSETS_TO_TXN_RESPONSE,
    ADD_PARTITIONS_TO_TXN_RESPONSE,
    END_TXN_RESPONSE,
    TXN_OFFSET_COMMIT_RESPONSE,
)
from log.server.authorization import allowed, require_cluster
from log.server.broker_context import BrokerContext
from log.server.handlers.metadata import listener_of, live_brokers

FC = FIND_COORDINATOR_RESPONSE.cls
IP = INIT_PRODUCER_ID_RESPONSE.cls
AP = ADD_PARTITIONS_TO_TXN_RESPONSE.cls
AO = ADD_OFFSETS_TO_TXN_RESPONSE.cls
ET = END_TXN_RESPONSE.cls
TO = TXN_OFFSET_COMMIT_RESPONSE.cls
DT = DESCRIBE_TRANSACTIONS_RESPONSE.cls
LT = LIST_TRANSACTIONS_RESPONSE.cls


def _for_version(code: int, version: int, fenced_since: int) -> int:
    """Before `fenced_since` clients do not know PRODUCER_FENCED: INVALID_PRODUCER_EPOCH, as
    Kafka's KafkaApis answers them."""
    if code == ErrorCode.PRODUCER_FENCED and version < fenced_since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def driver(ctx: BrokerContext) -> TransactionCoordinatorDriver:
    assert ctx.transaction_coordinator is not None, "KafkaServer sets the transaction coordinator"
    return ctx.transaction_coordinator


def _no_coordinator(code: int, message: str) -> object:
    return FC(error_code=code, error_message=message, node_id=-1, host="", port=-1)


async def find_transaction_coordinator(
    ctx: BrokerContext, request: Request, transactional_id: str
) -> object:
    """FindCoordinator key_type 1: the leader of the id's __transaction_state partition
    (created on first use; COORDINATOR_NOT_AVAILABLE until then, clients retry), at its
    endpoint on the listener the request came in on."""
    if not transactional_id:
        return _no_coordinator(ErrorCode.INVALID_REQUEST, "empty transactional id")
    if not _txn_id_allowed(ctx, request, AclOperation.DESCRIBE, transactional_id):  # authorization
        return _no_coordinator(
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactional id DESCRIBE refused"
        )
    txn = driver(ctx)
    if not await txn.ensure_topic():
        return _no_coordinator(
            ErrorCode.COORDINATOR_NOT_AVAILABLE, f"creating {TRANSACTION_STATE_TOPIC}"
        )
    code, leader = txn.coordinator_for(transactional_id)
    if code:
        return _no_coordinator(code, "no leader")
    for broker_id, host, port, _rack in live_brokers(
        ctx.replica_manager.sync(), listener_of(request)
    ):
        if broker_id == leader:
            return FC(error_code=0, error_message=None, node_id=broker_id, host=host, port=port)
    return _no_coordinator(ErrorCode.COORDINATOR_NOT_AVAILABLE, "coordinator not live")


async def init_transactional_producer_id(ctx: BrokerContext, request: Request) -> object:
    """InitProducerId with a transactional id (v3+: expected producer id and epoch, KIP-360;
    v6: KIP-939's enable_2pc and keep_prepared_txn, answered with ongoing_txn_*)."""
    body = request.body
    result = await driver(ctx).init_producer_id(
        body.transactional_id,
        body.transaction_timeout_ms,
        getattr(body, "producer_id", -1),
        getattr(body, "producer_epoch", -1),
        getattr(body, "enable2_pc", False),
        getattr(body, "keep_prepared_txn", False),
    )
    return IP(
        error_code=_for_version(result.error, request.api_version, 4),
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
        ongoing_txn_producer_id=result.ongoing_txn_producer_id,
        ongoing_txn_producer_epoch=result.ongoing_txn_producer_epoch,
    )


async def handle_add_partitions_to_txn(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    version = request.api_version
    if version < 4:
        wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
        errors = await _add_partitions(
            ctx, request, body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
            body.v3_and_below_producer_epoch, wanted, verify_only=False,
        )  # fmt: skip
        return AP(results_by_topic_v3_and_below=_partition_results(errors.items()))
    require_cluster(ctx, request, AclOperation.CLUSTER_ACTION)  # authorization: brokers only
    results = []
    for txn in body.transactions:
        wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
        errors = await _add_partitions(
            ctx, request, txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted,
            verify_only=txn.verify_only, leader_add_tv2=version >= 5,
        )  # fmt: skip
        results.append(
            AP.AddPartitionsToTxnResult(
                transactional_id=txn.transactional_id,
                topic_results=_partition_results(errors.items()),
            )
        )
    return AP(error_code=0, results_by_transaction=results)


async def _add_partitions(
    ctx: BrokerContext,
    request: Request,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    wanted: list[tuple[str, int]],
    *,
    verify_only: bool,
    leader_add_tv2: bool = False,
) -> dict[tuple[str, int], int]:
    """One transaction's partitions (Kafka's KafkaApis.handleAddPartitionsToTxnRequest): the
    error code per partition. `leader_add_tv2`: a partition leader (v5+) adds a transaction
    version 2 producer's partition (Produce v12)."""
    from_client = request.api_version < 4
    # authorization (Kafka's, clients only): WRITE on the transactional id, else every
    # partition is refused; WRITE on each topic, else those partitions are refused
    if from_client and not _txn_id_allowed(ctx, request, AclOperation.WRITE, transactional_id):
        return dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    denied = set()
    if from_client:
        denied = {t for t, _ in wanted if not allowed(ctx, request, AclOperation.WRITE,
                                                      ResourceType.TOPIC, t)}  # fmt: skip
    image = ctx.replica_manager.sync()
    failed: dict[tuple[str, int], int] = {}
    for topic_name, partition in wanted:
        topic = image.topic(topic_name)
        if topic_name in denied:
            failed[(topic_name, partition)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif topic is None or partition not in topic.partitions:
            failed[(topic_name, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if failed:  # the rest are not attempted
        return {tp: failed.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in wanted}
    txn = driver(ctx)
    if verify_only:
        result = await txn.verify_partitions(transactional_id, producer_id, producer_epoch, wanted)
    else:
        version = txn.client_version(leader_add_tv2)
        result = await txn.add_partitions(
            transactional_id, producer_id, producer_epoch, wanted, version
        )
    return {tp: _for_version(c, request.api_version, 2) for tp, c in result.errors.items()}


def _txn_id_allowed(
    ctx: BrokerContext, request: Request, operation: int, transactional_id: str, count: bool = True
) -> bool:
    return allowed(
        ctx, request, operation, ResourceType.TRANSACTIONAL_ID, transactional_id, count=count
    )


def _partition_results(errors: Iterable[tuple[tuple[str, int], int]]) -> list[object]:
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), code in sorted(errors):
        by_topic.setdefault(topic, []).append((partition, code))
    return [
        AP.AddPartitionsToTxnTopicResult(
            name=name,
            results_by_partition=[
                AP.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=c)
                for p, c in parts
            ],
        )
        for name, parts in by_topic.items()
    ]


async def handle_add_offsets_to_txn(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    if not body.group_id:
        return AO(error_code=ErrorCode.INVALID_GROUP_ID)
    if not _txn_id_allowed(ctx, request, AclOperation.WRITE, body.transactional_id):
        return AO(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)  # authorization
    if not allowed(ctx, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return AO(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)  # authorization
    code = await driver(ctx).add_offsets(
        body.transactional_id, body.producer_id, body.producer_epoch, body.group_id
    )
    return AO(error_code=_for_version(code, request.api_version, 2))


async def handle_end_txn(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    if not _txn_id_allowed(ctx, request, AclOperation.WRITE, body.transactional_id):
        return ET(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)  # authorization
    txn = driver(ctx)
    result = await txn.end_txn(
        body.transactional_id, body.producer_id, body.producer_epoch, body.committed,
        txn.client_version(request.api_version >= 5),
    )  # fmt: skip
    return ET(
        error_code=_for_version(result.error, request.api_version, 2),
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    )


async def handle_txn_offset_commit(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    now_ms = ctx.clock_ms()
    max_metadata_bytes = ctx.config.props.get(
        "offset.metadata.max.bytes", OFFSET_METADATA_MAX_BYTES
    )
    codes: dict[tuple[str, int], int] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    # authorization (Kafka's): READ on the group refuses everything; READ on each topic
    group_ok = allowed(ctx, request, AclOperation.READ, ResourceType.GROUP, body.group_id)
    for topic in body.topics:
        topic_ok = group_ok and allowed(
            ctx, request, AclOperation.READ, ResourceType.TOPIC, topic.name
        )
        for p in topic.partitions:
            if not topic_ok:
                codes[(topic.name, p.partition_index)] = (
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    if group_ok
                    else ErrorCode.GROUP_AUTHORIZATION_FAILED
                )
                continue
            metadata = p.committed_metadata or ""
            if len(metadata.encode()) > max_metadata_bytes:
                codes[(topic.name, p.partition_index)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            offsets[(topic.name, p.partition_index)] = OffsetAndMetadata(
                p.committed_offset,
                getattr(p, "committed_leader_epoch", -1),
                metadata,
                now_ms,
            )
    code: int = ErrorCode.NONE
    if not body.transactional_id:
        code = ErrorCode.INVALID_REQUEST
    elif offsets:
        code = _check_member(ctx, request)
    if code == ErrorCode.NONE and offsets:
        # KIP-890 part 1: the group's __consumer_offsets partition must be in the transaction;
        # part 2 (v5, transaction version 2): it is added to it
        manager = ctx.add_partitions_to_txn_manager
        offsets_partition = (OFFSETS_TOPIC, ctx.group_coordinator.partition_for(body.group_id))
        code, guard = await manager.verify_offsets_partition(
            body.transactional_id, body.producer_id, body.producer_epoch, offsets_partition,
            add_partition=request.api_version >= 5 and manager.tv2_enabled(),
        )  # fmt: skip
        if code == ErrorCode.NONE:
            code = await ctx.group_coordinator.commit_transactional_offsets(
                body.group_id, body.producer_id, body.producer_epoch, offsets, guard
            )
    codes.update(dict.fromkeys(offsets, code))
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (name, partition), c in sorted(codes.items()):
        by_topic.setdefault(name, []).append((partition, c))
    return TO(
        topics=[
            TO.TxnOffsetCommitResponseTopic(
                name=name,
                partitions=[
                    TO.TxnOffsetCommitResponsePartition(partition_index=p, error_code=c)
                    for p, c in parts
                ],
            )
            for name, parts in by_topic.items()
        ]
    )


def _check_member(ctx: BrokerContext, request: Request) -> int:
    """TxnOffsetCommit v3+ (KIP-447): a commit naming a member or generation must come from a
    current member of the group's current generation (Kafka's validateOffsetCommit for
    transactional commits); without them (v0-2, or a producer outside any group) it is not
    checked. A KIP-848 member's stale epoch is ILLEGAL_GENERATION here (the clients of
    TxnOffsetCommit know no STALE_MEMBER_EPOCH)."""
    body = request.body
    generation_id = getattr(body, "generation_id", -1)
    member_id = getattr(body, "member_id", "")
    if request.api_version < 3 or (generation_id < 0 and not member_id):
        return ErrorCode.NONE
    groups = ctx.group_coordinator
    try:
        groups.check_group(body.group_id)
    except CoordinatorError as exc:  # NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...
        return exc.error_code
    code = groups.core.check_commit(
        body.group_id, member_id, generation_id, ctx.clock_ms(),
        getattr(body, "group_instance_id", None),
    )  # fmt: skip
    return ErrorCode.ILLEGAL_GENERATION if code == ErrorCode.STALE_MEMBER_EPOCH else code


async def handle_describe_transactions(ctx: BrokerContext, request: Request) -> object:
    """DescribeTransactions: per id, its state here (NOT_COORDINATOR when another broker
    coordinates it, TRANSACTIONAL_ID_NOT_FOUND when it has none)."""
    txn = driver(ctx)
    states = []
    for transactional_id in request.body.transactional_ids:
        code, md = txn.describe(transactional_id)
        if not _txn_id_allowed(ctx, request, AclOperation.DESCRIBE, transactional_id):
            code, md = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None  # authorization
        if md is None:
            states.append(
                DT.TransactionState(
                    error_code=code,
                    transactional_id=transactional_id,
                    transaction_state="",
                    transaction_timeout_ms=0,
                    transaction_start_time_ms=-1,
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=[],
                )  # fmt: skip
            )
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(md.topic_partitions):
            by_topic.setdefault(topic, []).append(partition)
        states.append(
            DT.TransactionState(
                error_code=0,
                transactional_id=transactional_id,
                transaction_state=md.state.kafka_name,
                transaction_timeout_ms=md.txn_timeout_ms,
                transaction_start_time_ms=md.txn_start_timestamp_ms,
                producer_id=md.producer_id,
                producer_epoch=md.producer_epoch,
                topics=[DT.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()],
            )
        )
    return DT(transaction_states=states)


async def handle_list_transactions(ctx: BrokerContext, request: Request) -> object:
    """ListTransactions: the ids this broker coordinates, filtered as Kafka's
    TransactionStateManager.listTransactionStates (Dead never listed). v2's
    transactional_id_pattern (KIP-1152; null or empty: no filter) keeps the ids it matches as a
    whole, compiled with RE2 as Kafka's RE2/J (log/coordinator/topic_regex.py); a pattern RE2
    refuses is INVALID_REGULAR_EXPRESSION for the request."""
    body = request.body
    known = {state.kafka_name for state in TransactionState}
    state_filters = set(body.state_filters)
    producer_filters = set(body.producer_id_filters)
    duration_ms = getattr(body, "duration_filter", -1)
    id_pattern = None
    if getattr(body, "transactional_id_pattern", None):
        try:
            id_pattern = compile_topic_regex(body.transactional_id_pattern)
        except InvalidRegularExpression:
            return LT(error_code=ErrorCode.INVALID_REGULAR_EXPRESSION, unknown_state_filters=[],
                      transaction_states=[])  # fmt: skip
    now_ms = ctx.clock_ms()
    listed = []
    for md in driver(ctx).transactions():
        if md.state == TransactionState.DEAD:
            continue
        if not _txn_id_allowed(ctx, request, AclOperation.DESCRIBE, md.transactional_id, False):
            continue  # authorization: listed only with DESCRIBE on the id
        if producer_filters and md.producer_id not in producer_filters:
            continue
        if state_filters and md.state.kafka_name not in state_filters:
            continue
        if duration_ms >= 0 and now_ms - md.txn_start_timestamp_ms <= duration_ms:
            continue
        if id_pattern is not None and id_pattern.fullmatch(md.transactional_id) is None:
            continue
        listed.append(
            LT.TransactionState(
                transactional_id=md.transactional_id,
                producer_id=md.producer_id,
                transaction_state=md.state.kafka_name,
            )
        )
    return LT(
        error_code=0,
        unknown_state_filters=sorted(state_filters - known),
        transaction_states=listed,
    )
