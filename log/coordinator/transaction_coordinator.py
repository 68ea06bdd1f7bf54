"""TransactionCoordinator: the transactional ids of the __transaction_state partitions this broker
leads, sans-IO (Kafka's TransactionCoordinator, TransactionStateManager and the bookkeeping half of
TransactionMarkerChannelManager).

Every entry point returns a `Step` for the driver: a `response` to send now, an `append` to
write to __transaction_state (acks=all; then call `on_append_complete` with the outcome, and
only then is the state changed and the client answered), and `markers` to send with
WriteTxnMarkers (then call `on_marker_result` per partition). A transition is prepared, written,
replicated, and only then completed (transaction_state.py); a failed write leaves the state as it
was. While a transition is pending the transactional id answers CONCURRENT_TRANSACTIONS.

Commit and abort: EndTxn writes PrepareCommit/PrepareAbort; once replicated the client is
answered, a CompleteCommit/CompleteAbort is prepared (pending) and the markers go out, one per
partition of the transaction, with the producer id and epoch of the Prepare record and the
coordinator epoch (the __transaction_state leader epoch) that lets partition leaders refuse a
deposed coordinator. When every partition acknowledged, the Complete record is written.

Fencing: InitProducerId bumps the epoch (or allocates a new producer id when the epochs are
exhausted), so the previous instance's requests fail with PRODUCER_FENCED; if that instance left
a transaction Ongoing it is aborted first (PrepareEpochFence -> PrepareAbort with the bumped
epoch) and the new instance retries on CONCURRENT_TRANSACTIONS. `expired_transactions(now_ms)`
aborts transactions open longer than their timeout the same way, fencing their producer.

Fail-over: `load` replays a partition's records (the last record per transactional id wins; a
tombstone removes it) under the new coordinator epoch and resumes the markers of transactions
found in PrepareCommit/PrepareAbort; `unload` drops the partition and cancels its markers. A
write or marker acknowledgement from an older coordinator epoch is ignored (NOT_COORDINATOR).

Transaction version 2 (KIP-890 part 2) is the client's choice per request (EndTxn v5+,
AddPartitionsToTxn v5+ sent by partition leaders for implicit adds): the epoch is bumped at
every commit/abort and EndTxn answers the producer id and epoch to use next; a retried EndTxn is
recognised by the epoch one below the current one (or MAX-1 of the previous producer id after an
overflow) and answered as the first was. `transaction_version_level` (the cluster's finalized
feature) decides the record version and the version of coordinator-initiated aborts.

Expiration: `expired_transactional_ids(now_ms, expiration_ms)` writes a tombstone for every
transactional id at rest (Empty, CompleteCommit, CompleteAbort) not updated for
transactional.id.expiration.ms (Dead is prepared, never completed: once the tombstone is
replicated the id is dropped, as Kafka's removeExpiredTransactionalIds does).

Two-phase commit (KIP-939, InitProducerId v6): with `transaction.two.phase.commit.enable` an
InitProducerId asking `enable_2pc` gets a transaction that never times out (its timeout is stored
as Int.MaxValue, Kafka's marker of a 2PC transaction), so an external coordinator can prepare it
and decide later. `keep_prepared_txn` on an Ongoing transaction leaves it open, writes nothing
and answers its producer id and epoch (also as `ongoing_txn_*`), with which another process
ends it by EndTxn. The epoch is not bumped: the writer that prepared the transaction is not
fenced (abort with a plain InitProducerId, which fences, when it may live). Where Kafka stands
(checked for issue 17): released brokers answer keepPreparedTxn with UNSUPPORTED_VERSION (a
stub); the open KAFKA-20739 (apache/kafka#22704) answers as we do, the ongoing pair, no log
append; KIP-939 and the open KAFKA-15370 (K/N) (apache/kafka#21735) bump the client-facing
epoch and keep a second (producer id, epoch) pair for the transaction's markers, which needs a
TransactionLogValue field that Kafka's released schema does not have. We follow the first
open design until Kafka ships one.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable

from log.common.errors import ErrorCode, KafkaError
from log.coordinator.append_errors import COORDINATOR_APPEND_ERRORS
from log.coordinator.transaction_log import (
    TransactionLogKey,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    metadata_from,
    partition_for,
    value_for,
    value_version_for,
)
from log.coordinator.transaction_state import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalStateTransitionError,
    ProducerFencedError,
    TopicPartition,
    TransactionMetadata,
    TransactionResult,
    TransactionState,
    TransactionVersion,
    TxnTransitMetadata,
    is_epoch_exhausted,
)

S = TransactionState
OFFSETS_TOPIC = "__consumer_offsets"
DEFAULT_TRANSACTION_MAX_TIMEOUT_MS = 900_000  # transaction.max.timeout.ms
DEFAULT_NUM_PARTITIONS = 50  # transaction.state.log.num.partitions
TWO_PHASE_COMMIT_TIMEOUT_MS = 2**31 - 1  # Int.MaxValue: a 2PC transaction never times out


@dataclasses.dataclass(frozen=True)
class TransactionCoordinatorConfig:
    transaction_max_timeout_ms: int = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS
    transaction_state_log_num_partitions: int = DEFAULT_NUM_PARTITIONS
    transaction_version_level: TransactionVersion = TransactionVersion.TV_2
    two_phase_commit_enable: bool = False  # transaction.two.phase.commit.enable

    def __post_init__(self) -> None:
        if self.transaction_max_timeout_ms <= 0:
            raise ValueError("transaction.max.timeout.ms must be positive")
        if self.transaction_state_log_num_partitions <= 0:
            raise ValueError("transaction.state.log.num.partitions must be positive")


# -- what the driver gets --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    # KIP-939: the transaction keep_prepared_txn kept open, else -1
    ongoing_txn_producer_id: int = NO_PRODUCER_ID
    ongoing_txn_producer_epoch: int = NO_PRODUCER_EPOCH


@dataclasses.dataclass(frozen=True)
class EndTxnResult:
    """EndTxn's answer; v5+ (TV2) clients continue with this producer id and epoch."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclasses.dataclass(frozen=True)
