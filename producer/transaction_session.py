"""TransactionSession: the transactional producer's state (Kafka's TransactionManager, the
transactional half; the sequences stay with IdempotenceManager).

    Uninitialized --init--> Ready --begin--> InTransaction --prepare--> Prepared
    InTransaction / Prepared --commit / abort (EndTxn)--> Ready
    Uninitialized --init(keep_prepared_txn) with a transaction left open--> Prepared

`partitions` are those AddPartitionsToTxn added to the open transaction: the sender adds a
partition before the first Produce of a batch to it (sender.py), and the coordinator then
writes the transaction's markers to exactly those partitions. Prepared (KIP-939) means flushed
and not ended: this process or another one (TransactionClient.end_txn with the producer id and
epoch `prepare` returned) commits or aborts it later.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from log.common.errors import ErrorCode, KafkaError, error_for
from producer.cluster_view import TopicPartition
from producer.idempotence import IdempotenceManager
from producer.transaction_client import InitResult, TransactionClient


class TxnState(enum.Enum):
    UNINITIALIZED = "Uninitialized"
    READY = "Ready"
    IN_TRANSACTION = "InTransaction"
    PREPARED = "Prepared"


class TransactionSession:
    def __init__(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        enable_2pc: bool,
        client: TransactionClient,
        idempotence: IdempotenceManager,
    ) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.enable_2pc = enable_2pc
        self.client = client
        self.idempotence = idempotence
        self.state = TxnState.UNINITIALIZED
        self.partitions: set[TopicPartition] = set()
        idempotence.transactional = True

    def _require(self, *states: TxnState) -> None:
        if self.state not in states:
            raise error_for(
                ErrorCode.INVALID_TXN_STATE,
                f"transactional id {self.transactional_id!r} is {self.state.value}",
            )

    async def init(self, keep_prepared_txn: bool = False) -> InitResult:
        """InitProducerId: fences earlier instances (aborting their open transaction unless
        `keep_prepared_txn`, KIP-939, which needs 2PC and leaves it Prepared here)."""
        self._require(TxnState.UNINITIALIZED, TxnState.READY)
        result = await self.client.init_producer_id(
            self.transactional_id, self.transaction_timeout_ms,
            enable_2pc=self.enable_2pc, keep_prepared_txn=keep_prepared_txn,
        )  # fmt: skip
        self.idempotence.set_producer_id_and_epoch(result.producer_id, result.producer_epoch)
        self.partitions.clear()
        self.state = TxnState.PREPARED if result.ongoing[0] >= 0 else TxnState.READY
        return result

    def begin(self) -> None:
        self._require(TxnState.READY)
        self.partitions.clear()
        self.state = TxnState.IN_TRANSACTION

    @property
    def can_send(self) -> bool:
        return self.state == TxnState.IN_TRANSACTION

    async def add_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        new = set(partitions) - self.partitions
        if not new:
            return
        self._require(TxnState.IN_TRANSACTION)
        await self.client.add_partitions(
            self.transactional_id, self.idempotence.producer_id,
            self.idempotence.producer_epoch, ((tp.topic, tp.partition) for tp in new),
        )  # fmt: skip
        self.partitions |= new

    def prepared(self) -> tuple[int, int]:
        """In transaction (everything flushed by the caller) -> Prepared; its (id, epoch)."""
        self._require(TxnState.IN_TRANSACTION, TxnState.PREPARED)
        self.state = TxnState.PREPARED
        return self.idempotence.producer_id, self.idempotence.producer_epoch

    async def end(self, commit: bool) -> None:
        """EndTxn. A transaction that added no partition has nothing at the coordinator."""
        self._require(TxnState.IN_TRANSACTION, TxnState.PREPARED)
        fatal = self.idempotence.fatal_error
        if commit and fatal is not None:
            raise fatal
        if self.partitions or self.state == TxnState.PREPARED:
            try:
                await self.client.end_txn(
                    self.transactional_id, self.idempotence.producer_id,
                    self.idempotence.producer_epoch, commit=commit,
                )  # fmt: skip
            except KafkaError as exc:
                # Prepared by init(keep_prepared_txn) with nothing added: nothing to end.
                if exc.error_code != ErrorCode.INVALID_TXN_STATE or self.partitions:
                    raise
        self.partitions.clear()
        self.state = TxnState.READY
