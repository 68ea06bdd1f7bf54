"""One transactional id's state at its transaction coordinator, sans-IO (Kafka's TransactionMetadata).

A transaction moves through these states (Kafka's TransactionState; the byte is what
__transaction_state stores). Legal transitions, target <- previous states:

    Empty              <- Empty, CompleteCommit, CompleteAbort  (InitProducerId: epoch bump or a
                          new producer id)
    Ongoing            <- Ongoing, Empty, CompleteCommit, CompleteAbort  (AddPartitionsToTxn,
                          AddOffsetsToTxn)
    PrepareCommit      <- Ongoing  (EndTxn commit)
    PrepareAbort       <- Ongoing, PrepareEpochFence, and with transaction version 2 also Empty,
                          CompleteCommit, CompleteAbort (EndTxn abort; a fence's abort; a TV2
                          client aborting a transaction the coordinator never saw a partition of)
    CompleteCommit     <- PrepareCommit  (every marker written)
    CompleteAbort      <- PrepareAbort   (every marker written)
    PrepareEpochFence  <- Ongoing  (InitProducerId or the timeout fences the current producer)
    Dead               <- Empty, CompleteCommit, CompleteAbort  (transactional id expiration)

Two phases, as in Kafka: `prepare_*` checks the transition, builds the `TxnTransitMetadata` to be
written to __transaction_state and records the target as `pending_state`; the metadata itself
changes only in `complete_transition`, called after that record is replicated. A failed write
calls `abort_transition`. One transition at a time: preparing while one is pending is a bug here
(the coordinator answers CONCURRENT_TRANSACTIONS before it gets that far). PrepareEpochFence is
never completed: the coordinator turns it into a PrepareAbort at once, with the bumped epoch
already in memory, so the fenced producer is refused even if that write fails.

Transaction version 2 (KIP-890 part 2) bumps the producer epoch at every PrepareCommit and
PrepareAbort (`last_producer_epoch` keeps the epoch the client used, so a retried EndTxn can be
recognised); when the bump would exhaust the epochs, `next_producer_id` carries a fresh producer
id that CompleteCommit/CompleteAbort switches to, with epoch 0.
"""

from __future__ import annotations

import dataclasses
import enum

from log.common.errors import ErrorCode, KafkaError

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767  # Short.MaxValue: the coordinator alone may use it, to fence
TopicPartition = tuple[str, int]


class TransactionState(enum.IntEnum):
    """Kafka's states and their ids (the TransactionStatus byte of TransactionLogValue)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use ("PrepareCommit")."""
        return "".join(part.capitalize() for part in self.name.split("_"))


class TransactionResult(enum.IntEnum):
    """What a marker says (the control record type: 0 abort, 1 commit)."""

    ABORT = 0
    COMMIT = 1


class TransactionVersion(enum.IntEnum):
    """The `transaction.version` feature level a transition was made under (KIP-890)."""

    TV_0 = 0
    TV_1 = 1  # flexible __transaction_state values
    TV_2 = 2  # epoch bump per transaction, implicit partition adds

    @property
    def supports_epoch_bump(self) -> bool:
        return self >= TransactionVersion.TV_2


S = TransactionState
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset(
        {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    ),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
EXPIRATION_ALLOWED = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})


class IllegalStateTransitionError(KafkaError):
    """A transition Kafka's table forbids, or a completion that does not match its preparation.
    A bug in the coordinator, never a client's doing; should it escape, it is UNKNOWN_SERVER_ERROR."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR


class ProducerFencedError(KafkaError):
    error_code = ErrorCode.PRODUCER_FENCED


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """A client never gets Short.MaxValue, so that the coordinator can always fence it."""
    return producer_epoch >= MAX_PRODUCER_EPOCH - 1


@dataclasses.dataclass(frozen=True)
class TxnTransitMetadata:
    """A prepared transition: the whole next state, as written to __transaction_state."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp_ms: int
    txn_last_update_timestamp_ms: int
    client_transaction_version: TransactionVersion


