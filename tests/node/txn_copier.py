"""A transactional copier (consume-transform-produce), run as its own process by
test_transactions_copier.py: Kafka's TransactionalMessageCopier, written for confluent-kafka.

    python txn_copier.py BOOTSTRAP TRANSACTIONAL_ID IN_TOPIC OUT_TOPIC P1,P2,.. END1,END2,..

It owns the listed input partitions (assigned, not subscribed: one transactional id per set of
partitions, the fencing model that does not need KIP-447), copies each record to the same
partition of the output topic inside transactions of about TXN_SIZE records, and commits the
consumed positions in the same transaction (send_offsets_to_transaction, group = the
transactional id). It starts from the group's committed positions, read only after
init_transactions has fenced and finished any earlier instance's transaction, and exits 0 once
its positions reach END (the input partitions' end offsets). Killed at any moment and started
again, it must neither lose nor duplicate a record in the committed output.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

TXN_SIZE = 750


def _commit(producer: Producer) -> None:
    """commit_transaction, called again while it fails with a retriable error (the client's
    documented contract: the outcome is not known yet)."""
    while True:
        try:
            producer.commit_transaction(120)
            return
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise
            print(f"commit: retriable {exc.args[0]}", flush=True)
            time.sleep(0.1)


def main() -> int:
    bootstrap, txn_id, in_topic, out_topic, parts_arg, ends_arg = sys.argv[1:7]
    partitions = [int(p) for p in parts_arg.split(",")]
    ends = dict(zip(partitions, (int(e) for e in ends_arg.split(",")), strict=True))
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 20_000,
            "linger.ms": 5,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    producer.init_transactions(120)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": txn_id,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    committed = {
        tp.partition: tp.offset
        for tp in consumer.committed([TopicPartition(in_topic, p) for p in partitions], 60)
    }
    positions = {p: (o if o >= 0 else 0) for p, o in committed.items()}
    print(f"{txn_id} starts at {positions}", flush=True)

    def rewind() -> None:
        consumer.assign(
            [
                TopicPartition(in_topic, p, o if o > 0 else OFFSET_BEGINNING)
                for p, o in positions.items()
            ]
        )

    rewind()
    transactions, reported = 0, time.monotonic()
    while any(positions[p] < ends[p] for p in partitions):
        if time.monotonic() - reported > 5:  # a trace for whoever reads a stuck run's log
            print(f"{txn_id} at {positions} after {transactions} transactions", flush=True)
            reported = time.monotonic()
        producer.begin_transaction()
        pending = dict(positions)
        copied = 0
        deadline = time.monotonic() + 2
        while copied < TXN_SIZE and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.2):
                if msg.error() is not None:
                    continue
                producer.produce(out_topic, msg.value(), msg.key(), partition=msg.partition())
                pending[msg.partition()] = msg.offset() + 1
                copied += 1
            if all(pending[p] >= ends[p] for p in partitions):
                break
        offsets = [TopicPartition(in_topic, p, o) for p, o in pending.items()]
        try:
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 60)
            _commit(producer)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.fatal():
                print(f"{txn_id} fatal: {error}", flush=True)
                return 3
            if not error.txn_requires_abort():
                print(f"{txn_id} commit failed, not abortable: {error}", flush=True)
                return 4
            print(f"{txn_id} aborting: {error}", flush=True)
            producer.abort_transaction(120)
            rewind()
            continue
        positions = pending
        transactions += 1
    print(f"{txn_id} done at {positions}", flush=True)
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
