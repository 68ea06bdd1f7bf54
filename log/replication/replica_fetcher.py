"""ReplicaFetcher: one trio task fetching partitions from one source broker (Kafka's
ReplicaFetcherThread), the I/O driver around the sans-IO `FetcherState`.

Each round (`_do_work`) asks `FetcherState.poll` what to do and does it, in Kafka's order:

1. partitions with no epoch information truncate to their high watermark at once;
2. partitions in TRUNCATING send one OffsetForLeaderEpoch request (v3, replica_id = our broker
   id, current leader epoch) and truncate where the answers say (KIP-101/279);
3. partitions in FETCHING send one Fetch request (v11, replica_id = our broker id, current
   leader epoch, `replica.fetch.max.bytes` per partition, `replica.fetch.response.max.bytes`,
   `replica.fetch.wait.max.ms`, `replica.fetch.min.bytes`) -- the leader long-polls it -- and
   each partition's answer is applied: truncate (when told), `append_as_follower`, adopt the
   leader's high watermark and log start offset.

Errors: a failed connection or request backs every partition off `replica.fetch.backoff.ms`
(the cores' DELAYED state) and reconnects; a partition error backs off that partition only.
OFFSET_OUT_OF_RANGE asks the leader's log start/end (ListOffsets v2, replica_id = us) and
resets as the core decides. Partitions come and go between rounds (`FetcherState.add_partition`
/ `remove_partition`, called by the `ReplicaFetcherManager` when leadership changes); a response
for a partition whose `FollowerState` was replaced meanwhile is dropped.

The connection is deliberately minimal: one request at a time (a fetcher never pipelines), plain
TCP read and written on its descriptor (log/common/socket_io.py), the
sans-IO `ClientCodec` for framing, every exchange under `request_timeout_ms`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import trio

from log.common import socket_io
from log.common.errors import ErrorCode, KafkaError
from log.common.vectored_send import send_parts
from log.protocol.client_codec import ClientCodec
from log.protocol.fetch import FETCH_REQUEST
from log.protocol.offsets import LIST_OFFSETS_REQUEST, OFFSET_FOR_LEADER_EPOCH_REQUEST
from log.records.batch_header import iter_batches
from log.replication.fetch_session_handler import SESSION_ERRORS
from log.replication.follower_state import (
    FetcherState,
    FetchOutcome,
    FollowerState,
    RecordsMeta,
    TruncationDecision,
)
from log.replication.unified_replica_log import UnifiedReplicaLog
from log.storage.log import UnifiedLog
from quorum.image import MetadataImage

logger = logging.getLogger(__name__)

FETCH_KEY, FETCH_VERSION = 1, 17  # v13+ topic ids, v12+ diverging epochs, v15+ our broker epoch
ZERO_UUID = uuid.UUID(int=0)
LIST_OFFSETS_KEY, LIST_OFFSETS_VERSION = 2, 2
OFFSET_FOR_LEADER_EPOCH_KEY, OFFSET_FOR_LEADER_EPOCH_VERSION = 23, 3
MAX_READ_BYTES = 1 << 20
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1

TopicPartition = tuple[str, int]
EndpointLookup = Callable[[int], tuple[str, int] | None]


@dataclass(frozen=True)
class FetcherConfig:
    """The follower's fetch settings (Kafka's names), validated once."""

    broker_id: int
    replica_fetch_max_bytes: int = 1_048_576
    replica_fetch_response_max_bytes: int = 10_485_760
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_backoff_ms: int = 1000
    request_timeout_ms: int = 30_000
    # How to reach the leader: inter_broker_connector.py (TLS/SASL per the inter-broker
    # listener); None is plain TCP.
    connect: Callable[[str, int], Awaitable[Any]] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        assert self.broker_id >= 0
        assert 0 < self.replica_fetch_max_bytes <= self.replica_fetch_response_max_bytes
        assert self.replica_fetch_min_bytes >= 0 and self.replica_fetch_backoff_ms >= 0
        # A long-polled fetch must come back before we give up on it.
        assert self.replica_fetch_wait_max_ms < self.request_timeout_ms


class ConnectionLostError(KafkaError):
    error_code = ErrorCode.NETWORK_EXCEPTION


class LeaderConnection:
    """One TCP connection to the source broker; one request at a time."""

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        connect: Callable[[str, int], Awaitable[Any]] | None = None,
    ) -> None:
        self.host, self.port = host, port
        self._connect = connect or trio.open_tcp_stream
        self._codec = ClientCodec(client_id=client_id, max_in_flight=1)
        self._stream: Any = None  # a trio SocketStream, or SSLStream around one

    async def request(self, api_key: int, api_version: int, body: Any) -> Any:
        try:
            if self._stream is None:
                self._stream = await self._connect(self.host, self.port)
            frame = self._codec.encode_request(api_key, api_version, body)
            await send_parts(self._stream, [frame])  # plain TCP: one system call per step
            receive = socket_io.receiver(self._stream)
            while True:
                data = await receive(MAX_READ_BYTES)
                if not data:
                    raise ConnectionLostError(f"{self.host}:{self.port} closed the connection")
                responses = self._codec.receive_data(data)
                if responses:
                    return responses[0].body
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise ConnectionLostError(f"{self.host}:{self.port}: {exc}") from exc

    async def aclose(self) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            with trio.CancelScope(shield=True):
                await stream.aclose()


class ReplicaFetcher:
    """Fetches the partitions in `state` from `state.source_broker_id`."""

    def __init__(
        self,
        config: FetcherConfig,
        state: FetcherState,
        endpoint_for: EndpointLookup,
        clock_ms: Callable[[], int],
        on_high_watermark: Callable[[TopicPartition], None] = lambda tp: None,
        on_storage_error: Callable[[BaseException], None] = lambda exc: None,
        image: Callable[[], MetadataImage] = MetadataImage,
        broker_epoch: Callable[[], int] = lambda: -1,
    ) -> None:
        self.config = config
        self.on_storage_error = on_storage_error  # may take the log directory offline
        self.image = image  # our metadata image: Fetch v13+ names topics by id
        self.broker_epoch = broker_epoch  # our registration's, sent in every fetch (KIP-903)
        self.state = state
        self.endpoint_for = endpoint_for
        self.clock_ms = clock_ms
        self.on_high_watermark = on_high_watermark
        self.logs: dict[TopicPartition, UnifiedLog] = {}
        self._wakeup = trio.Event()
        self._connection: LeaderConnection | None = None
        self.failures_in_row = 0
        # When the connection to the source broker failed with no fetch answered since (None:
        # it works), and that broker's epoch in our image then: Metadata answers wait for a new
        # leader meanwhile (a dead leader's followers know before the controller fences it:
        # log/server/broker_failure_view.py), unless it registered again.
        self.unreachable_since_ms: int | None = None
        self.unreachable_broker_epoch = -1

    # -- membership (called by the manager, from the trio thread) --------------------------

    def add_partition(self, tp: TopicPartition, log: UnifiedLog, follower: FollowerState) -> None:
        self.state.add_partition(tp, follower)
        self.logs[tp] = log
        self.wake()

    def remove_partition(self, tp: TopicPartition) -> None:
        self.state.remove_partition(tp)
        self.logs.pop(tp, None)

    def wake(self) -> None:
        self._wakeup.set()

    def _log_for(self, tp: object) -> UnifiedReplicaLog:
        assert isinstance(tp, tuple)  # the fetcher state is keyed by (topic, partition)
        return UnifiedReplicaLog(self.logs[tp])

    # -- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            while True:
                if not self.state.partitions:
                    self._wakeup = trio.Event()
                    await self._wakeup.wait()
                    continue
                try:
                    waited = await self._do_work()
                    self.failures_in_row = 0
                    if waited:  # a request was answered
                        self.unreachable_since_ms = None
                except (KafkaError, trio.TooSlowError) as exc:
                    if isinstance(exc, (ConnectionLostError, trio.TooSlowError)):
                        self._note_unreachable()
                    # The first failure in a row at INFO; the retries (every back-off) at DEBUG.
                    level = logging.DEBUG if self.failures_in_row else logging.INFO
                    self.failures_in_row += 1
                    logger.log(
                        level, "fetcher from broker %s: %r", self.state.source_broker_id, exc
                    )
                    await self._back_off_all()
                    waited = False
                except Exception:  # a bug must not take the broker down: log, back off
                    logger.exception("fetcher from broker %s failed", self.state.source_broker_id)
                    await self._back_off_all()
                    waited = False
                if not waited:
                    await self._sleep_until_ready()
        finally:
            await self._drop_connection()

    def _note_unreachable(self) -> None:
        if self.unreachable_since_ms is None:
            self.unreachable_since_ms = self.clock_ms()
            source = self.image().brokers.get(self.state.source_broker_id)
            self.unreachable_broker_epoch = -1 if source is None else source.broker_epoch

    async def _back_off_all(self) -> None:
        """The connection or a request failed: every partition waits replica.fetch.backoff.ms."""
        await self._drop_connection()
        now_ms = self.clock_ms()
        for follower in self.state.partitions.values():
            follower.on_error(ErrorCode.NETWORK_EXCEPTION, now_ms)

    async def _sleep_until_ready(self) -> None:
        wakeup_ms = self.state.next_wakeup_ms()
        now_ms = self.clock_ms()
        delay_ms = self.config.replica_fetch_backoff_ms if wakeup_ms is None else wakeup_ms - now_ms
        if delay_ms <= 0:
            return
        self._wakeup = trio.Event()
        with trio.move_on_after(delay_ms / 1000):
            await self._wakeup.wait()

    async def _drop_connection(self) -> None:
        self.state.session.reset()  # the next fetch is full, on whatever connection
        if self._connection is not None:
            connection, self._connection = self._connection, None
            await connection.aclose()

    async def _request(self, api_key: int, api_version: int, body: Any) -> Any:
        if self._connection is None:
            endpoint = self.endpoint_for(self.state.source_broker_id)
            if endpoint is None:
                raise ConnectionLostError(f"no endpoint for broker {self.state.source_broker_id}")
            self._connection = LeaderConnection(
                *endpoint,
                client_id=f"replica-fetcher-{self.config.broker_id}",
                connect=self.config.connect,
            )
        # move_on_after is a bare CancelScope; fail_after wraps one in a generator context
        # manager, which costs more than the rest of the deadline on a follower's every fetch.
        with trio.move_on_after(self.config.request_timeout_ms / 1000):
            return await self._connection.request(api_key, api_version, body)
        raise trio.TooSlowError

    async def _do_work(self) -> bool:
        """One round; True when a request went out (so no idle sleep is needed)."""
        poll = self.state.poll(self.clock_ms(), self._log_for)
        for tp, decision in poll.truncate_now.items():
            assert isinstance(tp, tuple)  # the fetcher state is keyed by (topic, partition)
            self._truncate(tp, decision)
        sent = False
        if poll.epoch_queries:
            await self._truncate_by_epoch(poll.epoch_queries)
            sent = True
        if poll.fetch:
            await self._fetch(poll.fetch)
            sent = True
        return sent or bool(poll.truncate_now)

    # -- truncation ---------------------------------------------------------------------------

    def _truncate(self, tp: tuple[str, int], decision: TruncationDecision) -> None:
        log = self.logs.get(tp)
        if log is None:
            return
        try:
            self._cut(tp, log, decision)
        except (KafkaError, OSError) as exc:  # e.g. the epoch checkpoint cannot be rewritten
            logger.warning("%s: truncation to %s failed, asking the leader again after the "
                           "back-off: %s", tp, decision.offset, exc)  # fmt: skip
            code = exc.error_code if isinstance(exc, KafkaError) else ErrorCode.KAFKA_STORAGE_ERROR
            self.on_storage_error(exc)
            follower = self.state.partitions.get(tp)
            if follower is not None:
                follower.on_truncation_failed(code, self.clock_ms())

    def _cut(self, tp: tuple[str, int], log: UnifiedLog, decision: TruncationDecision) -> None:
        if decision.fully:
            log.truncate_fully_and_start_at(decision.offset)
        elif decision.offset < log.log_end_offset:
            logger.info("%s-%s: truncating %s -> %s", *tp, log.log_end_offset, decision.offset)
            log.truncate_to(decision.offset)
        else:
            log.truncate_to(decision.offset)  # drops epoch entries at the log end offset

    async def _truncate_by_epoch(self, queries: dict) -> None:
        followers = {tp: self.state.partitions.get(tp) for tp in queries}
        Q = OFFSET_FOR_LEADER_EPOCH_REQUEST.cls  # noqa: N806
        by_topic: dict[str, list] = {}
        for (topic, partition), query in queries.items():
            by_topic.setdefault(topic, []).append(
                Q.OffsetForLeaderPartition(
                    partition=partition,
                    current_leader_epoch=query.current_leader_epoch,
                    leader_epoch=query.leader_epoch,
                )
            )
        body = Q(
            replica_id=self.config.broker_id,
            topics=[Q.OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
        )
        response = await self._request(
            OFFSET_FOR_LEADER_EPOCH_KEY, OFFSET_FOR_LEADER_EPOCH_VERSION, body
        )
        now_ms = self.clock_ms()
        for topic_result in response.topics:
            for p in topic_result.partitions:
                tp = (topic_result.topic, p.partition)
                follower = self.state.partitions.get(tp)
                if follower is None or follower is not followers.get(tp):
                    continue
                if p.error_code != ErrorCode.NONE:
                    follower.on_error(ErrorCode(p.error_code), now_ms)
                    continue
                decision = follower.on_epoch_end_offset(
                    p.leader_epoch, p.end_offset, self._log_for(tp)
                )
                if decision is not None:
                    self._truncate(tp, decision)

    # -- fetching -----------------------------------------------------------------------------

    async def _fetch(self, fetches: dict) -> None:
        followers = {tp: self.state.partitions.get(tp) for tp in fetches}
        session = self.state.session.build(fetches)
        F = FETCH_REQUEST.cls  # noqa: N806
        by_topic: dict[str, list] = {}
        for (topic, partition), fetch in session.to_send.items():
            by_topic.setdefault(topic, []).append(
                F.FetchPartition(
                    partition=partition,
                    current_leader_epoch=fetch.current_leader_epoch,
                    fetch_offset=fetch.fetch_offset,
                    last_fetched_epoch=fetch.last_fetched_epoch,
                    log_start_offset=fetch.log_start_offset,
                    partition_max_bytes=fetch.partition_max_bytes,
                )
            )
        image = self.image()  # one image for the request and its answer
        ids = image.topic_ids_by_name
        body = F(
            replica_state=F.ReplicaState(
                replica_id=self.config.broker_id, replica_epoch=self.broker_epoch()
            ),
            max_wait_ms=self.config.replica_fetch_wait_max_ms,
            min_bytes=self.config.replica_fetch_min_bytes,
            max_bytes=self.config.replica_fetch_response_max_bytes,
            isolation_level=0,
            session_id=session.session_id,
            session_epoch=session.session_epoch,
            topics=[
                F.FetchTopic(topic_id=ids.get(t, ZERO_UUID), partitions=ps)
                for t, ps in by_topic.items()
            ],
            forgotten_topics_data=_forgotten_topics(F, session.forgotten, ids),
            rack_id="",
        )
        try:
            response = await self._request(FETCH_KEY, FETCH_VERSION, body)
        except BaseException:
            self.state.session.reset()
            raise
        if not self.state.session.on_response(response.error_code, response.session_id):
            error = ErrorCode(response.error_code)
            if error in SESSION_ERRORS:
                logger.debug("fetch session with broker %s: %s, starting a new one",
                             self.state.source_broker_id, error.name)  # fmt: skip
                return  # the next round sends a full fetch at once
            raise KafkaError(f"fetch failed with {error.name}")
        for topic_response in response.responses:
            known = image.topics.get(topic_response.topic_id)
            if known is None:
                continue  # not a topic we know (any of the session's may be answered)
            topic = known.name
            for p in topic_response.partitions:
                tp = (topic, p.partition_index)
                follower = self.state.partitions.get(tp)
                request = fetches.get(tp)
                if follower is None or request is None or follower is not followers.get(tp):
                    continue  # removed or replaced while the fetch was out
                await self._apply_fetched(tp, follower, request, p)

    async def _apply_fetched(self, tp: Any, follower: FollowerState, request: Any, p: Any) -> None:
        log = self.logs[tp]
        records = bytes(p.records) if p.records else b""
        meta = None
        try:
            if records:
                headers = [h for _, h in iter_batches(records, check_crc=False)]
                if headers:
                    meta = RecordsMeta(
                        headers[0].base_offset, headers[-1].next_offset, len(records)
                    )
        except KafkaError as exc:
            logger.warning("%s: bad fetched records: %s", tp, exc)
            follower.on_error(exc.error_code, self.clock_ms())
            return
        now_ms = self.clock_ms()
        diverging = p.diverging_epoch
        outcome = follower.on_fetch_response(
            request,
            ErrorCode(p.error_code),
            p.high_watermark,
            p.log_start_offset,
            meta,
            UnifiedReplicaLog(log),
            now_ms,
            (diverging.epoch, diverging.end_offset) if diverging.epoch >= 0 else None,
        )
        if outcome.needs_leader_offsets:
            await self._reset_out_of_range(tp, follower)
            return
        self._apply_outcome(tp, follower, outcome, log, records, now_ms)

    def _apply_outcome(
        self,
        tp: Any,
        follower: FollowerState,
        outcome: FetchOutcome,
        log: UnifiedLog,
        records: bytes,
        now_ms: int,
    ) -> None:
        if outcome.ignored or outcome.error != ErrorCode.NONE:
            return
        if outcome.truncation is not None:
            self._truncate(tp, outcome.truncation)
        if outcome.append:
            try:
                log.append_as_follower(records, now_ms)
            except KafkaError as exc:
                logger.warning("%s: follower append failed: %s", tp, exc)
                self.on_storage_error(exc)
                follower.on_error(exc.error_code, now_ms)
                return
            self.state.mark_fetched(tp)
        replica_log = UnifiedReplicaLog(log)
        if outcome.high_watermark is not None:
            replica_log.update_high_watermark(outcome.high_watermark)
            self.on_high_watermark(tp)
        if outcome.log_start_offset is not None:
            replica_log.maybe_increment_log_start_offset(outcome.log_start_offset)

    async def _reset_out_of_range(self, tp: Any, follower: FollowerState) -> None:
        """OFFSET_OUT_OF_RANGE: ask the leader's log start and end, reset as the core says."""
        topic, partition = tp
        offsets = {}
        L = LIST_OFFSETS_REQUEST.cls  # noqa: N806
        for timestamp in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP):
            body = L(
                replica_id=self.config.broker_id,
                isolation_level=0,
                topics=[
                    L.ListOffsetsTopic(
                        name=topic,
                        partitions=[
                            L.ListOffsetsPartition(partition_index=partition, timestamp=timestamp)
                        ],
                    )
                ],
            )
            response = await self._request(LIST_OFFSETS_KEY, LIST_OFFSETS_VERSION, body)
            answer = response.topics[0].partitions[0]
            if answer.error_code != ErrorCode.NONE:
                follower.on_error(ErrorCode(answer.error_code), self.clock_ms())
                return
            offsets[timestamp] = answer.offset
        if self.state.partitions.get(tp) is not follower:
            return
        log = self.logs[tp]
        decision = follower.on_leader_offsets(
            offsets[EARLIEST_TIMESTAMP], offsets[LATEST_TIMESTAMP], UnifiedReplicaLog(log)
        )
        if decision is not None:
            self._truncate(tp, decision)


def _forgotten_topics(F: Any, forgotten: list, ids: Mapping[str, uuid.UUID]) -> list:  # noqa: N803
    by_topic: dict[str, list[int]] = {}
    for topic, partition in forgotten:
        by_topic.setdefault(topic, []).append(partition)
    return [
        F.ForgottenTopic(topic_id=ids.get(t, ZERO_UUID), partitions=ps)
        for t, ps in by_topic.items()
    ]
