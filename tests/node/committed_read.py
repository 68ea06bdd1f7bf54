"""What a read_committed confluent-kafka consumer sees in a topic, read to the end of a settled
log instead of until a quiet period passes.

The read ends when (1) at least the expected number of values came, (2) every partition is at
its end (librdkafka's partition EOF, at the fetch position it reached: for read_committed the
last stable offset), and (3) on every partition that position is both the last stable offset
(ListOffsets latest, read_committed) and the high watermark (read_uncommitted), asked after the
EOF: no transaction is open, none was decided since the EOF, and everything below the high
watermark was read. The tests call this once their producers are done, so nothing is written
meanwhile and the values are everything that will be visible, duplicates included. (1) covers a
new leader whose high watermark still lags its log: its records are not readable yet.
"""

from __future__ import annotations

import time


def _ends(committed, uncommitted, topic: str, partitions: list[int]) -> dict[int, tuple]:
    """Partition -> (last stable offset, high watermark), as the partition leaders answer."""
    from confluent_kafka import TopicPartition

    ends = {}
    for p in partitions:
        tp = TopicPartition(topic, p)
        last_stable = committed.get_watermark_offsets(tp, timeout=10, cached=False)[1]
        high_watermark = uncommitted.get_watermark_offsets(tp, timeout=10, cached=False)[1]
        ends[p] = (last_stable, high_watermark)
    return ends


def read_committed(
    bootstrap: str,
    topic: str,
    expected_count: int,
    timeout_s: float = 60,
    partitions: list[int] | None = None,
) -> dict[int, list[bytes]]:
    """Partition -> the values a read_committed consumer sees in `topic` (its `partitions`, by
    default all), in offset order: at least `expected_count` of them, read to the end of the
    settled log (fails after `timeout_s`, a hang guard)."""
    from confluent_kafka import (
        OFFSET_BEGINNING,
        Consumer,
        KafkaError,
        KafkaException,
        TopicPartition,
    )

    deadline = time.monotonic() + timeout_s
    common = {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    committed = Consumer(
        {**common, "isolation.level": "read_committed", "enable.partition.eof": True,
         "fetch.wait.max.ms": 100}
    )  # fmt: skip
    uncommitted = Consumer({**common, "isolation.level": "read_uncommitted"})
    try:
        if partitions is None:
            partitions = sorted(committed.list_topics(topic, timeout=10).topics[topic].partitions)
        assert partitions, f"no partitions of {topic}"
        committed.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        values: dict[int, list[bytes]] = {p: [] for p in partitions}
        end_at: dict[int, int] = {}  # partition -> where its EOF was, until a record comes
        ends: object = None
        while True:
            assert time.monotonic() < deadline, (
                f"{topic}: {sum(map(len, values.values()))} of {expected_count} values, "
                f"EOF at {end_at}, (last stable, high watermark) {ends}"
            )
            for message in committed.consume(1000, 0.2):
                if message.error() is None:
                    values[message.partition()].append(message.value())
                    end_at.pop(message.partition(), None)
                else:
                    assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                    end_at[message.partition()] = message.offset()
            if sum(map(len, values.values())) < expected_count or len(end_at) < len(partitions):
                continue
            try:
                ends = _ends(committed, uncommitted, topic, partitions)
            except KafkaException as exc:  # a partition's leader moving: ask again
                ends = exc
                continue
            if all(end_at[p] == ends[p][0] == ends[p][1] for p in partitions):
                return values
    finally:
        committed.close()
        uncommitted.close()