class AddPartitionsResult:
    """AddPartitionsToTxn's (and AddOffsetsToTxn's) answer, per partition."""

    errors: dict[TopicPartition, ErrorCode]


Response = InitProducerIdResult | EndTxnResult | AddPartitionsResult


class AppendOrigin(enum.Enum):
    """Why a __transaction_state record is written: decides what its completion does."""

    INIT_PRODUCER_ID = "init_producer_id"
    ADD_PARTITIONS = "add_partitions"
    END_TXN = "end_txn"
    FENCE_FOR_INIT = "fence_for_init"  # the abort InitProducerId starts for an Ongoing txn
    TIMEOUT_ABORT = "timeout_abort"
    COMPLETE_TXN = "complete_txn"  # CompleteCommit/CompleteAbort after the markers
    EXPIRE_TRANSACTIONAL_ID = "expire_transactional_id"  # a tombstone: the id idled too long


@dataclasses.dataclass(frozen=True)
class TxnLogAppend:
    """One record for the driver to append to `TRANSACTION_STATE_TOPIC`-`txn_partition` with
    acks=all, timing out after `timeout_ms`; then `on_append_complete(this, error, now_ms)`."""

    transactional_id: str
    txn_partition: int
    coordinator_epoch: int
    key: bytes
    value: bytes | None  # None: a tombstone (an expired transactional id)
    transit: TxnTransitMetadata
    origin: AppendOrigin
    timeout_ms: int
    # For EndTxn-like origins: the request's result, producer id and epoch.
    result: TransactionResult | None = None
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    is_epoch_fence: bool = False
    partitions: frozenset[TopicPartition] = frozenset()  # AddPartitions: what to answer for


@dataclasses.dataclass(frozen=True)
class TxnMarker:
    """One WriteTxnMarkers entry for the leader of `topic_partition`."""

    transactional_id: str
    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    result: TransactionResult
    coordinator_epoch: int
    # The transaction's version (WriteTxnMarkers v2+ tells the partition leader; with TV2 the
    # marker's epoch is one above the epoch the data was written with).
    transaction_version: TransactionVersion = TransactionVersion.TV_0


@dataclasses.dataclass(frozen=True)
class Step:
    response: Response | None = None
    append: TxnLogAppend | None = None
    markers: tuple[TxnMarker, ...] = ()


@dataclasses.dataclass
class _TxnPartition:
    """A loaded __transaction_state partition (Kafka's TxnMetadataCacheEntry)."""

    coordinator_epoch: int
    transactions: dict[str, TransactionMetadata]


@dataclasses.dataclass(frozen=True)
class _PendingComplete:
    """Markers in flight for a transaction; `transit` is its prepared Complete* state."""

    coordinator_epoch: int
    result: TransactionResult
    transit: TxnTransitMetadata


# Kafka's TransactionStateManager maps log append errors to coordinator errors like this.
_APPEND_ERRORS = {
    **COORDINATOR_APPEND_ERRORS,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}
_MARKER_DONE = {ErrorCode.NONE, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT}
_MARKER_DONE |= {ErrorCode.UNSUPPORTED_VERSION}  # the producer could not have written there
_MARKER_RETRY = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.KAFKA_STORAGE_ERROR,
}
_MARKER_CANCEL = {ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED}


def coordinator_error_for_append(error: ErrorCode) -> ErrorCode:
    """The error a client gets when its __transaction_state write failed with `error`."""
    return _APPEND_ERRORS.get(error, error)


def replay(records: Iterable[tuple[bytes, bytes | None]]) -> dict[str, TransactionMetadata]:
    """Rebuild the transactional ids of one partition from its records, oldest first.
    Keys of unknown versions are skipped; a bad record raises CorruptRecordError."""
    transactions: dict[str, TransactionMetadata] = {}
    for key_bytes, value_bytes in records:
        key = decode_key(key_bytes)
        if key is None:
            continue
        if value_bytes is None:
            transactions.pop(key.transactional_id, None)
        else:
            value = decode_value(value_bytes)
            transactions[key.transactional_id] = metadata_from(key.transactional_id, value)
    return transactions


