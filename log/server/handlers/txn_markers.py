"""WriteTxnMarkers (27): the transaction coordinator has partition leaders end a transaction.

Inter-broker (Kafka's KafkaApis.handleWriteTxnMarkersRequest). Each marker names a producer id
and epoch, COMMIT or ABORT, the coordinator epoch and partitions; for every partition this
broker leads, the ReplicaManager appends a control batch holding the marker (origin
COORDINATOR: no sequence checks, but a producer epoch below the partition's current one ->
INVALID_PRODUCER_EPOCH and a coordinator epoch below the one recorded for the producer ->
TRANSACTION_COORDINATOR_FENCED) and waits as acks=all does until the high watermark passes it.
All the request's markers are appended first and then waited for together. Per partition
error codes: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (the coordinator looks the
leader up again and retries), NOT_ENOUGH_REPLICAS(_AFTER_APPEND), KAFKA_STORAGE_ERROR,
REQUEST_TIMED_OUT. A durable marker is announced to the ReplicaManager's transaction
completion listeners (the group coordinator, for transactional offset commits).

Served whether or not the transaction APIs are advertised to clients (handlers/__init__.py).
"""

from __future__ import annotations

from log.common.acl import AclOperation
from log.protocol.connection import Request
from log.protocol.transactions import WRITE_TXN_MARKERS_RESPONSE
from log.replication.replica_manager import TxnMarkerEntry
from log.server.authorization import require_cluster
from log.server.broker_context import BrokerContext

R = WRITE_TXN_MARKERS_RESPONSE.cls
# How long a marker waits for its replicas: Kafka uses the broker's request.timeout.ms, whose
# default this is (the request itself carries no timeout).
TXN_MARKER_TIMEOUT_MS = 30_000


async def handle_write_txn_markers(ctx: BrokerContext, request: Request) -> object:
    require_cluster(ctx, request, AclOperation.CLUSTER_ACTION)  # authorization
    entries: list[TxnMarkerEntry] = []
    for marker in request.body.markers:
        for topic in marker.topics:
            for partition in topic.partition_indexes:
                entries.append(
                    TxnMarkerEntry(
                        topic=topic.name,
                        partition=partition,
                        producer_id=marker.producer_id,
                        producer_epoch=marker.producer_epoch,
                        coordinator_epoch=marker.coordinator_epoch,
                        committed=bool(marker.transaction_result),
                    )
                )
    codes = iter(await ctx.replica_manager.append_txn_markers(entries, TXN_MARKER_TIMEOUT_MS))
    results = []
    for marker in request.body.markers:
        topics = []
        for topic in marker.topics:
            partitions = [
                R.WritableTxnMarkerPartitionResult(partition_index=p, error_code=next(codes))
                for p in topic.partition_indexes
            ]
            topics.append(R.WritableTxnMarkerTopicResult(name=topic.name, partitions=partitions))
        results.append(R.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=topics))
    return R(markers=results)
