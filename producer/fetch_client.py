"""FetchClient: a small reading client for tools, tests and the Spark reader (driver).

    async with FetchClient("127.0.0.1:9092") as client:
        earliest = await client.earliest_offset("events", 0)
        latest = await client.latest_offset("events", 0)       # the high watermark
        at = await client.offset_for_time("events", 0, timestamp_ms)
        async for record in client.iter_records("events", 0, earliest, latest):
            ...                                                # DecodedRecord(offset, ...)

Each call finds the partition's leader through the same metadata machinery the producer uses
(refreshing once, after the backoff, on NOT_LEADER_OR_FOLLOWER-type errors), sends ListOffsets
(timestamp -2 earliest, -1 latest) or Fetch (no fetch session) to it, and decodes returned
batches with log.records.reader. `isolation_level` is Kafka's: 0 read_uncommitted (the
default) or 1 read_committed, where "latest" is the last stable offset and the records of
aborted transactions (the fetch response's aborted_transactions, up to their ABORT marker) are
dropped, as Kafka's consumer does. A fetch may end in a partial batch (the
broker cuts at max bytes): it is dropped and fetched again from its offset next time. Records
before the requested offset (a batch starts earlier) are skipped. Every call is bounded:
`max_bytes` per fetch, `request_timeout_ms` per request; a call retries retriable errors (a
leader moving, a dead leader's refused connection) with backoff until `api_timeout_ms` has
passed (Kafka's default.api.timeout.ms, 60 s: a fail-over under load, or a stopped leader
fenced only at its session timeout, takes seconds), or after `max_attempts` if one is given.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import trio

from log.common.errors import ErrorCode, KafkaError, UnknownTopicOrPartitionError, error_for
from log.protocol.fetch import FETCH_REQUEST
from log.protocol.offsets import LIST_OFFSETS_REQUEST
from log.records.batch import DecodedRecord
from log.records.batch_header import HEADER_BYTES, read_header
from log.records.control import ControlRecordType, read_end_txn_marker
from log.records.reader import iter_records
from producer.backoff import backoff_ms
from producer.cluster_view import TopicPartition
from producer.connection import (
    BrokerConnection,
    BrokerConnections,
    Connector,
    open_plaintext,
    parse_bootstrap_servers,
)
from producer.metadata import MetadataUpdater, ProducerMetadata

FETCH_KEY = 1
LAST_FETCH_VERSION_WITH_NAMES = 12  # v13+ names topics by id (KIP-516); we fetch by name
LIST_OFFSETS_KEY = 2
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
CONSUMER_REPLICA_ID = -1
READ_UNCOMMITTED = 0
READ_COMMITTED = 1
DEFAULT_MAX_BYTES = (
    1 << 20
)  # per fetch request and per partition (Kafka's max.partition.fetch.bytes)
DEFAULT_API_TIMEOUT_MS = 60_000  # Kafka's default.api.timeout.ms
RETRY_BACKOFF_MAX_MS = 1000
MAX_FETCH_BYTES = 64 << 20  # the largest fetch iter_records grows to for one huge batch
_RETRY_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.OFFSET_NOT_AVAILABLE,
    }
)


class FetchClient:
    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        client_id: str = "quorumlog-fetch",
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        api_timeout_ms: int = DEFAULT_API_TIMEOUT_MS,
        max_attempts: int | None = None,
        max_wait_ms: int = 100,
        connector: Connector = open_plaintext,
        isolation_level: int = READ_UNCOMMITTED,
    ) -> None:
        if isolation_level not in (READ_UNCOMMITTED, READ_COMMITTED):
            raise ValueError(f"isolation_level must be 0 or 1, got {isolation_level!r}")
        self.isolation_level = isolation_level
        self._bootstrap = parse_bootstrap_servers(bootstrap_servers)
        self.connector = connector  # how connections open (TLS/SASL: producer/connection.py)
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.api_timeout_ms = api_timeout_ms  # a call's retries end after this
        self.max_attempts = max_attempts  # or after this many attempts (None: time only)
        self.max_wait_ms = max_wait_ms

    async def __aenter__(self) -> FetchClient:
        self._nursery_manager = trio.open_nursery()
        nursery = await self._nursery_manager.__aenter__()
        self._nursery = nursery
        self.connections = BrokerConnections(
            nursery,
            client_id=self.client_id,
            max_in_flight=5,
            request_timeout_ms=self.request_timeout_ms,
            connector=self.connector,
        )
        self.metadata = ProducerMetadata(self._bootstrap, retry_backoff_ms=self.retry_backoff_ms)
        self.updater = MetadataUpdater(
            self.metadata, self.connections, request_timeout_ms=self.request_timeout_ms
        )
        nursery.start_soon(self.updater.run)
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        self.updater.close()
        self.connections.close()
        self._nursery.cancel_scope.cancel()
        error = exc_info[1]
        try:
            return await self._nursery_manager.__aexit__(*exc_info)
        except BaseExceptionGroup as group:
            # The body's own error (a KafkaError from a call) comes out as itself, not
            # wrapped by our background nursery: callers catch what the calls raise.
            if error is not None and list(group.exceptions) == [error]:
                raise error from None
            raise

    # -- leaders --------------------------------------------------------------------------------

    async def partition_count(self, topic: str) -> int:
        return await self.updater.wait_for_topic(topic, self.request_timeout_ms)

    async def _leader(self, tp: TopicPartition) -> BrokerConnection:
        await self.partition_count(tp.topic)
        leader = self.metadata.leader_for(tp)
        if leader is None:
            if self.metadata.partition_count(tp.topic) is not None and tp.partition >= (
                self.metadata.partition_count(tp.topic) or 0
            ):
                raise UnknownTopicOrPartitionError(f"{tp} does not exist")
            raise error_for(ErrorCode.LEADER_NOT_AVAILABLE, f"no leader for {tp}")
        address = self.metadata.address(leader)
        assert address is not None
        with trio.fail_after(self.request_timeout_ms / 1000):
            return await self.connections.connected(leader, address.host, address.port)

    async def _with_retries(self, tp: TopicPartition, call: Any) -> Any:
        deadline = trio.current_time() + self.api_timeout_ms / 1000
        attempt = 0
        while True:
            try:
                connection = await self._leader(tp)
                return await call(connection)
            except KafkaError as exc:
                if exc.error_code not in _RETRY_ERRORS:
                    raise
                last: KafkaError = exc
            except trio.TooSlowError:
                last = error_for(ErrorCode.REQUEST_TIMED_OUT, f"connecting to the leader of {tp}")
            attempt += 1
            # Exponential, capped at 1 s: a refused connection fails at once, and a leader
            # change takes from ~0.1 s (a dead broker fenced) to ~1 s (with a Raft election),
            # more on a loaded box or when the old leader is only stopped.
            backoff_s = backoff_ms(self.retry_backoff_ms, attempt, RETRY_BACKOFF_MAX_MS) / 1000
            out_of_attempts = self.max_attempts is not None and attempt >= self.max_attempts
            if out_of_attempts or trio.current_time() + backoff_s > deadline:
                raise last
            self.updater.request_update()
            await trio.sleep(backoff_s)

    # -- ListOffsets ----------------------------------------------------------------------------

    async def list_offset(self, topic: str, partition: int, timestamp_ms: int) -> int:
        """ListOffsets: -2 earliest, -1 latest (high watermark), else the first offset whose
        timestamp is >= timestamp_ms (-1 when there is none)."""
        tp = TopicPartition(topic, partition)

        async def call(connection: BrokerConnection) -> int:
            request: Any = LIST_OFFSETS_REQUEST.cls  # made at run time by schema.py: untyped
            body = request(
                replica_id=CONSUMER_REPLICA_ID,
                isolation_level=self.isolation_level,
                topics=[
                    request.ListOffsetsTopic(
                        name=topic,
                        partitions=[
                            request.ListOffsetsPartition(
                                partition_index=partition, timestamp=timestamp_ms
                            )
                        ],
                    )
                ],
            )
            response = await connection.request(LIST_OFFSETS_KEY, body)
            for topic_response in response.topics:
                for p in topic_response.partitions:
                    if topic_response.name == topic and p.partition_index == partition:
                        if p.error_code != ErrorCode.NONE:
                            raise error_for(p.error_code, f"ListOffsets {tp}")
                        return p.offset
            raise error_for(ErrorCode.UNKNOWN_SERVER_ERROR, f"ListOffsets skipped {tp}")

        return await self._with_retries(tp, call)

    async def earliest_offset(self, topic: str, partition: int) -> int:
        return await self.list_offset(topic, partition, EARLIEST_TIMESTAMP)

    async def latest_offset(self, topic: str, partition: int) -> int:
        return await self.list_offset(topic, partition, LATEST_TIMESTAMP)

    async def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int:
        return await self.list_offset(topic, partition, timestamp_ms)

    # -- Fetch ----------------------------------------------------------------------------------

    async def fetch(
        self, topic: str, partition: int, offset: int, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> tuple[list[DecodedRecord], int, int]:
        """(records from `offset`, the offset after the last whole batch, high watermark).

        Up to about `max_bytes`; the next offset moves past control batches too."""
        tp = TopicPartition(topic, partition)

        async def call(connection: BrokerConnection) -> tuple[list[DecodedRecord], int, int]:
            request: Any = FETCH_REQUEST.cls  # made at run time by schema.py: untyped
            body = request(
                replica_id=CONSUMER_REPLICA_ID,
                max_wait_ms=self.max_wait_ms,
                min_bytes=1,
                max_bytes=max_bytes,
                isolation_level=self.isolation_level,
                session_id=0,
                session_epoch=-1,
                topics=[
                    request.FetchTopic(
                        topic=topic,
                        partitions=[
                            request.FetchPartition(
                                partition=partition,
                                fetch_offset=offset,
                                partition_max_bytes=max_bytes,
                            )
                        ],
                    )
                ],
            )
            version = min(connection.version(FETCH_KEY), LAST_FETCH_VERSION_WITH_NAMES)
            response = await connection.request(FETCH_KEY, body, version)
            if response.error_code != ErrorCode.NONE:
                raise error_for(response.error_code, f"Fetch {tp}")
            for topic_response in response.responses:
                for p in topic_response.partitions:
                    if topic_response.topic == topic and p.partition_index == partition:
                        if p.error_code != ErrorCode.NONE:
                            raise error_for(p.error_code, f"Fetch {tp} at offset {offset}")
                        aborted = p.aborted_transactions if self.isolation_level else None
                        records, next_offset = decode_fetched(p.records, offset, aborted)
                        return records, next_offset, p.high_watermark
            raise error_for(ErrorCode.UNKNOWN_SERVER_ERROR, f"Fetch skipped {tp}")

        return await self._with_retries(tp, call)

    async def iter_records(
        self,
        topic: str,
        partition: int,
        start_offset: int,
        end_offset: int | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> AsyncIterator[DecodedRecord]:
        """Records with start_offset <= offset < end_offset (default: the high watermark now)."""
        if end_offset is None:
            end_offset = await self.latest_offset(topic, partition)
        offset = start_offset
        while offset < end_offset:
            records, next_offset, high_watermark = await self.fetch(
                topic, partition, offset, max_bytes
            )
            for record in records:
                if record.offset >= end_offset:
                    return
                yield record
            if next_offset <= offset:
                if high_watermark <= offset:
                    return  # nothing more to read (the range outruns the log)
                max_bytes *= 2  # a batch bigger than max_bytes: ask for more (bounded below)
                if max_bytes > MAX_FETCH_BYTES:
                    raise error_for(ErrorCode.RECORD_LIST_TOO_LARGE, f"batch at {offset}")
                continue
            offset = next_offset

    async def read_all(
        self, topic: str, partition: int, start_offset: int = 0, end_offset: int | None = None
    ) -> list[DecodedRecord]:
        return [r async for r in self.iter_records(topic, partition, start_offset, end_offset)]


def decode_fetched(
    records: Any, from_offset: int, aborted_transactions: Any = None
) -> tuple[list[DecodedRecord], int]:
    """Decode a fetch response's records: whole batches only, records at >= from_offset;
    also the offset after the last whole batch (from_offset when there is none).
    `aborted_transactions` (read_committed): (producer_id, first_offset) of the aborted
    transactions in range; their batches are skipped until the producer's ABORT marker."""
    next_offset = from_offset
    if records is None:
        return [], next_offset
    view = memoryview(records)
    out: list[DecodedRecord] = []
    position = 0
    end = len(view)
    pending = sorted(
        ((a.first_offset, a.producer_id) for a in aborted_transactions or ()), reverse=True
    )
    aborting: set[int] = set()  # producer ids inside an aborted transaction here
    while end - position >= HEADER_BYTES:
        header = read_header(view, position)
        size = header.size_bytes
        if position + size > end:
            break  # a partial batch at the end: fetched again next time
        while pending and pending[-1][0] <= header.last_offset:
            aborting.add(pending.pop()[1])
        skip = header.is_transactional and header.producer_id in aborting
        if header.is_control and header.producer_id in aborting:
            marker = read_end_txn_marker(view, position)
            if marker is not None and marker.control_type == ControlRecordType.ABORT:
                aborting.discard(header.producer_id)
        if not header.is_control and not skip:
            out.extend(
                record for record in iter_records(view, position) if record.offset >= from_offset
            )
        position += size
        next_offset = max(next_offset, header.next_offset)
    return out, next_offset
