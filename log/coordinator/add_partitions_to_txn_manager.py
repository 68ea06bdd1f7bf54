"""AddPartitionsToTxnManager: a partition leader verifies, before appending a transactional
batch, that the transaction coordinator added its partition to the transaction (KIP-890 part 1,
Kafka's AddPartitionsToTxnManager and ReplicaManager's verification path).

Why: a producer whose AddPartitionsToTxn was lost or never sent (a client bug, or a retried
batch of an aborted transaction) would otherwise open a transaction the coordinator never ends
with a marker: a hanging transaction that holds the partition's last stable offset forever.

Which batches: the first transactional batch of a transaction on a partition, i.e. one whose
producer has no transaction open here at that epoch (the producer state's
`maybe_start_verification` hands out a guard then; a batch of an already open transaction needs
no question). Nothing is cached across transactions. Disabled by
`transaction.partition.verification.enable=false`, except transaction version 2's adds below.

How: the verifications waiting for one coordinator broker (the leader of the transactional id's
__transaction_state partition) go out as one AddPartitionsToTxn v4+ request with `verify_only`
per transaction, one request in flight per broker, over the inter-broker listener (so the
inter-broker principal needs ClusterAction, as for replication). When this broker is the
coordinator itself its transaction coordinator is asked directly (Kafka sends a request to
itself; the answer is the same, without the round trip). A second
verification of a transactional id already waiting in the batch: same epoch -> the older one is
answered NETWORK_EXCEPTION (a client retry), a higher epoch -> the older one is fenced
(INVALID_PRODUCER_EPOCH), a lower epoch -> the new one is fenced.

Answers, as Kafka maps them for the producer: PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH;
TRANSACTION_ABORTABLE (not in the transaction) -> INVALID_TXN_STATE for Produce v10 and below;
a top-level CLUSTER_AUTHORIZATION_FAILED -> INVALID_TXN_STATE; a lost connection or time-out ->
NETWORK_EXCEPTION; and then the coordinator's retriable errors (CONCURRENT_TRANSACTIONS,
NETWORK_EXCEPTION, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR)
become NOT_ENOUGH_REPLICAS, which every client retries without a metadata refresh. The guards of
the verified partitions go with the append (`ReplicaManager.append_records`): a marker or a new
epoch of the producer appended meanwhile voids the guard and the batch is INVALID_TXN_STATE.

TxnOffsetCommit is verified the same way for the group's __consumer_offsets partition
(`verify_offsets_partition`), its failures answered as Kafka's maybeConvertOffsetCommitError does.

Transaction version 2 (KIP-890 part 2): a Produce v12 or TxnOffsetCommit v5 from a producer on a
cluster that finalized transaction.version 2 is not verified but *added*: the same question with
verify_only false, so the coordinator puts the partition into the transaction (starting it when
none is open) and the producer never sends AddPartitionsToTxn / AddOffsetsToTxn. Elsewhere a
v12/v5 request is verified as before.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

import trio

from log.common.errors import CorruptRecordError, ErrorCode, KafkaError
from log.common.node_config import NodeConfig
from log.coordinator.transaction_driver import TransactionCoordinatorDriver
from log.coordinator.transaction_log import partition_for
from log.coordinator.transaction_state import TransactionVersion
from log.protocol.transactions import ADD_PARTITIONS_TO_TXN_REQUEST
from log.records.batch_header import iter_batches
from log.replication.broker_connections import BrokerConnections
from log.replication.replica_manager import ReplicaManager
from log.storage.producer_state import VerificationGuard
from quorum.features import TRANSACTION_VERSION
from quorum.records import NO_LEADER

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
TRANSACTION_STATE_TOPIC = "__transaction_state"
ADD_PARTITIONS_TO_TXN_KEY, ADD_PARTITIONS_TO_TXN_VERSION = 24, 5
MAX_PENDING_VERIFICATIONS = 10_000  # transactions waiting for a request slot, all brokers
# The coordinator answers from memory; wait as long as a client waits for any request.
VERIFY_REQUEST_TIMEOUT_MS = 30_000
NOT_ADDED_MESSAGE = "Partition was not added to the transaction"
# Verification failed for a reason the producer should retry (Kafka's choice: no metadata refresh)
RETRIABLE_AS_NOT_ENOUGH_REPLICAS = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)

# A failed verification as TxnOffsetCommit answers it (Kafka's maybeConvertOffsetCommitError):
# retriable codes a committing client retries without looking its coordinator up again.
OFFSET_COMMIT_ERRORS = {
    ErrorCode.NETWORK_EXCEPTION: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}

A = ADD_PARTITIONS_TO_TXN_REQUEST.cls


@dataclasses.dataclass(eq=False)
class _Verification:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]
    generic_error_supported: bool
    add_partitions: bool = False  # TV2: add them (verify_only false) rather than verify
    errors: dict[TopicPartition, ErrorCode] = dataclasses.field(default_factory=dict)
    done: trio.Event = dataclasses.field(default_factory=trio.Event)

    def finish(self, errors: dict[TopicPartition, ErrorCode]) -> None:
        if not self.done.is_set():
            self.errors = errors
            self.done.set()

    def fail(self, code: ErrorCode) -> None:
        self.finish(dict.fromkeys(self.partitions, code))


@dataclasses.dataclass
class ProduceVerification:
    """What a Produce request's transactional entries got from verification: per entry index,
    the error to answer instead of appending (code, message), and the guards to append with."""

    errors: dict[int, tuple[ErrorCode, str]]
    guards: dict[int, VerificationGuard]


class AddPartitionsToTxnManager:
    def __init__(
        self,
        config: NodeConfig,
        replica_manager: ReplicaManager,
        local_coordinator: TransactionCoordinatorDriver | None = None,
    ) -> None:
        """`local_coordinator` answers the transactional ids this broker coordinates itself,
        without a request to itself."""
        props = config.props
        self.config = config
        self.replica_manager = replica_manager
        self.local_coordinator = local_coordinator
        self.enabled: bool = props["transaction.partition.verification.enable"]
        self.num_partitions: int = props["transaction.state.log.num.partitions"]
        self._pending: dict[int, dict[str, _Verification]] = {}  # broker id -> by txn id
        self._pending_count = 0
        self._in_flight: set[int] = set()
        self._wakeup = trio.Event()
        self._connections = BrokerConnections(
            replica_manager.endpoint_for,
            replica_manager.inter_broker_connect,
            f"txn-verification-{config.node_id}",
        )
        self._nursery: trio.Nursery | None = None
        self.verified_partition_count = 0  # metrics: partitions asked about, and refused
        self.failed_partition_count = 0

    # -- the produce path --------------------------------------------------------------------

    async def verify_produce(
        self,
        transactional_id: str | None,
        entries: Sequence[tuple[str, int, Any]],
        produce_version: int,
    ) -> ProduceVerification:
        """Kafka's handleProduceAppend before appendRecords: which transactional entries may be
        appended (with their guards) and which are answered with an error."""
        verification = ProduceVerification({}, {})
        if transactional_id is None:
            return verification  # the hot path of every other producer: no header is read
        # TV2's implicit add cannot be switched off: without it nobody adds the partition
        add = produce_version >= 12 and self.tv2_enabled()
        if not self.enabled and not add:
            return verification
        producers: set[tuple[int, int]] = set()
        transactional_entries: list[int] = []
        for index, (_, _, records) in enumerate(entries):
            try:
                headers = [h for _, h in iter_batches(records or b"", check_crc=False)]
            except CorruptRecordError:
                continue  # the append answers CORRUPT_MESSAGE
            transactional = [h for h in headers if h.has_producer_id and h.is_transactional]
            producers.update((h.producer_id, h.producer_epoch) for h in transactional)
            if transactional:
                transactional_entries.append(index)
        if not producers:
            return verification
        if len(producers) > 1:
            message = "transactional records of more than one producer id"
            for index in transactional_entries:
                verification.errors[index] = (ErrorCode.INVALID_PRODUCER_ID_MAPPING, message)
            return verification
        ((producer_id, producer_epoch),) = producers
        wanted: dict[TopicPartition, list[int]] = {}  # a partition named twice: both entries
        for index in transactional_entries:
            topic, partition, _ = entries[index]
            hosted = self.replica_manager.get(topic, partition)
            if hosted is None or not hosted.is_leader:
                continue  # the append answers NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION
            guard = hosted.log.producer_state_manager.maybe_start_verification(
                producer_id, producer_epoch
            )
            if guard is not None:
                verification.guards[index] = guard
                wanted.setdefault((topic, partition), []).append(index)
        if not wanted:
            return verification
        errors = await self.verify_transaction(
            transactional_id, producer_id, producer_epoch, list(wanted),
            generic_error_supported=produce_version > 10, add_partitions=add,
        )  # fmt: skip
        self.verified_partition_count += len(wanted)
        self.failed_partition_count += len(errors)
        for tp, code in errors.items():
            for index in wanted.get(tp, ()):
                verification.guards.pop(index, None)
                verification.errors[index] = produce_error(code)
        return verification

    async def verify_offsets_partition(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        topic_partition: TopicPartition,
        add_partition: bool = False,
    ) -> tuple[ErrorCode, VerificationGuard | None]:
        """TxnOffsetCommit (Kafka's GroupCoordinator.handleTxnCommitOffsets): is the group's
        __consumer_offsets partition in the transaction? NONE with the guard to append with (None:
        nothing to verify), or the error for every offset, as Kafka's
        maybeConvertOffsetCommitError gives it to TxnOffsetCommit v0-3. `add_partition` (TxnOffsetCommit
        v5 on a transaction version 2 cluster): the coordinator adds the partition instead."""
        hosted = self.replica_manager.get(*topic_partition)
        if not (self.enabled or add_partition) or hosted is None or not hosted.is_leader:
            return ErrorCode.NONE, None  # the commit answers NOT_COORDINATOR itself
        guard = hosted.log.producer_state_manager.maybe_start_verification(
            producer_id, producer_epoch
        )
        if guard is None:
            return ErrorCode.NONE, None
        errors = await self.verify_transaction(
            transactional_id, producer_id, producer_epoch, [topic_partition],
            add_partitions=add_partition,
        )  # fmt: skip
        self.verified_partition_count += 1
        self.failed_partition_count += len(errors)
        code = errors.get(topic_partition, ErrorCode.NONE)
        if code == ErrorCode.NONE:
            return ErrorCode.NONE, guard
        return OFFSET_COMMIT_ERRORS.get(code, code), None

    # -- verification requests ---------------------------------------------------------------

    async def verify_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        *,
        generic_error_supported: bool = False,
        add_partitions: bool = False,
    ) -> dict[TopicPartition, ErrorCode]:
        """The partitions the coordinator did not confirm (or, `add_partitions`, did not add),
        with the error (empty: verified)."""
        coordinator = self._coordinator_for(transactional_id)
        if coordinator is None or self._nursery is None:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if coordinator == self.config.node_id and self.local_coordinator is not None:
            local = self.local_coordinator
            if add_partitions:
                result = await local.add_partitions(
                    transactional_id, producer_id, producer_epoch, partitions,
                    TransactionVersion.TV_2,
                )  # fmt: skip
            else:
                result = await local.verify_partitions(
                    transactional_id, producer_id, producer_epoch, partitions
                )
            return {
                tp: _producer_code(code, generic_error_supported)
                for tp, code in result.errors.items()
                if code != ErrorCode.NONE
            }
        batch = self._pending.setdefault(coordinator, {})
        existing = batch.get(transactional_id)
        if existing is not None:
            if existing.producer_epoch > producer_epoch:
                return dict.fromkeys(partitions, ErrorCode.INVALID_PRODUCER_EPOCH)
            del batch[transactional_id]
            self._pending_count -= 1
            existing.fail(
                ErrorCode.INVALID_PRODUCER_EPOCH
                if existing.producer_epoch < producer_epoch
                else ErrorCode.NETWORK_EXCEPTION
            )
        if self._pending_count >= MAX_PENDING_VERIFICATIONS:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)  # retried
        waiting = _Verification(
            transactional_id, producer_id, producer_epoch, tuple(partitions),
            generic_error_supported, add_partitions,
        )  # fmt: skip
        batch[transactional_id] = waiting
        self._pending_count += 1
        self._wakeup.set()
        await waiting.done.wait()
        return waiting.errors

    def tv2_enabled(self) -> bool:
        """The cluster finalized transaction.version 2: TV2 requests add partitions."""
        return self.replica_manager.sync().feature_level(TRANSACTION_VERSION) >= 2

    def _coordinator_for(self, transactional_id: str) -> int | None:
        image = self.replica_manager.sync()
        topic = image.topic(TRANSACTION_STATE_TOPIC)
        if topic is None:
            return None
        state = topic.partitions.get(partition_for(transactional_id, self.num_partitions))
        if state is None or state.leader == NO_LEADER:
            return None
        if self.replica_manager.endpoint_for(state.leader) is None:
            return None
        return state.leader

    async def _send_loop(self) -> None:
        assert self._nursery is not None
        while True:
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            for broker_id in [b for b in self._pending if b not in self._in_flight]:
                batch = self._pending.pop(broker_id)
                self._pending_count -= len(batch)
                if batch:
                    self._in_flight.add(broker_id)
                    self._nursery.start_soon(self._send, broker_id, batch)

    async def _send(self, broker_id: int, batch: dict[str, _Verification]) -> None:
        try:
            await self._request(broker_id, batch)
        except Exception:
            logger.exception("AddPartitionsToTxn verification to broker %d failed", broker_id)
        finally:
            for waiting in batch.values():
                waiting.fail(ErrorCode.NETWORK_EXCEPTION)  # those not answered above
            self._in_flight.discard(broker_id)
            self._wakeup.set()

    async def _request(self, broker_id: int, batch: dict[str, _Verification]) -> None:
        try:
            response = await self._connections.request(
                broker_id, ADD_PARTITIONS_TO_TXN_KEY, ADD_PARTITIONS_TO_TXN_VERSION,
                _request_body(batch), VERIFY_REQUEST_TIMEOUT_MS,
            )  # fmt: skip
        except (KafkaError, trio.TooSlowError) as exc:
            logger.info("AddPartitionsToTxn to broker %d failed: %r", broker_id, exc)
            return  # NETWORK_EXCEPTION for all (_send)
        if response is None:  # no endpoint for the coordinator's broker
            for waiting in batch.values():
                waiting.fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return
        if response.error_code != ErrorCode.NONE:
            code = ErrorCode(response.error_code)
            if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
                code = ErrorCode.INVALID_TXN_STATE  # the producer must not see it (Kafka's)
            for waiting in batch.values():
                waiting.fail(code)
            return
        for result in response.results_by_transaction:
            answered = batch.get(result.transactional_id)
            if answered is None:
                continue
            unverified: dict[TopicPartition, ErrorCode] = {}
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    if p.partition_error_code != ErrorCode.NONE:
                        unverified[(topic.name, p.partition_index)] = _producer_code(
                            ErrorCode(p.partition_error_code), answered.generic_error_supported
                        )
            answered.finish(unverified)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:  # noqa: ANN001
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._send_loop)
                task_status.started()
        finally:
            self._nursery = None
            for batch in self._pending.values():
                for waiting in batch.values():
                    waiting.fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            self._pending.clear()
            await self._connections.aclose()


def _producer_code(code: ErrorCode, generic_error_supported: bool) -> ErrorCode:
    """A coordinator's per-partition answer as the producer expects it (Kafka's)."""
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code == ErrorCode.TRANSACTION_ABORTABLE and not generic_error_supported:
        return ErrorCode.INVALID_TXN_STATE  # Produce v10 and below do not know it
    return code


def produce_error(code: ErrorCode) -> tuple[ErrorCode, str]:
    """A verification failure as the Produce answer's (error code, message)."""
    if code == ErrorCode.INVALID_TXN_STATE:
        return code, NOT_ADDED_MESSAGE
    if code in RETRIABLE_AS_NOT_ENOUGH_REPLICAS:
        return (
            ErrorCode.NOT_ENOUGH_REPLICAS,
            f"Unable to verify the partition has been added to the transaction: {code.name}",
        )
    return code, f"transaction verification failed: {code.name}"


def _request_body(batch: dict[str, _Verification]) -> object:
    transactions = []
    for waiting in batch.values():
        by_topic: dict[str, list[int]] = {}
        for topic, partition in waiting.partitions:
            by_topic.setdefault(topic, []).append(partition)
        transactions.append(
            A.AddPartitionsToTxnTransaction(
                transactional_id=waiting.transactional_id,
                producer_id=waiting.producer_id,
                producer_epoch=waiting.producer_epoch,
                verify_only=not waiting.add_partitions,
                topics=[
                    A.AddPartitionsToTxnTopic(name=name, partitions=sorted(ps))
                    for name, ps in sorted(by_topic.items())
                ],
            )
        )
    return A(transactions=transactions)
