"""InitProducerId: a new producer id for an idempotent (non-transactional) producer.

Ids come from the broker's ProducerIdDriver (blocks of 1000 from the controller, prefetched at
90 %); producer_epoch starts at 0. A transactional_id asks for transactions: it is
handled by the transaction coordinator (handlers/transactions.py).
v3+ (KIP-360): a transactional producer naming its producer id and epoch gets its epoch bumped
by the coordinator; a non-transactional one simply gets a fresh id, as Kafka does.
v6 (KIP-939): enable_2pc / keep_prepared_txn, for transactional ids only (transaction_coordinator).
"""

from __future__ import annotations

from log.common.acl import AclOperation, ResourceType
from log.common.errors import ErrorCode
from log.protocol.connection import Request
from log.protocol.producer_id import INIT_PRODUCER_ID_RESPONSE
from log.server.authorization import allowed, allowed_any, allowed_cluster
from log.server.broker_context import BrokerContext
from log.server.handlers.transactions import init_transactional_producer_id

R = INIT_PRODUCER_ID_RESPONSE.cls


async def handle_init_producer_id(ctx: BrokerContext, request: Request) -> object:
    refusal = _authorization_refusal(ctx, request)
    if refusal is not None:
        return R(error_code=refusal, producer_id=-1, producer_epoch=-1)
    if request.body.transactional_id is not None:
        return await init_transactional_producer_id(ctx, request)
    if getattr(request.body, "enable2_pc", False) or getattr(
        request.body, "keep_prepared_txn", False
    ):
        return R(error_code=ErrorCode.INVALID_REQUEST, producer_id=-1, producer_epoch=-1)
    producer_id = await ctx.producer_ids.generate_producer_id()
    return R(error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0)


def _authorization_refusal(ctx: BrokerContext, request: Request) -> ErrorCode | None:
    """Kafka's: a transactional id needs WRITE on it (and TWO_PHASE_COMMIT when enable_2pc is
    asked, KIP-939); an idempotent producer IDEMPOTENT_WRITE on the cluster or WRITE on some
    topic."""
    transactional_id = request.body.transactional_id
    if transactional_id is not None:
        if not allowed(ctx, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                       transactional_id):  # fmt: skip
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        if getattr(request.body, "enable2_pc", False) and not allowed(
            ctx, request, AclOperation.TWO_PHASE_COMMIT, ResourceType.TRANSACTIONAL_ID,
            transactional_id,
        ):  # fmt: skip
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return None
    if allowed_cluster(ctx, request, AclOperation.IDEMPOTENT_WRITE, count=False) or allowed_any(
        ctx, request, AclOperation.WRITE, ResourceType.TOPIC
    ):
        return None
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