class TransactionCoordinator:
    """The transactional ids of every __transaction_state partition this broker leads."""

    def __init__(
        self,
        config: TransactionCoordinatorConfig,
        allocate_producer_id: Callable[[], int],
        group_partition_for: Callable[[str], int],
    ) -> None:
        """`allocate_producer_id` returns an unused producer id or raises a KafkaError (the
        broker's ProducerIdManager.generate_producer_id); `group_partition_for` is the group
        coordinator's __consumer_offsets placement, so AddOffsetsToTxn names the same partition
        the group coordinator writes TxnOffsetCommit to."""
        self.config = config
        self._allocate_producer_id = allocate_producer_id
        self._group_partition_for = group_partition_for
        self._partitions: dict[int, _TxnPartition] = {}
        self._loading: dict[int, int] = {}  # partition -> coordinator epoch being loaded
        self._pending_complete: dict[str, _PendingComplete] = {}

    # -- ownership -------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.transaction_state_log_num_partitions)

    def begin_load(self, txn_partition: int, coordinator_epoch: int) -> None:
        """Leadership arrived: requests for the partition are COORDINATOR_LOAD_IN_PROGRESS
        until `complete_load` (the driver reads the log in between)."""
        self.unload(txn_partition)
        self._loading[txn_partition] = coordinator_epoch

    def complete_load(
        self,
        txn_partition: int,
        coordinator_epoch: int,
        records: Iterable[tuple[bytes, bytes | None]],
        now_ms: int,
    ) -> list[Step]:
        """Install the replayed partition and resume the transactions it left prepared: their
        markers (or, without partitions, their Complete records). Nothing when this load was
        superseded by an unload or a newer epoch. A record that does not decode raises
        CorruptRecordError and leaves the partition loading (Kafka logs it and installs what it
        read so far; we refuse to guess)."""
        if self._loading.get(txn_partition) != coordinator_epoch:
            return []
        transactions = replay(records)
        del self._loading[txn_partition]
        self._partitions[txn_partition] = _TxnPartition(coordinator_epoch, transactions)
        steps = []
        for metadata in transactions.values():
            if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                result = TransactionResult.COMMIT
                if metadata.state == S.PREPARE_ABORT:
                    result = TransactionResult.ABORT
                steps.append(self._start_markers(metadata, coordinator_epoch, result, now_ms)[1])
        return steps

    def load(
        self,
        txn_partition: int,
        coordinator_epoch: int,
        records: Iterable[tuple[bytes, bytes | None]],
        now_ms: int,
    ) -> list[Step]:
        self.begin_load(txn_partition, coordinator_epoch)
        return self.complete_load(txn_partition, coordinator_epoch, records, now_ms)

    def unload(self, txn_partition: int, coordinator_epoch: int | None = None) -> None:
        """Leadership left: forget the partition and cancel its markers. With an epoch, only a
        load of that epoch is cancelled (Kafka's removeTransactionsForTxnTopicPartition)."""
        loading = self._loading.get(txn_partition)
        if loading is not None and coordinator_epoch in (None, loading):
            del self._loading[txn_partition]
        self._partitions.pop(txn_partition, None)
        for transactional_id in list(self._pending_complete):
            if self.partition_for(transactional_id) == txn_partition:
                del self._pending_complete[transactional_id]

    def transaction(self, transactional_id: str) -> TransactionMetadata | None:
        """The loaded state of a transactional id (for DescribeTransactions); do not mutate."""
        loaded = self._partitions.get(self.partition_for(transactional_id))
        return loaded.transactions.get(transactional_id) if loaded is not None else None

    def transactions(self) -> Iterable[TransactionMetadata]:
        """Every loaded transactional id (for ListTransactions)."""
        for loaded in self._partitions.values():
            yield from loaded.transactions.values()

    def _lookup(self, transactional_id: str) -> tuple[ErrorCode, _TxnPartition | None]:
        partition = self.partition_for(transactional_id)
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None
        loaded = self._partitions.get(partition)
        if loaded is None:
            return ErrorCode.NOT_COORDINATOR, None
        return ErrorCode.NONE, loaded

    def _append(
        self,
        loaded: _TxnPartition,
        metadata: TransactionMetadata,
        transit: TxnTransitMetadata,
        origin: AppendOrigin,
        **context: object,
    ) -> TxnLogAppend:
        tid = metadata.transactional_id
        version = value_version_for(self.config.transaction_version_level)
        return TxnLogAppend(
            transactional_id=tid,
            txn_partition=self.partition_for(tid),
            coordinator_epoch=loaded.coordinator_epoch,
            key=encode_key(TransactionLogKey(tid)),
            value=encode_value(value_for(transit), version),
            transit=transit,
            origin=origin,
            timeout_ms=min(transit.txn_timeout_ms, self.config.transaction_max_timeout_ms),
            **context,  # type: ignore[arg-type]
        )

    # -- InitProducerId --------------------------------------------------------------------

    def handle_init_producer_id(
        self,
        transactional_id: str | None,
        transaction_timeout_ms: int,
        now_ms: int,
        expected_producer_id: int = NO_PRODUCER_ID,
        expected_producer_epoch: int = NO_PRODUCER_EPOCH,
        enable_2pc: bool = False,
        keep_prepared_txn: bool = False,
    ) -> Step:
        """InitProducerId. Without a transactional id: a fresh producer id, epoch 0 (idempotent
        producers). With one: the id's producer id with a bumped epoch, after the record is
        written. `expected_*` (KIP-360, both or neither) let a live producer bump its own epoch.
        `enable_2pc` / `keep_prepared_txn`: KIP-939 two-phase commit (module docstring)."""
        if transactional_id is None:
            if enable_2pc or keep_prepared_txn:
                return _init_error(ErrorCode.INVALID_REQUEST)
            return self._init_without_transactional_id()
        if transactional_id == "":
            return _init_error(ErrorCode.INVALID_REQUEST)
        if (expected_producer_id == NO_PRODUCER_ID) != (
            expected_producer_epoch == NO_PRODUCER_EPOCH
        ):
            return _init_error(ErrorCode.INVALID_REQUEST)
        if enable_2pc and not self.config.two_phase_commit_enable:
            # KIP-939: refused as an authorization failure, so a client cannot probe the setting
            return _init_error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if keep_prepared_txn and not enable_2pc:
            return _init_error(ErrorCode.INVALID_REQUEST)
        if enable_2pc:
            transaction_timeout_ms = TWO_PHASE_COMMIT_TIMEOUT_MS
        elif not 0 < transaction_timeout_ms <= self.config.transaction_max_timeout_ms:
            return _init_error(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        error, loaded = self._lookup(transactional_id)
        if loaded is None:
            return _init_error(error)
        metadata = loaded.transactions.get(transactional_id)
        if keep_prepared_txn and metadata is not None and metadata.state == S.ONGOING:
            return _keep_prepared(metadata)
        if metadata is None:
            try:
                producer_id = self._allocate_producer_id()
            except KafkaError as exc:
                return _init_error(exc.error_code)
            metadata = TransactionMetadata(
                transactional_id, producer_id, txn_timeout_ms=transaction_timeout_ms,
                txn_last_update_timestamp_ms=now_ms,
            )  # fmt: skip
            loaded.transactions[transactional_id] = metadata
        expected = None
        if expected_producer_id != NO_PRODUCER_ID:
            expected = (expected_producer_id, expected_producer_epoch)
        prepared = self._prepare_init(metadata, transaction_timeout_ms, expected, now_ms)
        if isinstance(prepared, ErrorCode):
            return _init_error(prepared)
        if prepared.txn_state == S.PREPARE_EPOCH_FENCE:
            return self._end_transaction(
                transactional_id, prepared.producer_id, prepared.producer_epoch,
                TransactionResult.ABORT, False, self.config.transaction_version_level,
                AppendOrigin.FENCE_FOR_INIT, now_ms,
            )  # fmt: skip
        return Step(append=self._append(loaded, metadata, prepared, AppendOrigin.INIT_PRODUCER_ID))

    def _init_without_transactional_id(self) -> Step:
        try:
            return Step(InitProducerIdResult(ErrorCode.NONE, self._allocate_producer_id(), 0))
        except KafkaError as exc:
            return _init_error(exc.error_code)

    def _prepare_init(
        self,
        metadata: TransactionMetadata,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        now_ms: int,
    ) -> TxnTransitMetadata | ErrorCode:
        if metadata.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if expected is not None and not _valid_expected_producer(metadata, *expected):
            return ErrorCode.PRODUCER_FENCED
        state = metadata.state
        if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if state == S.ONGOING:
            # Abort it first, fencing its producer; the caller retries on CONCURRENT_TRANSACTIONS
            # and then gets the epoch bumped once more (or a new producer id if that exhausts it).
            return metadata.prepare_fence_producer_epoch()
        if state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            raise IllegalStateTransitionError(f"{metadata.transactional_id} in {state.kafka_name}")
        expected_epoch = expected[1] if expected is not None else None
        if metadata.is_producer_epoch_exhausted and expected_epoch in (
            None,
            metadata.producer_epoch,
        ):
            try:
                producer_id = self._allocate_producer_id()
            except KafkaError as exc:
                return exc.error_code
            return metadata.prepare_producer_id_rotation(
                producer_id, timeout_ms, now_ms, record_last_epoch=expected is not None
            )
        try:
            return metadata.prepare_increment_producer_epoch(timeout_ms, expected_epoch, now_ms)
        except ProducerFencedError:
            return ErrorCode.PRODUCER_FENCED

    # -- AddPartitionsToTxn, AddOffsetsToTxn -----------------------------------------------

    def handle_add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        now_ms: int,
        client_transaction_version: TransactionVersion = TransactionVersion.TV_0,
    ) -> Step:
        """AddPartitionsToTxn v1-3 from a client (TV_0), and v5+ from a partition leader adding a
        TV2 producer's partition implicitly (TV_2). One error for every partition."""
        wanted = frozenset(partitions)
        prepared = self._prepare_add(
            transactional_id, producer_id, producer_epoch, wanted, now_ms,
            client_transaction_version,
        )  # fmt: skip
        if isinstance(prepared, ErrorCode):
            return Step(AddPartitionsResult(dict.fromkeys(wanted, prepared)))
        loaded, metadata, transit = prepared
        append = self._append(
            loaded, metadata, transit, AppendOrigin.ADD_PARTITIONS, partitions=wanted
        )
        return Step(append=append)

    def handle_add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        now_ms: int,
        client_transaction_version: TransactionVersion = TransactionVersion.TV_0,
    ) -> Step:
        """AddOffsetsToTxn: the group's __consumer_offsets partition joins the transaction, so
        the markers reach the offsets the group coordinator holds for it (TxnOffsetCommit).
        Answers an AddPartitionsResult for that one partition."""
        partition = (OFFSETS_TOPIC, self._group_partition_for(group_id))
        return self.handle_add_partitions(
            transactional_id, producer_id, producer_epoch, [partition], now_ms,
            client_transaction_version,
        )  # fmt: skip

    def handle_verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> Step:
        """AddPartitionsToTxn v4+ with verify_only (KIP-890 part 1): a partition leader asks,
        before appending a transactional batch, whether its partition is in the transaction.
        Nothing is written; a partition not in it is TRANSACTION_ABORTABLE."""
        wanted = frozenset(partitions)
        error, metadata = self._check_producer(transactional_id, producer_id, producer_epoch)
        if error == ErrorCode.NONE and metadata is not None:
            if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                error = ErrorCode.CONCURRENT_TRANSACTIONS
        if error != ErrorCode.NONE or metadata is None:
            return Step(AddPartitionsResult(dict.fromkeys(wanted, error)))
        errors = {
            tp: ErrorCode.NONE
            if tp in metadata.topic_partitions
            else ErrorCode.TRANSACTION_ABORTABLE
            for tp in wanted
        }
        return Step(AddPartitionsResult(errors))

    def _check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[ErrorCode, TransactionMetadata | None]:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        error, loaded = self._lookup(transactional_id)
        if loaded is None:
            return error, None
        metadata = loaded.transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if metadata.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        return ErrorCode.NONE, metadata

    def _prepare_add(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: frozenset[TopicPartition],
        now_ms: int,
        version: TransactionVersion,
    ) -> tuple[_TxnPartition, TransactionMetadata, TxnTransitMetadata] | ErrorCode:
        error, metadata = self._check_producer(transactional_id, producer_id, producer_epoch)
        if metadata is None:
            return error
        if metadata.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if metadata.state == S.ONGOING and partitions <= metadata.topic_partitions:
            return ErrorCode.NONE  # already in: nothing to write
        loaded = self._partitions[self.partition_for(transactional_id)]
        return loaded, metadata, metadata.prepare_add_partitions(partitions, now_ms, version)

    # -- EndTxn ----------------------------------------------------------------------------

    def handle_end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        result: TransactionResult,
        now_ms: int,
        client_transaction_version: TransactionVersion = TransactionVersion.TV_0,
    ) -> Step:
        """EndTxn: commit or abort. TV_2 for EndTxn v5+ (epoch bump per transaction)."""
        return self._end_transaction(
            transactional_id, producer_id, producer_epoch, result, True,
            client_transaction_version, AppendOrigin.END_TXN, now_ms,
        )  # fmt: skip

    def _end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        result: TransactionResult,
        from_client: bool,
        version: TransactionVersion,
        origin: AppendOrigin,
        now_ms: int,
    ) -> Step:
        if not transactional_id:
            return _end_response(origin, ErrorCode.INVALID_REQUEST)
        error, loaded = self._lookup(transactional_id)
        metadata = loaded.transactions.get(transactional_id) if loaded is not None else None
        if loaded is None or metadata is None:
            if loaded is not None:
                error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
            return _end_response(origin, error)
        current = (metadata.producer_id, metadata.producer_epoch)
        prepared = self._prepare_end(
            metadata, producer_id, producer_epoch, result, from_client, version, now_ms
        )
        if isinstance(prepared, ErrorCode):
            if metadata.pending_state == S.PREPARE_EPOCH_FENCE:
                metadata.abort_transition()  # unreachable in Kafka's rules; never leave it set
            if prepared == ErrorCode.NONE:  # a retry of an EndTxn that already completed
                return _end_response(origin, ErrorCode.NONE, *current)
            return _end_response(origin, prepared)
        transit, is_epoch_fence = prepared
        append = self._append(
            loaded, metadata, transit, origin, result=result, producer_id=producer_id,
            producer_epoch=producer_epoch, is_epoch_fence=is_epoch_fence,
        )  # fmt: skip
        return Step(append=append)

    def _prepare_end(
        self,
        md: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        result: TransactionResult,
        from_client: bool,
        version: TransactionVersion,
        now_ms: int,
    ) -> tuple[TxnTransitMetadata, bool] | ErrorCode:
        """Kafka's endTransaction checks, then the transition (and whether it fences)."""
        fencing = md.pending_state == S.PREPARE_EPOCH_FENCE
        v2 = not fencing and md.client_transaction_version.supports_epoch_bump
        retry_on_overflow = (
            v2
            and md.prev_producer_id == producer_id
            and producer_epoch == MAX_PRODUCER_EPOCH - 1
            and md.producer_epoch == 0
        )
        retry_on_bump = _end_txn_epoch_bumped(md, producer_epoch)
        is_retry = retry_on_bump or retry_on_overflow
        if v2:
            if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                valid_epoch = retry_on_bump
            elif md.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
                valid_epoch = is_retry or producer_epoch == md.producer_epoch
            else:
                valid_epoch = producer_epoch == md.producer_epoch
        else:  # v1: the client never bumps its own epoch
            valid_epoch = producer_epoch >= md.producer_epoch and (
                not from_client or producer_epoch == md.producer_epoch
            )
        if md.producer_id != producer_id and not retry_on_overflow:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if not valid_epoch:
            return ErrorCode.PRODUCER_FENCED
        if md.pending_transition_in_progress and not fencing:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return self._end_for_state(md, producer_epoch, result, version, is_retry, v2, now_ms)

    def _end_for_state(
        self,
        md: TransactionMetadata,
        producer_epoch: int,
        result: TransactionResult,
        version: TransactionVersion,
        is_retry: bool,
        v2: bool,
        now_ms: int,
    ) -> tuple[TxnTransitMetadata, bool] | ErrorCode:
        state = md.state
        commit = result == TransactionResult.COMMIT
        if state == S.ONGOING:
            target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            return self._prepare_completion(md, target, producer_epoch, version, now_ms, False)
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            same = (state == S.PREPARE_COMMIT) == commit
            return ErrorCode.CONCURRENT_TRANSACTIONS if same else ErrorCode.INVALID_TXN_STATE
        if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            same = (state == S.COMPLETE_COMMIT) == commit
            if v2 and is_retry:
                return ErrorCode.NONE if same else ErrorCode.INVALID_TXN_STATE
            if not commit and version.supports_epoch_bump:  # a TV2 abort of nothing (KIP-890)
                return self._prepare_completion(
                    md, S.PREPARE_ABORT, producer_epoch, version, now_ms, True
                )
            return ErrorCode.NONE if same and not v2 else ErrorCode.INVALID_TXN_STATE
        if state == S.EMPTY:
            if not commit and version.supports_epoch_bump:
                return self._prepare_completion(
                    md, S.PREPARE_ABORT, producer_epoch, version, now_ms, True
                )
            return ErrorCode.INVALID_TXN_STATE
        raise IllegalStateTransitionError(f"{md.transactional_id} in {state.kafka_name}")

    def _prepare_completion(
        self,
        md: TransactionMetadata,
        target: TransactionState,
        producer_epoch: int,
        version: TransactionVersion,
        now_ms: int,
        no_partition_added: bool,
    ) -> tuple[TxnTransitMetadata, bool] | ErrorCode:
        fencing = md.pending_state == S.PREPARE_EPOCH_FENCE
        next_producer_id = NO_PRODUCER_ID
        if version.supports_epoch_bump and not fencing and md.is_producer_epoch_exhausted:
            try:
                next_producer_id = self._allocate_producer_id()
            except KafkaError as exc:
                return exc.error_code
        if fencing:
            assert target == S.PREPARE_ABORT
            md.begin_fence_abort(producer_epoch)
        transit = md.prepare_abort_or_commit(
            target, version, next_producer_id, now_ms, no_partition_added
        )
        return transit, fencing

    # -- after a __transaction_state write -------------------------------------------------

    def on_append_complete(self, append: TxnLogAppend, error: ErrorCode, now_ms: int) -> Step:
        """The driver's write of `append` finished with `error` (the log's error code; NONE once
        replicated). Completes or drops the transition, then answers and/or sends markers."""
        error = coordinator_error_for_append(error)
        _, loaded = self._lookup(append.transactional_id)
        metadata = loaded.transactions.get(append.transactional_id) if loaded is not None else None
        same_epoch = loaded is not None and loaded.coordinator_epoch == append.coordinator_epoch
        if append.origin == AppendOrigin.EXPIRE_TRANSACTIONAL_ID:
            if metadata is not None and same_epoch and metadata.pending_state == S.DEAD:
                if error == ErrorCode.NONE:  # Kafka removes it; Dead is never completed
                    assert loaded is not None
                    metadata.state = S.DEAD
                    metadata.pending_state = None
                    del loaded.transactions[append.transactional_id]
                else:
                    metadata.abort_transition()
            return Step()
        if error == ErrorCode.NONE:
            if loaded is None:
                error = self._lookup(append.transactional_id)[0]
            elif metadata is None or not same_epoch:
                error = ErrorCode.NOT_COORDINATOR
            else:
                metadata.complete_transition(append.transit)
        elif metadata is not None and same_epoch and not _keeps_pending(append, error):
            metadata.abort_transition()
        return self._after_append(append, error, now_ms)

    def _after_append(self, append: TxnLogAppend, error: ErrorCode, now_ms: int) -> Step:
        origin = append.origin
        if origin == AppendOrigin.INIT_PRODUCER_ID:
            if error != ErrorCode.NONE:
                return _init_error(error)
            transit = append.transit
            return Step(InitProducerIdResult(error, transit.producer_id, transit.producer_epoch))
        if origin == AppendOrigin.ADD_PARTITIONS:
            return Step(AddPartitionsResult(dict.fromkeys(append.partitions, error)))
        if origin == AppendOrigin.COMPLETE_TXN:
            return Step(append=append) if _keeps_pending(append, error) else Step()
        if error != ErrorCode.NONE:
            if append.is_epoch_fence:
                self._note_failed_fence(append)
            return _end_response(origin, error)
        return self._send_markers(append, now_ms)

    def _note_failed_fence(self, append: TxnLogAppend) -> None:
        """The bumped epoch stays in memory though unwritten; the next fence must not bump it
        again (it was never given to anyone)."""
        _, loaded = self._lookup(append.transactional_id)
        if loaded is not None and loaded.coordinator_epoch == append.coordinator_epoch:
            metadata = loaded.transactions.get(append.transactional_id)
            if metadata is not None:
                metadata.has_failed_epoch_fence = True

    def _send_markers(self, append: TxnLogAppend, now_ms: int) -> Step:
        """A Prepare record is replicated: check it still stands, answer, start the markers."""
        assert append.result is not None
        error, loaded = self._lookup(append.transactional_id)
        md = loaded.transactions.get(append.transactional_id) if loaded is not None else None
        if loaded is not None and (
            md is None or loaded.coordinator_epoch != append.coordinator_epoch
        ):
            error = ErrorCode.NOT_COORDINATOR
        elif md is not None:
            error = self._check_prepared(md, append)
        if error != ErrorCode.NONE or md is None or loaded is None:
            return _end_response(append.origin, error)
        transit, step = self._start_markers(md, loaded.coordinator_epoch, append.result, now_ms)
        response = _end_response(
            append.origin, ErrorCode.NONE, transit.producer_id, transit.producer_epoch
        ).response
        return dataclasses.replace(step, response=response)

    def _check_prepared(self, md: TransactionMetadata, append: TxnLogAppend) -> ErrorCode:
        if md.producer_id != append.producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        epoch = append.producer_epoch
        if md.producer_epoch != epoch and not _end_txn_epoch_bumped(md, epoch):
            return ErrorCode.PRODUCER_FENCED
        if md.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        expected = (
            S.PREPARE_COMMIT if append.result == TransactionResult.COMMIT else S.PREPARE_ABORT
        )
        if md.state != expected:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    # -- markers ---------------------------------------------------------------------------

    def _start_markers(
        self,
        md: TransactionMetadata,
        coordinator_epoch: int,
        result: TransactionResult,
        now_ms: int,
    ) -> tuple[TxnTransitMetadata, Step]:
        """Prepare the Complete* transition and send one marker per partition (with the Prepare
        record's producer id and epoch); without partitions, write the Complete* record now.
        Returns the prepared Complete* state too: its producer id and epoch are the client's next."""
        transit = md.prepare_complete(now_ms)
        pending = _PendingComplete(coordinator_epoch, result, transit)
        self._pending_complete[md.transactional_id] = pending
        markers = tuple(
            TxnMarker(md.transactional_id, tp, md.producer_id, md.producer_epoch, result,
                      coordinator_epoch, md.client_transaction_version)
            for tp in sorted(md.topic_partitions)
        )  # fmt: skip
        return transit, Step(markers=markers) if markers else self._maybe_write_completion(md)

    def on_marker_result(self, marker: TxnMarker, error: ErrorCode, now_ms: int) -> Step:
        """The partition leader answered `marker` with `error`. Retriable errors resend it
        (the driver re-resolves the leader); a fenced producer or coordinator epoch cancels the
        transaction's markers (a newer coordinator or producer owns it); when the last partition
        is done the Complete record is to be written."""
        md = self._marker_target(marker)
        if md is None:
            return Step()
        if error in _MARKER_DONE:
            md.remove_partition(marker.topic_partition)
            return self._maybe_write_completion(md)
        if error in _MARKER_RETRY:
            return Step(markers=(marker,))
        if error in _MARKER_CANCEL:
            del self._pending_complete[marker.transactional_id]
            return Step()
        raise IllegalStateTransitionError(
            f"fatal {error.name} writing a marker for {marker.transactional_id}"
        )

    def on_marker_partition_deleted(self, marker: TxnMarker, now_ms: int) -> Step:
        """The partition has no leader any more (its topic was deleted): nothing to mark."""
        md = self._marker_target(marker)
        if md is None:
            return Step()
        md.remove_partition(marker.topic_partition)
        return self._maybe_write_completion(md)

    def _marker_target(self, marker: TxnMarker) -> TransactionMetadata | None:
        """The transaction a marker answer still concerns, or None when it was cancelled."""
        pending = self._pending_complete.get(marker.transactional_id)
        if pending is None or pending.coordinator_epoch != marker.coordinator_epoch:
            return None
        _, loaded = self._lookup(marker.transactional_id)
        if loaded is None or loaded.coordinator_epoch != marker.coordinator_epoch:
            del self._pending_complete[marker.transactional_id]
            return None
        return loaded.transactions.get(marker.transactional_id)

    def _maybe_write_completion(self, md: TransactionMetadata) -> Step:
        if md.topic_partitions:
            return Step()
        pending = self._pending_complete.pop(md.transactional_id)
        loaded = self._partitions[self.partition_for(md.transactional_id)]
        assert loaded.coordinator_epoch == pending.coordinator_epoch
        return Step(append=self._append(loaded, md, pending.transit, AppendOrigin.COMPLETE_TXN))

    # -- timeouts --------------------------------------------------------------------------

    def expired_transactional_ids(self, now_ms: int, expiration_ms: int) -> list[Step]:
        """Kafka's removeExpiredTransactionalIds: every transactional id at rest (Empty,
        CompleteCommit, CompleteAbort, nothing pending) whose last update is at least
        `expiration_ms` (transactional.id.expiration.ms) old is prepared Dead; each Step writes
        its tombstone, and once replicated the id is forgotten (a later InitProducerId starts
        afresh with a new producer id). A failed write leaves it as it was."""
        steps = []
        for loaded in self._partitions.values():
            for md in list(loaded.transactions.values()):
                if (
                    md.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
                    or md.pending_transition_in_progress
                    or md.transactional_id in self._pending_complete
                    or md.txn_last_update_timestamp_ms > now_ms - expiration_ms
                ):
                    continue
                transit = md.prepare_dead()
                append = self._append(loaded, md, transit, AppendOrigin.EXPIRE_TRANSACTIONAL_ID)
                steps.append(Step(append=dataclasses.replace(append, value=None)))
        return steps

    def expired_transactions(self, now_ms: int) -> list[Step]:
        """Abort every transaction Ongoing for longer than its timeout, fencing its producer
        (Kafka's abortTimedOutTransactions; the driver calls this every
        transaction.abort.timed.out.transaction.cleanup.interval.ms). The steps are appends."""
        steps = []
        for loaded in self._partitions.values():
            for md in list(loaded.transactions.values()):
                if md.pending_transition_in_progress or md.state != S.ONGOING:
                    continue
                if md.txn_timeout_ms == TWO_PHASE_COMMIT_TIMEOUT_MS:
                    continue  # KIP-939: a prepared 2PC transaction waits for its coordinator
                if md.txn_start_timestamp_ms + md.txn_timeout_ms >= now_ms:
                    continue
                fence = md.prepare_fence_producer_epoch()
                steps.append(
                    self._end_transaction(
                        md.transactional_id,
                        fence.producer_id,
                        fence.producer_epoch,
                        TransactionResult.ABORT,
                        False,
                        self.config.transaction_version_level,
                        AppendOrigin.TIMEOUT_ABORT,
                        now_ms,
                    )  # fmt: skip
                )
        return steps


