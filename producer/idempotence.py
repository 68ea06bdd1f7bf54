"""IdempotenceManager: the idempotent producer's sequence bookkeeping (Kafka's TransactionManager
without transactions). Sans-IO: the sender calls it with batches and response error codes.

Per partition it keeps the producer id/epoch its sequences belong to, `next_sequence` (the base
sequence of the next new batch = records sent to the partition before it), `last_acked_sequence`
and the in-flight batches ordered by base sequence. A batch gets its sequence when drained and
keeps it across retries, so a retry the broker already wrote is answered as a duplicate instead
of being written twice. Sequences wrap at 2**31.

Producer state::

    NO_PRODUCER_ID --set_producer_id_and_epoch (InitProducerId)--> READY
    READY --request_epoch_bump_for_partition--> READY + bump pending
    bump pending --bump_idempotent_epoch_and_reset_id_if_needed, once safe--> READY (epoch + 1;
        the requesting partitions' in-flight batches re-sequenced from 0 under the new epoch)
    epoch == 32767 and bump pending --> NO_PRODUCER_ID (a fresh InitProducerId is needed)
    any --INVALID_PRODUCER_EPOCH / PRODUCER_FENCED / CLUSTER_AUTHORIZATION_FAILED /
          UNSUPPORTED_VERSION--> FATAL (every later call to send fails)

"Safe" means no request of a partition being re-sequenced is still outstanding: an earlier
attempt that could still be written must not share (epoch, sequence) with a rewritten batch.
Other partitions keep their old epoch until their in-flight batches are done; only then
(`maybe_update_producer_id_and_epoch`, at drain) do they restart at sequence 0 with the new one.

Responses (for a batch with the current producer id):

- NONE, or DUPLICATE_SEQUENCE_NUMBER (the broker already has it; offsets may be unknown, -1):
  success; `last_acked_sequence` advances, the batch leaves the in-flight list.
- retriable errors (NOT_LEADER_OR_FOLLOWER, ...): retried with the same sequence and position.
- OUT_OF_ORDER_SEQUENCE_NUMBER for a batch at or below the last acked sequence: the broker wrote
  it (it accepted later sequences) but forgot it; completed like a duplicate (`is_already_acked`).
- OUT_OF_ORDER_SEQUENCE_NUMBER otherwise: if the batch is not the next expected one (an earlier in-flight
  batch may still land) it is retried as-is; if it *is* next (a real gap: an earlier batch was
  lost) the partition requests an epoch bump and the batch is retried after re-sequencing.
- UNKNOWN_PRODUCER_ID (the broker lost our state, e.g. retention removed it): retried; with a
  known log start offset past our last acked offset, or if the batch was not re-sequenced yet,
  an epoch bump is requested first.
- a batch that fails for good while retries remain requests a bump (its sequences leave a gap);
  one that expired after being sent marks the partition's sequence *unresolved*: no new batch is
  drained there until the in-flight ones finish; then, if the last acked sequence is not just
  before the next sequence, the partition requests a bump (`maybe_resolve_sequences`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from log.common.errors import RETRIABLE, ErrorCode, KafkaError, error_for
from log.records.batch_header import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
from producer.cluster_view import TopicPartition
from producer.producer_batch import ProducerBatch

SEQUENCE_MODULUS = 2**31
MAX_PRODUCER_EPOCH = 32767
NO_LAST_ACKED_SEQUENCE = -1
NO_LAST_ACKED_OFFSET = -1

_FATAL_ERRORS = frozenset(
    {
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.PRODUCER_FENCED,
    }
)


@dataclass(slots=True)
class _PartitionEntry:
    producer_id: int
    producer_epoch: int
    next_sequence: int = 0
    last_acked_sequence: int = NO_LAST_ACKED_SEQUENCE
    last_acked_offset: int = NO_LAST_ACKED_OFFSET
    in_flight: list[ProducerBatch] = field(default_factory=list)  # ordered by base_sequence


class IdempotenceManager:
    def __init__(self) -> None:
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.fatal_error: KafkaError | None = None
        self._partitions: dict[TopicPartition, _PartitionEntry] = {}
        self._epoch_bump_required = False
        self._partitions_to_rewrite_sequences: set[TopicPartition] = set()
        self._unresolved_next_sequence: dict[TopicPartition, int] = {}
        self.transactional = False  # batches carry the transactional flag (Producer sets it)

    # -- producer id and epoch ------------------------------------------------------------------

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID

    @property
    def has_fatal_error(self) -> bool:
        return self.fatal_error is not None

    @property
    def epoch_bump_required(self) -> bool:
        return self._epoch_bump_required

    def set_producer_id_and_epoch(self, producer_id: int, producer_epoch: int) -> None:
        """Adopt an InitProducerId result; partitions restart at sequence 0 lazily (at drain)."""
        assert producer_id >= 0 and 0 <= producer_epoch <= MAX_PRODUCER_EPOCH
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch

    def request_epoch_bump_for_partition(self, topic_partition: TopicPartition) -> None:
        if self.transactional:
            # A transaction cannot re-sequence under a new epoch: it must be aborted (Kafka
            # makes this an abortable error; here the producer stops).
            self.fatal_error = error_for(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"{topic_partition}: sequence lost inside a transaction; abort it",
            )
            return
        self._epoch_bump_required = True
        self._partitions_to_rewrite_sequences.add(topic_partition)

    def bump_idempotent_epoch_and_reset_id_if_needed(self) -> bool:
        """Apply a pending epoch bump once safe; True when an InitProducerId must be sent."""
        if self.has_fatal_error:
            return False
        if self._epoch_bump_required and self._bump_is_safe():
            if self.producer_epoch >= MAX_PRODUCER_EPOCH:
                self.producer_id, self.producer_epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            else:
                self.producer_epoch += 1
            for topic_partition in sorted(self._partitions_to_rewrite_sequences):
                self._start_sequences_at_beginning(topic_partition)
                self._unresolved_next_sequence.pop(topic_partition, None)
            self._partitions_to_rewrite_sequences.clear()
            self._epoch_bump_required = False
        return not self.has_producer_id

    def _bump_is_safe(self) -> bool:
        return not any(
            batch.in_flight_request
            for tp in self._partitions_to_rewrite_sequences
            for batch in self._entry(tp).in_flight
        )

    def _start_sequences_at_beginning(self, topic_partition: TopicPartition) -> None:
        entry = self._entry(topic_partition)
        sequence = 0
        for batch in entry.in_flight:
            batch.reset_producer_state(self.producer_id, self.producer_epoch, sequence)
            sequence = (sequence + batch.record_count) % SEQUENCE_MODULUS
        entry.producer_id, entry.producer_epoch = self.producer_id, self.producer_epoch
        entry.next_sequence = sequence
        entry.last_acked_sequence = NO_LAST_ACKED_SEQUENCE

    # -- per-partition sequences ------------------------------------------------------------------

    def _entry(self, topic_partition: TopicPartition) -> _PartitionEntry:
        entry = self._partitions.get(topic_partition)
        if entry is None:
            entry = _PartitionEntry(self.producer_id, self.producer_epoch)
            self._partitions[topic_partition] = entry
        return entry

    def sequence_number(self, topic_partition: TopicPartition) -> int:
        return self._entry(topic_partition).next_sequence

    def last_acked_sequence(self, topic_partition: TopicPartition) -> int:
        return self._entry(topic_partition).last_acked_sequence

    def last_acked_offset(self, topic_partition: TopicPartition) -> int:
        return self._entry(topic_partition).last_acked_offset

    def in_flight_batches(self, topic_partition: TopicPartition) -> list[ProducerBatch]:
        return list(self._entry(topic_partition).in_flight)

    def has_in_flight_batches(self, topic_partition: TopicPartition) -> bool:
        return bool(self._entry(topic_partition).in_flight)

    def first_in_flight_sequence(self, topic_partition: TopicPartition) -> int:
        in_flight = self._entry(topic_partition).in_flight
        return in_flight[0].base_sequence if in_flight else NO_SEQUENCE

    def has_stale_producer_id_and_epoch(self, topic_partition: TopicPartition) -> bool:
        entry = self._entry(topic_partition)
        return (entry.producer_id, entry.producer_epoch) != (self.producer_id, self.producer_epoch)

    def maybe_update_producer_id_and_epoch(self, topic_partition: TopicPartition) -> None:
        """Restart a partition at sequence 0 under the current id/epoch once nothing is in flight."""
        if self.has_stale_producer_id_and_epoch(topic_partition) and not self.has_in_flight_batches(
            topic_partition
        ):
            self._start_sequences_at_beginning(topic_partition)

    def has_unresolved_sequence(self, topic_partition: TopicPartition) -> bool:
        return topic_partition in self._unresolved_next_sequence

    def _is_next_sequence(self, topic_partition: TopicPartition, sequence: int) -> bool:
        last_acked = self._entry(topic_partition).last_acked_sequence
        return (sequence - last_acked) % SEQUENCE_MODULUS == 1

    # -- drain ------------------------------------------------------------------------------------

    def should_stop_drain(self, first: ProducerBatch) -> bool:
        """Whether the head batch of a partition must wait (Kafka's shouldStopDrainBatchesForPartition)."""
        if not self.has_producer_id or self.has_fatal_error:
            return True
        tp = first.topic_partition
        if tp in self._partitions_to_rewrite_sequences:
            return True  # about to be re-sequenced under a new epoch: send nothing meanwhile
        if not first.has_sequence:
            if self.has_in_flight_batches(tp) and self.has_stale_producer_id_and_epoch(tp):
                return True  # old-epoch batches still in flight: new epoch must wait for them
            if self.has_unresolved_sequence(tp):
                return True
        first_in_flight = self.first_in_flight_sequence(tp)
        # A retried batch goes only when it is the oldest in flight: retries keep order, with
        # effectively one request in flight for the partition until it is resolved.
        return (
            first_in_flight != NO_SEQUENCE
            and first.has_sequence
            and first.base_sequence != first_in_flight
        )

    def assign_sequence(self, batch: ProducerBatch) -> None:
        """Give a newly drained batch its producer state and sequence, and track it in flight."""
        assert not batch.has_sequence and self.has_producer_id
        tp = batch.topic_partition
        self.maybe_update_producer_id_and_epoch(tp)
        entry = self._entry(tp)
        batch.set_producer_state(
            entry.producer_id, entry.producer_epoch, entry.next_sequence, self.transactional
        )
        entry.next_sequence = (entry.next_sequence + batch.record_count) % SEQUENCE_MODULUS
        self.add_in_flight_batch(batch)

    def add_in_flight_batch(self, batch: ProducerBatch) -> None:
        assert batch.has_sequence, "only sequenced batches are tracked in flight"
        in_flight = self._entry(batch.topic_partition).in_flight
        assert batch not in in_flight
        index = len(in_flight)
        while index > 0 and in_flight[index - 1].base_sequence > batch.base_sequence:
            index -= 1
        in_flight.insert(index, batch)

    def remove_in_flight_batch(self, batch: ProducerBatch) -> None:
        in_flight = self._entry(batch.topic_partition).in_flight
        if batch in in_flight:
            in_flight.remove(batch)

    # -- responses --------------------------------------------------------------------------------

    def handle_completed_batch(self, batch: ProducerBatch, base_offset: int) -> None:
        """NONE or DUPLICATE_SEQUENCE_NUMBER: the broker has the batch."""
        entry = self._entry(batch.topic_partition)
        same_producer = (batch.producer_id, batch.producer_epoch) == (
            entry.producer_id,
            entry.producer_epoch,
        )
        if same_producer and batch.has_sequence:
            last = batch.last_sequence
            if (
                entry.last_acked_sequence == NO_LAST_ACKED_SEQUENCE
                or 0 < (last - entry.last_acked_sequence) % SEQUENCE_MODULUS < 2**30
            ):
                entry.last_acked_sequence = last
        if base_offset >= 0:
            entry.last_acked_offset = max(
                entry.last_acked_offset, base_offset + batch.record_count - 1
            )
        self.remove_in_flight_batch(batch)

    def is_already_acked(self, batch: ProducerBatch) -> bool:
        """The broker accepted a later sequence of the same epoch, so it wrote this batch.

        An OUT_OF_ORDER_SEQUENCE_NUMBER for such a batch means the broker no longer remembers
        it (only the last 5 batches are kept): it is a duplicate, completed with unknown
        offsets instead of being retried forever.
        """
        entry = self._entry(batch.topic_partition)
        if not batch.has_sequence or entry.last_acked_sequence == NO_LAST_ACKED_SEQUENCE:
            return False
        if (batch.producer_id, batch.producer_epoch) != (entry.producer_id, entry.producer_epoch):
            return False
        behind = (entry.last_acked_sequence - batch.last_sequence) % SEQUENCE_MODULUS
        return behind < SEQUENCE_MODULUS // 2

    def can_retry(self, batch: ProducerBatch, error_code: int, log_start_offset: int = -1) -> bool:
        """Sequence-wise, may this failed batch be retried? (Kafka's TransactionManager.canRetry)

        May request an epoch bump as a side effect. The caller also checks attempts against
        `retries` and the delivery timeout.
        """
        if batch.producer_id != self.producer_id or self.has_fatal_error:
            return False
        tp = batch.topic_partition
        if error_code == ErrorCode.UNKNOWN_PRODUCER_ID:
            if log_start_offset == -1 or batch.sequence_has_been_reset:
                return True
            self.request_epoch_bump_for_partition(tp)
            return True
        if error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            if not self.has_unresolved_sequence(tp) and (
                batch.sequence_has_been_reset or not self._is_next_sequence(tp, batch.base_sequence)
            ):
                return True  # an earlier batch may still land: wait for it
            self.request_epoch_bump_for_partition(tp)
            return True
        try:
            return ErrorCode(error_code) in RETRIABLE
        except ValueError:
            return False

    def handle_failed_batch(
        self, batch: ProducerBatch, error: KafkaError, adjust_sequence_numbers: bool
    ) -> None:
        """A batch failed for good. Fencing-type errors are fatal to the producer."""
        self.remove_in_flight_batch(batch)
        if error.error_code in _FATAL_ERRORS:
            if self.fatal_error is None:
                self.fatal_error = error
            return
        if batch.producer_id != self.producer_id:
            return  # from an older producer id: its sequences no longer matter
        if error.error_code in (
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            ErrorCode.UNKNOWN_PRODUCER_ID,
        ):
            self.request_epoch_bump_for_partition(batch.topic_partition)
        elif adjust_sequence_numbers:
            self.request_epoch_bump_for_partition(batch.topic_partition)

    def handle_failed_batch_code(
        self, batch: ProducerBatch, error_code: int, adjust_sequence_numbers: bool
    ) -> KafkaError:
        error = error_for(error_code)
        self.handle_failed_batch(batch, error, adjust_sequence_numbers)
        return error

    def mark_sequence_unresolved(self, batch: ProducerBatch) -> None:
        """An expired batch that was sent: we cannot know whether the broker wrote it."""
        assert batch.has_sequence
        next_sequence = (batch.last_sequence + 1) % SEQUENCE_MODULUS
        previous = self._unresolved_next_sequence.get(batch.topic_partition)
        self._unresolved_next_sequence[batch.topic_partition] = (
            next_sequence if previous is None else max(previous, next_sequence)
        )

    def maybe_resolve_sequences(self) -> None:
        """Settle unresolved partitions whose in-flight batches are all done."""
        for tp in sorted(self._unresolved_next_sequence):
            if self.has_in_flight_batches(tp):
                continue
            if not self._is_next_sequence(tp, self.sequence_number(tp)):
                self.request_epoch_bump_for_partition(tp)
            del self._unresolved_next_sequence[tp]
