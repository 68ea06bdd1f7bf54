"""The nemesis's clients: idempotent acks=all producers that record every answer, and the
final read-back (every record from offset 0, and every replica's batches on disk).

Producers are confluent-kafka (librdkafka) in threads, unmodified Kafka clients as users run
them: enable.idempotence, acks=all, retries without end within delivery.timeout.ms. Producer
`p` writes the values "p<p>:<n>" for n = 0, 1, ... round robin over the partitions, paced to
its share of `rate_per_s`; each delivery report lands in `acked` (value -> (partition,
offset)) or `failed` (value -> error), and in the history file.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from log.records.batch_header import iter_batches

DELIVERY_TIMEOUT_MS = 300_000  # librdkafka's default: a write fails only after 5 minutes
# librdkafka's debug contexts for the producers (e.g. "eos,msg,broker"): each producer's debug
# log goes to producer-<p>.log in the run's data directory (a stalled producer says why there)
DEBUG = os.environ.get("QUORUMLOG_NEMESIS_DEBUG", "")


class History:
    """Every event of a run, one JSON object per line (kept with the data)."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("a", buffering=1 << 16)
        self._lock = threading.Lock()
        self._start = time.monotonic()

    def write(self, kind: str, **fields: Any) -> None:
        line = json.dumps({"t": round(time.monotonic() - self._start, 3), "type": kind, **fields})
        with self._lock:
            self._file.write(line + "\n")

    def close(self) -> None:
        with self._lock:
            self._file.close()


class Producers:
    def __init__(self, bootstrap: str, topic: str, partitions: int, count: int,
                 rate_per_s: float, history: History, debug: str = DEBUG,
                 log_dir: Path | None = None) -> None:  # fmt: skip
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.count, self.rate_per_s, self.history = count, rate_per_s, history
        self.debug, self.log_dir = debug, log_dir  # librdkafka's debug contexts, and where
        self.acked: dict[str, tuple[int, int | None]] = {}  # offset None: checker.py
        self.failed: dict[str, str] = {}
        self.sent = 0
        self.errors: list[str] = []  # the producer threads' own failures (not deliveries)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._flush_timeout_s = 60.0
        self._threads = [
            threading.Thread(
                target=self._run, args=(p,), name=f"nemesis-producer-{p}", daemon=True
            )  # fmt: skip
            for p in range(count)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self, flush_timeout_s: float) -> None:
        """Stop producing; wait (up to `flush_timeout_s`) for every outstanding answer."""
        self._flush_timeout_s = flush_timeout_s
        self._stop.set()
        for thread in self._threads:
            thread.join(flush_timeout_s + 30)

    @property
    def unanswered(self) -> int:
        with self._lock:
            return self.sent - len(self.acked) - len(self.failed)

    def _on_delivery(self, error: Any, message: Any) -> None:
        value = message.value().decode()
        with self._lock:
            if error is None:
                self.acked[value] = (message.partition(), message.offset())
            else:
                self.failed[value] = str(error)
        if error is None:
            self.history.write("ack", value=value, partition=message.partition(),
                               offset=message.offset())  # fmt: skip
        else:
            self.history.write("fail", value=value, error=str(error))

    def _run(self, producer_index: int) -> None:
        from confluent_kafka import Producer

        debug_log: logging.FileHandler | None = None
        try:
            debug: dict[str, Any] = {"debug": self.debug} if self.debug else {}
            if self.debug and self.log_dir is not None:  # else to stderr
                debug_log, debug["logger"] = self._file_logger(producer_index)
            producer = Producer({
                "bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                "linger.ms": 5, "delivery.timeout.ms": DELIVERY_TIMEOUT_MS,
                "retry.backoff.ms": 50, "retry.backoff.max.ms": 500,
                "client.id": f"nemesis-{producer_index}", "log_level": 3, **debug,
            })  # fmt: skip
            interval = self.count / self.rate_per_s
            sequence = 0
            next_at = time.monotonic()
            while not self._stop.is_set():
                value = f"p{producer_index}:{sequence}"
                try:
                    producer.produce(self.topic, value.encode(), partition=sequence % self.partitions,
                                     on_delivery=self._on_delivery)  # fmt: skip
                except BufferError:
                    producer.poll(0.05)
                    continue
                with self._lock:
                    self.sent += 1
                sequence += 1
                next_at += interval
                # sleep, not poll(timeout): poll truncates its timeout to whole milliseconds
                time.sleep(max(0.0, next_at - time.monotonic()))
                producer.poll(0)
            remaining = producer.flush(self._flush_timeout_s)
            if remaining:
                self.errors.append(f"producer {producer_index}: {remaining} messages unanswered")
        except Exception as exc:  # noqa: BLE001 - reported in the verdict, never swallowed
            self.errors.append(f"producer {producer_index}: {exc!r}")
        finally:
            if debug_log is not None:
                logging.getLogger(f"{__name__}.producer-{producer_index}").removeHandler(debug_log)
                debug_log.close()

    def _file_logger(self, producer_index: int) -> tuple[logging.FileHandler, logging.Logger]:
        """librdkafka's `logger`: its debug lines (served by poll and flush) go to
        producer-<p>.log in `log_dir`."""
        assert self.log_dir is not None
        logger = logging.getLogger(f"{__name__}.producer-{producer_index}")
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        handler = logging.FileHandler(self.log_dir / f"producer-{producer_index}.log")
        handler.setFormatter(logging.Formatter("%(created).3f %(message)s"))
        logger.addHandler(handler)
        return handler, logger


def read_back(bootstrap: str, topic: str, partitions: int,
              timeout_s: float = 120) -> tuple[dict[int, list[tuple[int, str]]], dict[int, int]]:  # fmt: skip
    """Every record of every partition from offset 0 to its high watermark; and the marks."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "nemesis-check",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "log_level": 3})  # fmt: skip
    try:
        marks = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        read: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + timeout_s
        pending = {p for p in range(partitions) if marks[p] > 0}
        while pending and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                if message.error() is not None:
                    continue
                p, offset, value = message.partition(), message.offset(), message.value()
                assert p is not None and offset is not None  # a record names both
                assert value is not None  # the workload writes no null values
                read[p].append((offset, value.decode(errors="replace")))
                if offset + 1 >= marks[p]:
                    pending.discard(p)
        return read, marks
    finally:
        consumer.close()


def replica_batches(log_dir: Path, topic: str, partition: int, high_watermark: int) -> list[bytes]:
    """The record batches below `high_watermark` in one replica's partition directory."""
    directory = log_dir / f"{topic}-{partition}"
    batches: list[bytes] = []
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        for position, header in iter_batches(data, check_crc=False):
            if header.base_offset >= high_watermark:
                return batches
            batches.append(bytes(data[position : position + header.size_bytes]))
    return batches