@dataclasses.dataclass
class TransactionMetadata:
    """The coordinator's view of one transactional id. Mutated only by `complete_transition`
    (and by the two in-memory steps of an epoch fence, see `begin_fence_abort`)."""

    transactional_id: str
    producer_id: int
    prev_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60_000
    state: TransactionState = TransactionState.EMPTY
    topic_partitions: set[TopicPartition] = dataclasses.field(default_factory=set)
    txn_start_timestamp_ms: int = -1
    txn_last_update_timestamp_ms: int = -1
    client_transaction_version: TransactionVersion = TransactionVersion.TV_0
    pending_state: TransactionState | None = None
    # A fence whose write failed already bumped the in-memory epoch: the next fence reuses it.
    has_failed_epoch_fence: bool = False

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def has_pending_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    # -- preparing ----------------------------------------------------------------------------

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Ongoing -> PrepareEpochFence with the epoch bumped (unless a failed fence did it)."""
        bump = not self.has_failed_epoch_fence and self.producer_epoch < MAX_PRODUCER_EPOCH
        epoch = self.producer_epoch + 1 if bump else self.producer_epoch
        return self._prepare(S.PREPARE_EPOCH_FENCE, producer_epoch=epoch)

    def prepare_increment_producer_epoch(
        self, txn_timeout_ms: int, expected_producer_epoch: int | None, now_ms: int
    ) -> TxnTransitMetadata:
        """InitProducerId on a known id: -> Empty with epoch + 1, or the same epoch for a retry of
        a bump the client did not hear about. ProducerFencedError for any other expected epoch."""
        if self.is_producer_epoch_exhausted:
            raise IllegalStateTransitionError(f"{self.transactional_id}: epochs exhausted")
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif (
            self.producer_epoch == NO_PRODUCER_EPOCH
            or expected_producer_epoch == self.producer_epoch
        ):
            epoch, last = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            raise ProducerFencedError(
                f"{self.transactional_id}: expected epoch {expected_producer_epoch} is neither "
                f"{self.producer_epoch} nor {self.last_producer_epoch}"
            )
        return self._prepare(
            S.EMPTY, producer_epoch=epoch, last_producer_epoch=last, txn_timeout_ms=txn_timeout_ms,
            topic_partitions=frozenset(), txn_start_timestamp_ms=-1,
            txn_last_update_timestamp_ms=now_ms,
        )  # fmt: skip

    def prepare_producer_id_rotation(
        self, new_producer_id: int, txn_timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        """InitProducerId when the epochs are exhausted: -> Empty with a new producer id, epoch 0."""
        if self.has_pending_transaction():
            raise IllegalStateTransitionError(f"{self.transactional_id}: rotation mid-transaction")
        last = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(
            S.EMPTY, producer_id=new_producer_id, producer_epoch=0, last_producer_epoch=last,
            txn_timeout_ms=txn_timeout_ms, topic_partitions=frozenset(),
            txn_start_timestamp_ms=-1, txn_last_update_timestamp_ms=now_ms,
        )  # fmt: skip

    def prepare_add_partitions(
        self, partitions: frozenset[TopicPartition], now_ms: int, version: TransactionVersion
    ) -> TxnTransitMetadata:
        """-> Ongoing with these partitions added; a new transaction starts its clock now."""
        starting = self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        return self._prepare(
            S.ONGOING,
            topic_partitions=frozenset(self.topic_partitions) | partitions,
            txn_start_timestamp_ms=now_ms if starting else self.txn_start_timestamp_ms,
            txn_last_update_timestamp_ms=now_ms,
            client_transaction_version=version,
        )

    def prepare_abort_or_commit(
        self,
        new_state: TransactionState,
        version: TransactionVersion,
        next_producer_id: int,
        now_ms: int,
        no_partition_added: bool,
    ) -> TxnTransitMetadata:
        """-> PrepareCommit / PrepareAbort. TV2 bumps the epoch (not past Short.MaxValue on abort)."""
        epoch, last = self.producer_epoch, self.last_producer_epoch
        if version.supports_epoch_bump:
            if not (self.producer_epoch == MAX_PRODUCER_EPOCH and new_state == S.PREPARE_ABORT):
                epoch = self.producer_epoch + 1
            last = self.producer_epoch
        return self._prepare(
            new_state, producer_epoch=epoch, last_producer_epoch=last,
            txn_start_timestamp_ms=now_ms if no_partition_added else self.txn_start_timestamp_ms,
            next_producer_id=next_producer_id, txn_last_update_timestamp_ms=now_ms,
            client_transaction_version=version,
        )  # fmt: skip

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """PrepareCommit/PrepareAbort -> CompleteCommit/CompleteAbort once every marker is written;
        switches to `next_producer_id` (epoch 0) when a TV2 bump exhausted the epochs."""
        self.has_failed_epoch_fence = False  # the Prepare* record made it to the log
        target = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        rotate = (
            self.client_transaction_version.supports_epoch_bump
            and self.next_producer_id != NO_PRODUCER_ID
        )
        return self._prepare(
            target,
            producer_id=self.next_producer_id if rotate else self.producer_id,
            producer_epoch=0 if rotate else self.producer_epoch,
            next_producer_id=NO_PRODUCER_ID,
            topic_partitions=frozenset(),
            txn_last_update_timestamp_ms=now_ms,
        )

    def prepare_dead(self) -> TxnTransitMetadata:
        """-> Dead: the transactional id expired; its record becomes a tombstone."""
        return self._prepare(S.DEAD, topic_partitions=frozenset())

    def _prepare(self, state: TransactionState, **changes: object) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalStateTransitionError(
                f"{self.transactional_id}: preparing {state.kafka_name} while "
                f"{self.pending_state.kafka_name} is pending"
            )
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalStateTransitionError(
                f"{self.transactional_id}: {self.state.kafka_name} -> {state.kafka_name}"
            )
        current = {
            "producer_id": self.producer_id,
            "next_producer_id": self.next_producer_id,
            "producer_epoch": self.producer_epoch,
            "last_producer_epoch": self.last_producer_epoch,
            "txn_timeout_ms": self.txn_timeout_ms,
            "topic_partitions": frozenset(self.topic_partitions),
            "txn_start_timestamp_ms": self.txn_start_timestamp_ms,
            "txn_last_update_timestamp_ms": self.txn_last_update_timestamp_ms,
            "client_transaction_version": self.client_transaction_version,
        }
        current.update(changes)
        transit = TxnTransitMetadata(
            prev_producer_id=self.producer_id,
            txn_state=state,
            **current,  # type: ignore[arg-type]
        )
        if transit.producer_id < 0:
            raise IllegalStateTransitionError(f"illegal producer id {transit.producer_id}")
        if state != S.DEAD and transit.producer_epoch < 0:
            raise IllegalStateTransitionError(f"illegal producer epoch {transit.producer_epoch}")
        self.pending_state = state
        return transit

    # -- completing ---------------------------------------------------------------------------

    def complete_transition(self, transit: TxnTransitMetadata) -> None:
        """The record of `transit` is replicated: adopt it. Checks it against what was prepared."""
        target = self.pending_state
        if target is None or target != transit.txn_state:
            raise IllegalStateTransitionError(
                f"{self.transactional_id}: completing {transit.txn_state.kafka_name}, "
                f"pending {target.kafka_name if target is not None else 'nothing'}"
            )
        if not self._consistent(transit):
            raise IllegalStateTransitionError(f"{self.transactional_id}: unexpected {transit}")
        self.producer_id = transit.producer_id
        self.prev_producer_id = transit.prev_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.topic_partitions = set(transit.topic_partitions)
        self.txn_start_timestamp_ms = transit.txn_start_timestamp_ms
        self.txn_last_update_timestamp_ms = transit.txn_last_update_timestamp_ms
        self.client_transaction_version = transit.client_transaction_version
        self.pending_state = None
        self.state = transit.txn_state

    def abort_transition(self) -> None:
        """The write of the pending transition failed: forget it (the state never changed)."""
        self.pending_state = None

    def begin_fence_abort(self, fenced_epoch: int) -> None:
        """The second half of a fence: drop the pending PrepareEpochFence and take the bumped epoch
        in memory, so the PrepareAbort prepared next carries it (Kafka does the same)."""
        assert self.pending_state == S.PREPARE_EPOCH_FENCE
        self.pending_state = None
        self.producer_epoch = fenced_epoch
        self.last_producer_epoch = NO_PRODUCER_EPOCH

    def remove_partition(self, partition: TopicPartition) -> None:
        """A marker for `partition` is written (or the partition is gone)."""
        if self.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise IllegalStateTransitionError(
                f"{self.transactional_id}: marker acknowledged in {self.state.kafka_name}"
            )
        self.topic_partitions.discard(partition)

    def _consistent(self, transit: TxnTransitMetadata) -> bool:
        """Kafka's completeTransitionTo checks, per target state."""
        target = transit.txn_state
        if target == S.EMPTY:
            same_or_bumped = self.producer_epoch == transit.producer_epoch or (
                self._valid_epoch_bump(transit)
            )
            return (
                same_or_bumped
                and not transit.topic_partitions
                and transit.txn_start_timestamp_ms == -1
            )
        if target == S.ONGOING:
            return (
                self._valid_producer_epoch(transit)
                and transit.topic_partitions >= self.topic_partitions
                and transit.txn_timeout_ms == self.txn_timeout_ms
            )
        if target in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            empty_abort = (
                target == S.PREPARE_ABORT
                and transit.client_transaction_version.supports_epoch_bump
                and self.state in EXPIRATION_ALLOWED
            )
            return (
                self._valid_producer_epoch(transit)
                and transit.topic_partitions == self.topic_partitions
                and transit.txn_timeout_ms == self.txn_timeout_ms
                and (transit.txn_start_timestamp_ms == self.txn_start_timestamp_ms or empty_abort)
            )
        if target in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            return (
                self._valid_producer_epoch(transit)
                and transit.txn_timeout_ms == self.txn_timeout_ms
                and transit.txn_start_timestamp_ms != -1
            )
        return False  # PrepareEpochFence and Dead are never completed

    def _valid_producer_epoch(self, transit: TxnTransitMetadata) -> bool:
        v2 = transit.client_transaction_version.supports_epoch_bump
        completing = transit.txn_state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        if v2 and completing and transit.producer_epoch == 0:  # rotated to next_producer_id
            return (
                transit.last_producer_epoch == self.last_producer_epoch
                and transit.prev_producer_id == self.producer_id
            )
        if v2 and transit.txn_state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return (
                transit.last_producer_epoch == self.producer_epoch
                and transit.producer_id == self.producer_id
            )
        return (
            transit.producer_epoch == self.producer_epoch
            and transit.producer_id == self.producer_id
        )

    def _valid_epoch_bump(self, transit: TxnTransitMetadata) -> bool:
        return transit.producer_epoch == self.producer_epoch + 1 or (
            transit.producer_epoch == 0 and transit.producer_id != self.producer_id
        )
