"""Sender: the trio task that moves batches from the RecordAccumulator to the brokers.

The loop is Kafka's Sender.sendProducerData / runOnce over the sans-IO cores; each turn:

1. idempotence: apply a pending epoch bump once safe; without a producer id send
   InitProducerId (to any connected broker, retried with backoff) before anything else;
   settle unresolved sequences. A fatal producer error fails everything still queued.
2. `fail_expired_batches(now, in_flight)`: delivery.timeout.ms for queued and in-flight batches,
   when the earliest known expiry is due or EXPIRY_CHECK_INTERVAL_MS after the last scan
   (Kafka scans every turn, but only each queue's head; we also skip turns between).
3. `ready(metadata, now)`: leaders with sendable data; topics with an unknown leader ask the
   metadata updater for a refresh. A ready leader without a usable connection gets one started
   (and is reported "not drainable" to the adaptive partitioner); a connection at
   max.in.flight.requests.per.connection is skipped this turn (Kafka's client.ready).
4. `drain(...)` per node, at most max.request.size per request; with max.in.flight = 1 the
   partitions are muted until their response (strict order without idempotence).
5. One Produce request per node (acks, timeout = request.timeout.ms). Its response, or the
   connection error / request timeout that ends it, goes partition by partition to
   `handle_partition_response`, which completes, retries (front of the queue, sequence order,
   after backoff), splits (MESSAGE_TOO_LARGE) or fails each batch exactly once; errors that say
   our leader is stale trigger a metadata refresh. Writing one node's request awaits, so a
   later node's connection may be gone (or full) by its turn: its batches come back the same
   way, as from a lost connection.
6. Sleep until the earliest of: next ready check (linger / backoff), next batch expiry, or a
   wake-up (an append filled or opened a batch, a response arrived, a connection came up, a
   flush or close began).

Closing: `initiate_close()` keeps the loop running until every batch is complete (the
accumulator makes all batches sendable once closed); `force_close(error)` aborts the rest.
"""

from __future__ import annotations

import math
from typing import Any

import trio

from log.common.errors import ErrorCode, KafkaError, error_for
from log.protocol.client_codec import PRODUCE_KEY, ClientResponse
from log.protocol.produce import PRODUCE_REQUEST
from log.protocol.producer_id import INIT_PRODUCER_ID_REQUEST
from producer.accumulator import NO_READY_CHECK_DELAY_MS, RecordAccumulator, ResponseAction
from producer.cluster_view import TopicPartition
from producer.config import ProducerConfig
from producer.connection import BrokerConnections, ConnectionFailedError, now_ms
from producer.idempotence import IdempotenceManager
from producer.metadata import MetadataUpdater, ProducerMetadata
from producer.producer_batch import ProducerBatch
from producer.transaction_session import TransactionSession

INIT_PRODUCER_ID_KEY = 22
IDEMPOTENT_TRANSACTION_TIMEOUT_MS = (
    60000  # Kafka's default; brokers ignore it without a transactional id
)
IDLE_RECHECK_MS = 20  # bound on a wait for a wake-up that should come anyway
# Longest gap between delivery.timeout.ms scans while no known batch is due: a busy sender
# turns every few hundred microseconds, a scan per turn would be wasted work; batches queued
# after a scan are found at most this late.
EXPIRY_CHECK_INTERVAL_MS = 100
_PRODUCE_REQUEST_CLS: Any = PRODUCE_REQUEST.cls  # made at run time by schema.py: untyped
_TopicData = _PRODUCE_REQUEST_CLS.TopicProduceData
_PartitionData = _PRODUCE_REQUEST_CLS.PartitionProduceData


