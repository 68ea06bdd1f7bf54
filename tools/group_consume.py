"""`quorumlog consume --group G`: consume as a member of a consumer group (driver).

The group protocol (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetCommit,
OffsetFetch, LeaveGroup) is spoken by confluent-kafka's Consumer; this module only maps the
command's options onto it and prints what it returns through the same Printer as plain
consume. Theory of operation:

- The topic is checked first with our AdminClient, so an unknown topic or an unreachable
  cluster is the same one-line error, within seconds, as for plain consume.
- A partition with no committed offset starts at `auto.offset.reset` (--offset earliest /
  --from-beginning: earliest; otherwise latest, as kafka-console-consumer does).
- Offsets are committed after printing: each printed record's offset is stored
  (`enable.auto.offset.store` off, `store_offsets` after the write) and the background
  auto-commit sends what is stored; before LeaveGroup a synchronous commit sends the
  member's position on each assigned partition. poll() is never called again once
  --max-records is printed, so a record fetched but not printed is never committed: the next
  run of the group starts exactly after the last printed record.
- Without --follow the command stops once every partition assigned to this member has
  reached its end (`enable.partition.eof`); with --follow it runs until Ctrl-C or
  --max-records. No assignment within `assignment_timeout_ms` is an error.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

import trio

from log.records.batch import DecodedRecord
from log.records.builder import Header
from tools.admin_client import AdminClient
from tools.cli_support import CommandError
from tools.client_security import PLAINTEXT, ClientSecurity

POLL_TIMEOUT_S = 0.1  # one poll's wait; bounds how late Ctrl-C and the deadline are seen
SESSION_TIMEOUT_MS = 10000  # a crashed member's partitions move after this
HEARTBEAT_INTERVAL_MS = 1000
CLOSE_COMMIT_ATTEMPTS = 3  # a commit during a rebalance fails retriably; try a few times
DEFAULT_ASSIGNMENT_TIMEOUT_MS = 30000


@dataclass(frozen=True, slots=True)
class GroupOptions:
    group: str
    reset: str  # auto.offset.reset for partitions without a committed offset
    follow: bool
    assignment_timeout_ms: int = DEFAULT_ASSIGNMENT_TIMEOUT_MS


def consumer_config(
    bootstrap: str, options: GroupOptions, security: ClientSecurity = PLAINTEXT
) -> dict[str, Any]:
    return {
        **security.confluent,  # --command-config (librdkafka names)
        "bootstrap.servers": bootstrap,
        "group.id": options.group,
        "client.id": "quorumlog-consume",
        "auto.offset.reset": options.reset,
        "enable.auto.commit": True,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
        "fetch.wait.max.ms": 100,
        "allow.auto.create.topics": False,
    }


def to_decoded_record(message: Any) -> DecodedRecord:
    """A confluent-kafka Message as the record type plain consume prints."""
    kind, timestamp_ms = message.timestamp()
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

    headers = tuple(Header(k, v) for k, v in (message.headers() or ()))
    return DecodedRecord(
        message.offset(),
        timestamp_ms,
        message.key(),
        message.value(),
        headers,
        1 if kind == TIMESTAMP_LOG_APPEND_TIME else 0,
    )


async def _check_topic(bootstrap: str, topic: str, security: ClientSecurity) -> None:
    async with AdminClient(bootstrap, connector=security.connector) as admin:
        await admin.describe_topic(topic)  # UnknownTopicOrPartitionError, ConnectionFailedError


def consume_group(
    bootstrap: str,
    topic: str,
    options: GroupOptions,
    printer: Any,
    security: ClientSecurity = PLAINTEXT,
) -> None:
    """Print records as a group member until the end (or forever with follow); commit them."""
    trio.run(_check_topic, bootstrap, topic, security)
    from confluent_kafka import Consumer, KafkaError, KafkaException

    assigned: set[int] = set()
    at_end: set[int] = set()
    positions: dict[int, int] = {}  # partition -> offset after what was printed or seen at EOF
    got_assignment = False

    def on_assign(consumer: Any, partitions: list) -> None:
        nonlocal got_assignment
        got_assignment = True
        assigned.update(p.partition for p in partitions)
        at_end.difference_update(p.partition for p in partitions)

    def on_revoke(consumer: Any, partitions: list) -> None:
        assigned.difference_update(p.partition for p in partitions)

    consumer = Consumer(consumer_config(bootstrap, options, security))
    try:
        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        deadline = time.monotonic() + options.assignment_timeout_ms / 1000
        while not printer.full:
            if not options.follow and got_assignment and assigned <= at_end:
                break
            if not got_assignment and time.monotonic() > deadline:
                raise CommandError(
                    f"group {options.group!r}: no partitions assigned within "
                    f"{options.assignment_timeout_ms} ms"
                )
            message = consumer.poll(POLL_TIMEOUT_S)
            if message is None:
                sys.stdout.flush()  # caught up: what was printed reaches a pipe now
                continue
            error = message.error()
            partition, offset = message.partition(), message.offset()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    assert partition is not None and offset is not None  # an EOF names both
                    at_end.add(partition)
                    positions[partition] = offset
                    continue
                if error.fatal() or not error.retriable():
                    raise CommandError(f"{error.name()}: {error.str()}")
                continue
            assert partition is not None and offset is not None  # a record names both
            at_end.discard(partition)
            printer.emit(partition, to_decoded_record(message))
            consumer.store_offsets(message=message)
            positions[partition] = offset + 1
        sys.stdout.flush()
    except KafkaException as exc:
        raise CommandError(str(exc.args[0].str() if exc.args else exc)) from None
    finally:
        _commit_and_close(consumer, topic, positions, assigned, KafkaException, KafkaError)


def _commit_and_close(
    consumer: Any,
    topic: str,
    positions: dict[int, int],
    assigned: set[int],
    kafka_exception: type[Exception],
    kafka_error: Any,
) -> None:
    """Commit this member's positions on its assigned partitions synchronously, then leave.

    A position is the offset after the last printed record, or the end offset an EOF event
    reported; so a partition whose start was only reset (nothing printed) commits its place
    too, and a group that started at `latest` keeps it, as Java's console consumer does."""
    from confluent_kafka import TopicPartition

    offsets = [TopicPartition(topic, p, positions[p]) for p in sorted(assigned) if p in positions]
    for _ in range(CLOSE_COMMIT_ATTEMPTS if offsets else 0):
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
            break
        except kafka_exception as exc:
            code = exc.args[0].code() if exc.args else None
            if code == kafka_error._NO_OFFSET:  # nothing printed since the last commit
                break
            time.sleep(POLL_TIMEOUT_S)
    consumer.close()