def _init_error(error: ErrorCode) -> Step:
    return Step(InitProducerIdResult(error))


def _keep_prepared(metadata: TransactionMetadata) -> Step:
    """KIP-939 keep_prepared_txn on an Ongoing transaction: nothing is written, the transaction
    stays open, and its producer id and epoch are answered for an EndTxn from this caller."""
    if metadata.pending_transition_in_progress:
        return _init_error(ErrorCode.CONCURRENT_TRANSACTIONS)
    pid, epoch = metadata.producer_id, metadata.producer_epoch
    return Step(InitProducerIdResult(ErrorCode.NONE, pid, epoch, pid, epoch))


def _end_response(
    origin: AppendOrigin,
    error: ErrorCode,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
) -> Step:
    """The answer of an EndTxn-like operation, by who started it."""
    if origin == AppendOrigin.END_TXN:
        return Step(EndTxnResult(error, producer_id, producer_epoch))
    if origin == AppendOrigin.FENCE_FOR_INIT:
        # The fenced transaction's abort is under way: the new producer retries InitProducerId.
        return _init_error(ErrorCode.CONCURRENT_TRANSACTIONS if error == ErrorCode.NONE else error)
    return Step()  # TIMEOUT_ABORT: nobody waits


def _keeps_pending(append: TxnLogAppend, error: ErrorCode) -> bool:
    """A Complete record that could not be written is retried with its transition kept pending
    (Kafka retries on COORDINATOR_NOT_AVAILABLE and treats other errors as fatal; we retry those
    too). NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS: the next coordinator completes it."""
    return append.origin == AppendOrigin.COMPLETE_TXN and error not in (
        ErrorCode.NONE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    )


def _end_txn_epoch_bumped(md: TransactionMetadata, producer_epoch: int) -> bool:
    """TV2: the state's epoch is the request's + 1, i.e. this EndTxn was already applied."""
    return (
        md.pending_state != S.PREPARE_EPOCH_FENCE
        and md.client_transaction_version.supports_epoch_bump
        and md.producer_epoch == producer_epoch + 1
    )


def _valid_expected_producer(md: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    """KIP-360: an InitProducerId naming its current producer may bump; a new id (epoch -1)
    is fine too, and so is the previous id at an exhausted epoch (a retried rotation)."""
    return (
        md.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == md.producer_id
        or (producer_id == md.prev_producer_id and is_epoch_exhausted(epoch))
    )