class Sender:
    def __init__(
        self,
        config: ProducerConfig,
        accumulator: RecordAccumulator,
        metadata: ProducerMetadata,
        updater: MetadataUpdater,
        connections: BrokerConnections,
        idempotence: IdempotenceManager | None,
        transaction: TransactionSession | None = None,
    ) -> None:
        self.config = config
        self.accumulator = accumulator
        self.metadata = metadata
        self.updater = updater
        self.connections = connections
        self.idempotence = idempotence
        self.transaction = transaction
        self.guarantee_message_order = config.max_in_flight_requests_per_connection == 1
        self._in_flight: dict[int, ProducerBatch] = {}  # id(batch) -> batch awaiting a response
        self._wakeup = trio.Event()
        self._running = True
        self._forced_error: BaseException | None = None
        self._init_backoff_until_ms = 0
        self._next_expiry_check_ms = 0  # see _next_expiry_ms
        self.produce_request_count = 0
        self.retry_count = 0
        self.split_count = 0

    # -- control --------------------------------------------------------------------------------

    def wakeup(self) -> None:
        self._wakeup.set()

    def initiate_close(self) -> None:
        self._running = False
        self.wakeup()

    def force_close(self, error: BaseException) -> None:
        self._running = False
        self._forced_error = error
        self.wakeup()

    @property
    def in_flight_batch_count(self) -> int:
        return len(self._in_flight)

    # -- the loop -------------------------------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while self._running:
            await self._run_once()
        while self._forced_error is None and self.accumulator.has_incomplete():
            await self._run_once()
        if self._forced_error is not None:
            self.accumulator.abort_incomplete_batches(self._forced_error)
            self._in_flight.clear()

    async def _run_once(self) -> None:
        self._wakeup = trio.Event()  # wake-ups during this turn make the wait below return
        accumulator = self.accumulator
        now = now_ms()
        idempotence = self.idempotence
        if idempotence is not None:
            if idempotence.has_fatal_error:
                assert idempotence.fatal_error is not None
                accumulator.abort_undrained_batches(idempotence.fatal_error)
            elif self.transaction is not None and not idempotence.has_producer_id:
                pass  # init_transactions gives the producer id; nothing is drained before
            elif idempotence.bump_idempotent_epoch_and_reset_id_if_needed():
                if now >= self._init_backoff_until_ms:
                    await self._init_producer_id()
                    return
            else:
                idempotence.maybe_resolve_sequences()

        if now >= self._next_expiry_check_ms:
            accumulator.fail_expired_batches(now, list(self._in_flight.values()))
            self._next_expiry_check_ms = self._next_expiry_ms(now)
        result = accumulator.ready(self.metadata, now)
        if result.unknown_leader_topics:
            self.updater.add_topics(result.unknown_leader_topics)
            self.updater.request_update()
        drainable = []
        for node_id in result.ready_nodes:
            connection = self.connections.get(node_id)
            if connection is None or not connection.can_send:
                if connection is None:
                    address = self.metadata.address(node_id)
                    if address is not None:
                        self.connections.connect(node_id, address.host, address.port)
                accumulator.update_node_latency_stats(node_id, now, False)
                continue
            accumulator.update_node_latency_stats(node_id, now, True)
            drainable.append(node_id)
        drained = accumulator.drain(self.metadata, drainable, self.config.max_request_size, now)
        sent = False
        if self.transaction is not None and drained:
            drained = await self._add_partitions_to_txn(drained)
        for node_id, batches in drained.items():
            if batches:
                await self._send_produce(node_id, batches)
                sent = True
        if sent:
            return  # more may be sendable at once (Kafka polls with timeout 0 after data)
        delay_ms = self._next_wakeup_delay_ms(result.next_ready_check_delay_ms, now)
        if result.ready_nodes:
            # Ready data that cannot go yet (no connection, max in flight, sequence order):
            # a connection, a response or a backoff ending wakes us; never spin.
            delay_ms = IDLE_RECHECK_MS
        await self._wait(delay_ms)

    def _next_expiry_ms(self, now: int) -> int:
        """When the next expiry scan is due: the earliest delivery timeout of a queue's head
        (what the scan just saw) or of an in-flight batch (retries and split parts keep its
        creation time), and at most EXPIRY_CHECK_INTERVAL_MS from now (batches created from
        now on, or queued after a blocking wait for memory)."""
        next_ms = min(self.accumulator.next_batch_expiry_time_ms, now + EXPIRY_CHECK_INTERVAL_MS)
        timeout_ms = self.config.delivery_timeout_ms
        for batch in self._in_flight.values():
            next_ms = min(next_ms, batch.created_ms + timeout_ms)
        return next_ms

    def _next_wakeup_delay_ms(self, ready_delay_ms: int, now: int) -> float:
        delay_ms: float = ready_delay_ms
        expiry_ms = self.accumulator.next_batch_expiry_time_ms
        if expiry_ms != NO_READY_CHECK_DELAY_MS:
            delay_ms = min(delay_ms, expiry_ms - now)
        if self.accumulator.has_undrained():  # queued since the last scan: scan when due
            delay_ms = min(delay_ms, self._next_expiry_check_ms - now)
        timeout_ms = self.config.delivery_timeout_ms
        for batch in self._in_flight.values():
            delay_ms = min(delay_ms, batch.created_ms + timeout_ms - now)
        if self.idempotence is not None and not self.idempotence.has_producer_id:
            delay_ms = min(delay_ms, self._init_backoff_until_ms - now)
        if delay_ms >= NO_READY_CHECK_DELAY_MS:
            return math.inf
        return max(delay_ms, 0)

    async def _wait(self, delay_ms: float) -> None:
        if delay_ms <= 0:
            await trio.lowlevel.checkpoint()
            return
        with trio.move_on_after(delay_ms / 1000 if delay_ms != math.inf else math.inf):
            await self._wakeup.wait()

    # -- produce --------------------------------------------------------------------------------

    async def _send_produce(self, node_id: int, batches: list[ProducerBatch]) -> None:
        connection = self.connections.get(node_id)
        if connection is None or not connection.can_send:
            # `_run_once` saw this node ready, but the write to a node before it in the same
            # turn awaited, and meanwhile this connection died (its reader saw EOF) or the
            # metadata updater took its last in-flight slot. The request never left: hand
            # the batches back as Kafka does for a lost connection (retried after backoff, in
            # sequence order, with a metadata refresh).
            self._handle_produce_response(
                batches, ConnectionFailedError(f"connection to node {node_id} lost before send")
            )
            return
        topic_data: dict[str, list[Any]] = {}
        for batch in batches:
            tp = batch.topic_partition
            topic_data.setdefault(tp.topic, []).append(
                _PartitionData(index=tp.partition, records=batch.request_records())
            )
            self._in_flight[id(batch)] = batch
            if self.guarantee_message_order:
                self.accumulator.mute_partition(tp)
        body = PRODUCE_REQUEST.cls(
            transactional_id=self.transaction.transactional_id if self.transaction else None,
            acks=self.config.acks,
            timeout_ms=self.config.request_timeout_ms,
            topic_data=[_TopicData(name=t, partition_data=p) for t, p in topic_data.items()],
        )
        self.produce_request_count += 1

        def on_response(result: ClientResponse | KafkaError | None) -> None:
            self._handle_produce_response(batches, result)

        await connection.send(PRODUCE_KEY, body, on_response)

    def _handle_produce_response(
        self, batches: list[ProducerBatch], result: ClientResponse | KafkaError | None
    ) -> None:
        now = now_ms()
        accumulator = self.accumulator
        refresh = False
        pending = {batch.topic_partition: batch for batch in batches}
        if isinstance(result, ClientResponse):
            for topic in result.body.responses:
                for partition in topic.partition_responses:
                    tp = TopicPartition(topic.name, partition.index)
                    batch = pending.pop(tp, None)
                    if batch is None:
                        continue
                    needs_refresh = self._complete_batch(
                        batch,
                        partition.error_code,
                        now,
                        base_offset=partition.base_offset,
                        log_append_time_ms=partition.log_append_time_ms,
                        log_start_offset=partition.log_start_offset,
                    )
                    hint = partition.current_leader
                    if needs_refresh and hint.leader_id >= 0:  # Produce v10+ (KIP-951)
                        needs_refresh = not self.metadata.apply_leader_hint(
                            tp, hint.leader_id, hint.leader_epoch, result.body.node_endpoints
                        )
                    refresh |= needs_refresh
            missing_code = ErrorCode.UNKNOWN_SERVER_ERROR  # the broker skipped a partition
        elif result is None:  # acks=0: done when written
            missing_code = ErrorCode.NONE
        else:
            missing_code = result.error_code
            refresh = True
        for batch in pending.values():
            refresh |= self._complete_batch(batch, missing_code, now)
        for batch in batches:
            self._in_flight.pop(id(batch), None)
            if self.guarantee_message_order:
                accumulator.unmute_partition(batch.topic_partition)
        if refresh:
            self.updater.request_update()
        self.wakeup()

    def _complete_batch(self, batch: ProducerBatch, error_code: int, now: int, **kw: int) -> bool:
        outcome = self.accumulator.handle_partition_response(batch, error_code, now, **kw)
        if outcome.action is ResponseAction.RETRY:
            self.retry_count += 1
        elif outcome.action is ResponseAction.SPLIT:
            self.split_count += 1
        return outcome.refresh_metadata

    # -- transactions ---------------------------------------------------------------------------

    async def _add_partitions_to_txn(
        self, drained: dict[int, list[ProducerBatch]]
    ) -> dict[int, list[ProducerBatch]]:
        """AddPartitionsToTxn for the partitions drained batches are the first of in this
        transaction, before their Produce (Kafka's TransactionManager does it in its sender
        too). When that fails the batches fail with its error (retried if it is retriable)."""
        transaction = self.transaction
        assert transaction is not None
        new = {b.topic_partition for bs in drained.values() for b in bs} - transaction.partitions
        if not new:
            return drained
        try:
            await transaction.add_partitions(new)
        except KafkaError as error:
            for batches in drained.values():
                if batches:
                    for batch in batches:
                        self._in_flight[id(batch)] = batch
                    self._handle_produce_response(batches, error)
            if not error.retriable and self.idempotence is not None:
                self.idempotence.fatal_error = error
            return {}
        return drained

    # -- producer id ----------------------------------------------------------------------------

    async def _init_producer_id(self) -> None:
        """InitProducerId to a connected (or bootstrap) broker; back off on failure."""
        idempotence = self.idempotence
        assert idempotence is not None
        error: KafkaError | None = None
        for address in self.metadata.candidate_nodes():
            try:
                with trio.fail_after(self.config.request_timeout_ms / 1000):
                    connection = await self.connections.connected(
                        address.node_id, address.host, address.port
                    )
                    body = await connection.request(
                        INIT_PRODUCER_ID_KEY,
                        INIT_PRODUCER_ID_REQUEST.cls(
                            transactional_id=None,
                            transaction_timeout_ms=IDEMPOTENT_TRANSACTION_TIMEOUT_MS,
                        ),
                    )
            except trio.TooSlowError:
                continue
            except KafkaError as exc:
                error = exc
                continue
            if body.error_code == ErrorCode.NONE:
                idempotence.set_producer_id_and_epoch(body.producer_id, body.producer_epoch)
                return
            error = error_for(body.error_code, "InitProducerId")
            if not error.retriable:
                idempotence.fatal_error = error
                return
        self._init_backoff_until_ms = now_ms() + self.config.retry_backoff_ms
        if error is not None:
            self.updater.request_update()
