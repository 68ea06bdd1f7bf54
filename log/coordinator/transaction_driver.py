"""TransactionCoordinatorDriver: the trio driver around the sans-IO TransactionCoordinator
(Kafka's TransactionStateManager I/O and TransactionMarkerChannelManager).

- The internal topic: __transaction_state (transaction.state.log.num.partitions partitions,
  replication factor min(transaction.state.log.replication.factor, live brokers),
  min.insync.replicas min(transaction.state.log.min.isr, that factor), compacted) is created on
  the first FindCoordinator for a transactional id, as group_driver.py creates
  __consumer_offsets. A transactional id lives on partition `partition_for(transactional_id)`;
  its coordinator is that partition's leader.
- Ownership: on every metadata image the partitions this broker leads are loaded (the log
  replayed through the core, the partition's leader epoch as the coordinator epoch) and those it
  no longer leads (or leads under a newer epoch) unloaded. Loading resumes the markers of
  transactions left in PrepareCommit/PrepareAbort by the previous coordinator.
- Steps: every core entry point returns a Step. Its `append` is written through the
  ReplicaManager as leader with acks=all (the min.insync.replicas check included) and the core
  hears the outcome (`on_append_complete`) once the high watermark passed it or it failed;
  its `markers` go to the marker channel; its `response` goes to the waiting request.
- Markers: queued, grouped per current partition leader (re-resolved from the image each round)
  and sent as one WriteTxnMarkers request per broker over an inter-broker connection (one
  request in flight per broker). Per-partition answers go to `on_marker_result` (which retries
  NOT_LEADER_OR_FOLLOWER and friends); a lost connection or a partition without a live leader
  retries after RETRY_BACKOFF_MS; a partition whose topic is gone is
  `on_marker_partition_deleted`.
- Timeouts: every transaction.abort.timed.out.transaction.cleanup.interval.ms the core's
  `expired_transactions` aborts what stayed open longer than its timeout.
- Expiration: every transaction.remove.expired.transaction.cleanup.interval.ms (1 h) the core's
  `expired_transactional_ids` tombstones the transactional ids at rest and unused for
  transactional.id.expiration.ms (7 days).

Transaction version: the cluster's finalized `transaction.version` (quorum/features.py, read
from every metadata image) is the core's `transaction_version_level`: the __transaction_state
value version and the version of the aborts the coordinator starts itself. A request asks for
transaction version 2 (KIP-890 part 2: EndTxn v5, the implicit adds of Produce v12 and
TxnOffsetCommit v5) and gets it only when the cluster finalized level 2 (`tv2_enabled`); else
the request is served with version 0 semantics. KIP-890 part 1: `verify_partitions` answers
partition leaders' AddPartitionsToTxn verify_only (add_partitions_to_txn_manager.py asks).
Markers go out as WriteTxnMarkers v1 (Kafka 4 removed v0).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence

import trio

from log.common.errors import CorruptRecordError, ErrorCode, KafkaError
from log.common.node_config import NodeConfig
from log.coordinator.internal_topic import InternalTopic
from log.coordinator.transaction_coordinator import (
    AddPartitionsResult,
    EndTxnResult,
    InitProducerIdResult,
    Step,
    TransactionCoordinator,
    TransactionCoordinatorConfig,
    TxnLogAppend,
    TxnMarker,
)
from log.coordinator.transaction_state import (
    TopicPartition,
    TransactionMetadata,
    TransactionResult,
    TransactionState,
    TransactionVersion,
)
from log.protocol.transactions import WRITE_TXN_MARKERS_REQUEST
from log.records.batch_header import iter_batches
from log.records.builder import Record, build_batch
from log.records.reader import iter_records
from log.replication.broker_connections import BrokerConnections
from log.replication.replica_manager import ReplicaManager
from quorum.broker_interface import ControllerChannel, MetadataSource
from quorum.features import TRANSACTION_VERSION
from quorum.image import MetadataImage
from quorum.records import NO_LEADER

logger = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
LOAD_READ_BYTES = 1 << 20
RETRY_BACKOFF_MS = 100  # Kafka's retry.backoff.ms: markers and Complete records are retried
# A partition leader waits up to request.timeout.ms (30 s) for a marker's replicas: wait longer
# for its answer than that, or a slow ISR turns into a dropped connection.
MARKER_REQUEST_TIMEOUT_MS = 40_000
WRITE_TXN_MARKERS_KEY, WRITE_TXN_MARKERS_VERSION = 27, 1
MAX_QUEUED_MARKERS = 100_000  # one per partition of every transaction being completed
MAX_BACKGROUND_STEPS = 10_000  # appends and marker answers processed off the request path

W = WRITE_TXN_MARKERS_REQUEST.cls


class TransactionCoordinatorDriver:
    def __init__(
        self,
        config: NodeConfig,
        replica_manager: ReplicaManager,
        metadata: MetadataSource,
        controller: ControllerChannel,
        clock_ms: Callable[[], int],
        *,
        allocate_producer_id: Callable[[], int],
        ensure_producer_id: Callable[[], Awaitable[None]],
        group_partition_for: Callable[[str], int],
    ) -> None:
        props = config.props
        self.config = config
        self.replica_manager = replica_manager
        self.metadata = metadata
        self.controller = controller
        self.clock_ms = clock_ms
        self.num_partitions = props["transaction.state.log.num.partitions"]
        self.cleanup_interval_ms = props[
            "transaction.abort.timed.out.transaction.cleanup.interval.ms"
        ]
        self.transactional_id_expiration_ms = props["transactional.id.expiration.ms"]
        self.expiration_interval_ms = props[
            "transaction.remove.expired.transaction.cleanup.interval.ms"
        ]
        self.core = TransactionCoordinator(
            TransactionCoordinatorConfig(
                transaction_max_timeout_ms=props["transaction.max.timeout.ms"],
                transaction_state_log_num_partitions=self.num_partitions,
                transaction_version_level=TransactionVersion.TV_0,  # the image's, once synced
                two_phase_commit_enable=props["transaction.two.phase.commit.enable"],
            ),
            allocate_producer_id,
            group_partition_for,
        )
        self._ensure_producer_id = ensure_producer_id
        self._loaded_epochs: dict[int, int] = {}  # partition -> coordinator epoch loaded
        self.internal_topic = InternalTopic(TRANSACTION_STATE_TOPIC, metadata, controller)
        self._markers: collections.deque[TxnMarker] = collections.deque()
        self._markers_changed = trio.Event()
        self._busy_brokers: set[int] = set()
        self._connections = BrokerConnections(
            replica_manager.endpoint_for,
            replica_manager.inter_broker_connect,
            f"txn-coordinator-{config.node_id}",
        )
        self._nursery: trio.Nursery | None = None
        self._background_count = 0

    # -- the internal topic and ownership --------------------------------------------------------

    async def ensure_topic(self) -> bool:
        """True when __transaction_state exists; else asks the controller to create it."""
        props = self.config.props
        return await self.internal_topic.ensure(
            self.num_partitions,
            props["transaction.state.log.replication.factor"],
            lambda factor: {
                "min.insync.replicas": str(min(props["transaction.state.log.min.isr"], factor)),
                "segment.bytes": str(props["transaction.state.log.segment.bytes"]),
            },
        )

    def coordinator_for(self, transactional_id: str) -> tuple[ErrorCode, int]:
        """(NONE, the coordinator's broker id) or (COORDINATOR_NOT_AVAILABLE, -1)."""
        image = self.replica_manager.sync()
        topic = image.topic(TRANSACTION_STATE_TOPIC)
        if topic is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1
        state = topic.partitions.get(self.core.partition_for(transactional_id))
        if state is None or state.leader == NO_LEADER:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1
        return ErrorCode.NONE, state.leader

    @property
    def transaction_version_level(self) -> TransactionVersion:
        """The cluster's finalized transaction.version (as of the last sync)."""
        return self.core.config.transaction_version_level

    def tv2_enabled(self) -> bool:
        """Whether requests asking for transaction version 2 get it (level 2 finalized)."""
        self._sync_transaction_version(self.replica_manager.sync())
        return self.transaction_version_level.supports_epoch_bump

    def client_version(self, asks_tv2: bool) -> TransactionVersion:
        """TV_2 for a request that asks for it on a cluster that finalized it, else TV_0."""
        return (
            TransactionVersion.TV_2 if asks_tv2 and self.tv2_enabled() else TransactionVersion.TV_0
        )

    def _sync_transaction_version(self, image: MetadataImage) -> None:
        level = TransactionVersion(
            min(image.feature_level(TRANSACTION_VERSION), max(TransactionVersion))
        )
        if level != self.core.config.transaction_version_level:
            self.core.config = dataclasses.replace(
                self.core.config, transaction_version_level=level
            )
            logger.info("transaction.version is %d", level)

    def sync_ownership(self) -> None:
        """Load the partitions we now lead (or lead under a new epoch), unload the others."""
        self._sync_transaction_version(self.replica_manager.sync())
        led = {
            h.partition: h
            for h in self.replica_manager.leaders()
            if h.topic == TRANSACTION_STATE_TOPIC
        }
        for partition, epoch in sorted(self._loaded_epochs.items()):
            hosted = led.get(partition)
            if hosted is None or hosted.leader_epoch != epoch:
                del self._loaded_epochs[partition]
                self.core.unload(partition)
                logger.info("%s-%d unloaded (epoch %d)", TRANSACTION_STATE_TOPIC, partition, epoch)
        for partition, hosted in sorted(led.items()):
            if partition in self._loaded_epochs:
                continue
            epoch = hosted.leader_epoch
            self.core.begin_load(partition, epoch)
            try:
                records = self._read_partition(hosted)
                steps = self.core.complete_load(partition, epoch, records, self.clock_ms())
            except Exception:  # a corrupt partition must not take the coordinator down
                logger.exception("loading %s-%d failed", TRANSACTION_STATE_TOPIC, partition)
                continue  # stays loading: COORDINATOR_LOAD_IN_PROGRESS, retried next image
            self._loaded_epochs[partition] = epoch
            logger.info("%s-%d loaded as coordinator epoch %d (%d records, %d resumed)",
                        TRANSACTION_STATE_TOPIC, partition, epoch, len(records),
                        len(steps))  # fmt: skip
            for step in steps:
                self._in_background(step)

    def _read_partition(self, hosted) -> list[tuple[bytes, bytes | None]]:  # noqa: ANN001
        log = hosted.log
        offset = log.log_start_offset
        records: list[tuple[bytes, bytes | None]] = []
        while offset < log.log_end_offset:
            data = log.read(offset, LOAD_READ_BYTES)
            if not data.records:
                break
            buf = bytes(data.records)
            for position, header in iter_batches(buf):
                if header.is_control:
                    continue
                for record in iter_records(buf, position):
                    if record.key is None:
                        raise CorruptRecordError("a __transaction_state record without a key")
                    value = None if record.value is None else bytes(record.value)
                    records.append((bytes(record.key), value))
            assert data.next_fetch_offset > offset
            offset = data.next_fetch_offset
        return records

    # -- requests (the handlers' calls) ---------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str | None,
        transaction_timeout_ms: int,
        expected_producer_id: int = -1,
        expected_producer_epoch: int = -1,
        enable_2pc: bool = False,
        keep_prepared_txn: bool = False,
    ) -> InitProducerIdResult:
        self.sync_ownership()
        await self._ensure_producer_id()
        step = self.core.handle_init_producer_id(
            transactional_id, transaction_timeout_ms, self.clock_ms(),
            expected_producer_id, expected_producer_epoch, enable_2pc, keep_prepared_txn,
        )  # fmt: skip
        response = await self._execute(step)
        assert isinstance(response, InitProducerIdResult)
        return response

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        client_transaction_version: TransactionVersion = TransactionVersion.TV_0,
    ) -> AddPartitionsResult:
        self.sync_ownership()
        step = self.core.handle_add_partitions(
            transactional_id, producer_id, producer_epoch, partitions, self.clock_ms(),
            client_transaction_version,
        )  # fmt: skip
        response = await self._execute(step)
        assert isinstance(response, AddPartitionsResult)
        return response

    async def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> AddPartitionsResult:
        """AddPartitionsToTxn verify_only (KIP-890 part 1): nothing is written."""
        self.sync_ownership()
        step = self.core.handle_verify_partitions(
            transactional_id, producer_id, producer_epoch, partitions
        )
        response = await self._execute(step)
        assert isinstance(response, AddPartitionsResult)
        return response

    async def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> ErrorCode:
        self.sync_ownership()
        step = self.core.handle_add_offsets(
            transactional_id, producer_id, producer_epoch, group_id, self.clock_ms()
        )  # AddOffsetsToTxn is a TV1 request: TV2 clients add implicitly
        response = await self._execute(step)
        assert isinstance(response, AddPartitionsResult)
        codes = set(response.errors.values())
        return codes.pop() if len(codes) == 1 else ErrorCode.UNKNOWN_SERVER_ERROR

    async def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        client_transaction_version: TransactionVersion = TransactionVersion.TV_0,
    ) -> EndTxnResult:
        self.sync_ownership()
        result = TransactionResult.COMMIT if committed else TransactionResult.ABORT
        step = self.core.handle_end_txn(
            transactional_id, producer_id, producer_epoch, result, self.clock_ms(),
            client_transaction_version,
        )  # fmt: skip
        response = await self._execute(step)
        assert isinstance(response, EndTxnResult)
        return response

    def transactions(self) -> list[TransactionMetadata]:
        """The transactional ids this broker coordinates (ListTransactions)."""
        self.sync_ownership()
        return sorted(self.core.transactions(), key=lambda md: md.transactional_id)

    def open_transaction_count(self) -> int:
        """Transactions coordinated here that are not finished (Ongoing or being ended): the
        metric `txn_coordinator_open_transactions`."""
        finished = (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT,
                    TransactionState.COMPLETE_ABORT, TransactionState.DEAD)  # fmt: skip
        return sum(md.state not in finished for md in self.core.transactions())

    @property
    def queued_marker_count(self) -> int:
        """Markers waiting to be sent or resent (a stuck partition leader shows here)."""
        return len(self._markers)

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        """DescribeTransactions of one id: NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS /
        TRANSACTIONAL_ID_NOT_FOUND, or the loaded state."""
        self.sync_ownership()
        partition = self.core.partition_for(transactional_id)
        if partition not in self._loaded_epochs:
            hosted = self.replica_manager.get(TRANSACTION_STATE_TOPIC, partition)
            leading = hosted is not None and hosted in self.replica_manager.leaders()
            if leading:
                return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None
            return ErrorCode.NOT_COORDINATOR, None
        md = self.core.transaction(transactional_id)
        if md is None:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, md

    # -- steps ---------------------------------------------------------------------------------

    async def _execute(self, step: Step) -> object:
        """Carry out `step` and those it leads to until one answers the request."""
        while True:
            self._queue_markers(step.markers)
            append = step.append
            if append is None:
                return step.response
            if step.response is not None:  # answered now, the write continues without us
                self._in_background(Step(append=append))
                return step.response
            error = await self._write(append)
            step = self.core.on_append_complete(append, error, self.clock_ms())

    def _in_background(self, step: Step) -> None:
        if step.append is None:
            self._queue_markers(step.markers)
            return
        if self._nursery is None or self._background_count >= MAX_BACKGROUND_STEPS:
            # Not running (tests of the handlers' errors) or overloaded: the next coordinator
            # load or the timeout abort finishes what is dropped here.
            logger.warning("transaction step for %s dropped", step.append.transactional_id)
            return
        self._background_count += 1
        self._nursery.start_soon(self._run_in_background, step)

    async def _run_in_background(self, step: Step) -> None:
        try:
            previous: TxnLogAppend | None = None
            while step.append is not None:
                if step.append == previous:  # a Complete record retried: back off first
                    await trio.sleep(RETRY_BACKOFF_MS / 1000)
                self._queue_markers(step.markers)
                previous = step.append
                error = await self._write(step.append)
                step = self.core.on_append_complete(step.append, error, self.clock_ms())
            self._queue_markers(step.markers)
        except Exception:
            logger.exception("transaction coordinator background step failed")
        finally:
            self._background_count -= 1

    async def _write(self, append: TxnLogAppend) -> ErrorCode:
        """Append one __transaction_state record as leader and wait for the ISR (acks=all)."""
        if self._loaded_epochs.get(append.txn_partition) != append.coordinator_epoch:
            return ErrorCode.NOT_COORDINATOR
        now_ms = self.clock_ms()
        batch = build_batch([Record(append.value, key=append.key, timestamp_ms=now_ms)])
        try:
            hosted, info = self.replica_manager.append_to_local_log(
                TRANSACTION_STATE_TOPIC,
                append.txn_partition,
                memoryview(bytearray(batch)),
                -1,
                self.metadata.image,
            )
        except KafkaError as exc:
            return ErrorCode(exc.error_code)
        code = await self.replica_manager.await_high_watermark(
            hosted, info.last_offset + 1, append.timeout_ms
        )
        return ErrorCode(code)

    # -- the marker channel ----------------------------------------------------------------------

    def _queue_markers(self, markers: Sequence[TxnMarker]) -> None:
        if not markers:
            return
        if len(self._markers) + len(markers) > MAX_QUEUED_MARKERS:
            logger.warning("marker queue full: %d markers dropped (the next coordinator load "
                           "resends them)", len(markers))  # fmt: skip
            return
        self._markers.extend(markers)
        self._markers_changed.set()

    async def _send_markers(self) -> None:
        """Each round: group the queued markers by current leader; one request per idle broker."""
        assert self._nursery is not None
        while True:
            await self._markers_changed.wait()
            self._markers_changed = trio.Event()
            image = self.replica_manager.sync()
            waiting: list[TxnMarker] = []
            by_broker: dict[int, list[TxnMarker]] = {}
            while self._markers:
                marker = self._markers.popleft()
                txn_partition = self.core.partition_for(marker.transactional_id)
                if self._loaded_epochs.get(txn_partition) != marker.coordinator_epoch:
                    continue  # we no longer coordinate it (Kafka's removeMarkersForTxnTopicPartition)
                topic_name, partition = marker.topic_partition
                topic = image.topic(topic_name)
                state = topic.partitions.get(partition) if topic is not None else None
                if state is None:
                    step = self.core.on_marker_partition_deleted(marker, self.clock_ms())
                    self._in_background(step)
                    continue
                leader = state.leader
                if leader == NO_LEADER or self.replica_manager.endpoint_for(leader) is None:
                    waiting.append(marker)
                elif leader in self._busy_brokers:
                    waiting.append(marker)
                else:
                    by_broker.setdefault(leader, []).append(marker)
            for broker_id, markers in by_broker.items():
                self._busy_brokers.add(broker_id)
                self._nursery.start_soon(self._send_to, broker_id, markers)
            if waiting:
                self._nursery.start_soon(self._requeue_later, waiting)

    async def _requeue_later(self, markers: list[TxnMarker]) -> None:
        await trio.sleep(RETRY_BACKOFF_MS / 1000)
        self._queue_markers(markers)

    async def _send_to(self, broker_id: int, markers: list[TxnMarker]) -> None:
        try:
            answers = await self._request_markers(broker_id, markers)
        finally:
            self._busy_brokers.discard(broker_id)
            self._markers_changed.set()
        if answers is None:
            await self._requeue_later(markers)
            return
        now_ms = self.clock_ms()
        for marker in markers:
            code = answers.get(
                (marker.producer_id, marker.topic_partition), ErrorCode.UNKNOWN_SERVER_ERROR
            )
            try:
                step = self.core.on_marker_result(marker, ErrorCode(code), now_ms)
            except KafkaError as exc:  # a fatal answer: Kafka gives up on the transaction too
                logger.error("marker for %s on %s-%d: %s", marker.transactional_id,
                             *marker.topic_partition, exc)  # fmt: skip
                continue
            if step.markers and not step.append:
                self._nursery_requeue(step.markers)
            else:
                self._in_background(step)

    def _nursery_requeue(self, markers: Sequence[TxnMarker]) -> None:
        assert self._nursery is not None
        self._nursery.start_soon(self._requeue_later, list(markers))

    async def _request_markers(
        self, broker_id: int, markers: list[TxnMarker]
    ) -> dict[tuple[int, TopicPartition], int] | None:
        """One WriteTxnMarkers request: the error code per (producer id, partition), or None
        when the broker could not be reached (the markers are retried)."""
        try:
            response = await self._connections.request(
                broker_id, WRITE_TXN_MARKERS_KEY, WRITE_TXN_MARKERS_VERSION,
                _markers_request(markers), MARKER_REQUEST_TIMEOUT_MS,
            )  # fmt: skip
        except (KafkaError, trio.TooSlowError) as exc:
            logger.info("WriteTxnMarkers to broker %d failed: %r", broker_id, exc)
            return None
        if response is None:  # no endpoint for the broker
            return None
        answers: dict[tuple[int, TopicPartition], int] = {}
        for result in response.markers:
            for topic in result.topics:
                for p in topic.partitions:
                    answers[(result.producer_id, (topic.name, p.partition_index))] = p.error_code
        return answers

    # -- the tasks -------------------------------------------------------------------------------

    async def _abort_timed_out_transactions(self) -> None:
        while True:
            await trio.sleep(self.cleanup_interval_ms / 1000)
            try:
                self.sync_ownership()
                for step in self.core.expired_transactions(self.clock_ms()):
                    if step.append is not None:
                        logger.info("aborting timed-out transaction %s",
                                    step.append.transactional_id)  # fmt: skip
                    self._in_background(step)
            except Exception:
                logger.exception("aborting timed-out transactions failed")

    async def _remove_expired_transactional_ids(self) -> None:
        while True:
            await trio.sleep(self.expiration_interval_ms / 1000)
            try:
                self.sync_ownership()
                steps = self.core.expired_transactional_ids(
                    self.clock_ms(), self.transactional_id_expiration_ms
                )
                for step in steps:
                    self._in_background(step)
                if steps:
                    logger.info("removing %d expired transactional ids", len(steps))
            except Exception:
                logger.exception("removing expired transactional ids failed")

    async def _follow_metadata(self) -> None:
        async with self.metadata.subscribe() as images:
            async for _image in images:
                try:
                    self.sync_ownership()
                except Exception:
                    logger.exception("transaction coordinator ownership sync failed")
                self._markers_changed.set()  # leaders may have moved: resend what waits

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:  # noqa: ANN001
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._follow_metadata)
                nursery.start_soon(self._abort_timed_out_transactions)
                nursery.start_soon(self._remove_expired_transactional_ids)
                nursery.start_soon(self._send_markers)
                task_status.started()
        finally:
            self._nursery = None
            await self._connections.aclose()


def _markers_request(markers: Sequence[TxnMarker]) -> object:
    """WriteTxnMarkers entries: one per (producer id, epoch, result, coordinator epoch)."""
    grouped: dict[tuple[int, int, TransactionResult, int], dict[str, list[int]]] = {}
    for m in markers:
        key = (m.producer_id, m.producer_epoch, m.result, m.coordinator_epoch)
        topic_name, partition = m.topic_partition
        grouped.setdefault(key, {}).setdefault(topic_name, []).append(partition)
    return W(
        markers=[
            W.WritableTxnMarker(
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                transaction_result=result == TransactionResult.COMMIT,
                topics=[
                    W.WritableTxnMarkerTopic(name=name, partition_indexes=sorted(partitions))
                    for name, partitions in sorted(topics.items())
                ],
                coordinator_epoch=coordinator_epoch,
            )
            for (producer_id, producer_epoch, result, coordinator_epoch), topics in grouped.items()
        ]
    )
