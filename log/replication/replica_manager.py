"""ReplicaManager: the partitions this broker hosts and every change to their data.

Kafka's ReplicaManager. The one owner of the replication paths, which the request handlers and
the coordinators call and which calls only downwards:

    Produce handler, group coordinator  -> append_records / append_to_local_log, then
                                           await_acks / await_high_watermark (acks=-1)
    WriteTxnMarkers handler             -> append_txn_markers (origin COORDINATOR, acks=-1),
                                           then the transaction completion listeners
    Fetch handler (replica fetches)     -> record_follower_fetch
    DeleteRecords handler               -> delete_records_on_local_log, await_low_watermark
    metadata images (run / sync)        -> apply_image: become leader / follower / offline
        |
        v
    HostedPartition (partition.py): UnifiedLog (storage) + PartitionState (the sans-IO
    leader/follower/ISR/high-watermark rules)

Metadata. Each new image is diffed against the last one applied here
(`quorum.image.partition_changes`) and every changed partition is handled:

    new leader == this broker           -> become leader: open/create the log with the topic's
                                           LogConfig (node defaults + topic ConfigRecords),
                                           `PartitionState.make_leader` with the new
                                           leader_epoch and ISR
    this broker in replicas, not leader -> become follower (`make_follower`) and, for a new
                                           leader or leader epoch, hand the partition to the
                                           ReplicaFetcherManager (truncate, then fetch)
    not a replica / topic deleted       -> `make_offline`, stop fetching; a deleted topic's
                                           log is deleted

A change that fails half-way (a full or failing disk) leaves the partition serving nothing
and is retried from scratch every RETRY_FAILED_INTERVAL_MS (`retry_failed`). Topic config
changes update the open logs' LogConfig.

High watermark. The leader's high watermark moves by one rule
(`PartitionState.maybe_increment_high_watermark`: HW = min log end offset over the maximal
ISR, never backwards) after appends (`append_to_local_log`), ISR and leadership changes
(`_advance_and_signal`); a follower fetch moves it inside
`PartitionState.update_follower_fetch_state` (`record_follower_fetch`). Each then wakes the
waiters that can progress (HostedPartition's signals: an append that left the HW where it was
wakes only the followers' fetches; a HW move by a follower's fetch wakes acks=-1 appends,
DeleteRecords and consumers' fetches). Waiters (acks=-1 appends, DeleteRecords, long-polling
fetches, fetch sessions) re-check their own condition when woken: no timers.

Appends run inline on the trio thread: an append is a header check, a CRC-32C in C and one
pwritev. bench/broker_produce measured a ~16 KB batch at ~23 us inline against ~100-150 us
through trio.to_thread.run_sync. A segment roll (fsync of the old segment) is the rare slow
case accepted inline.

Not thread-safe: called from the broker's trio tasks only.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import trio

from log.common.errors import (
    ErrorCode,
    InvalidRecordError,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    UnknownTopicOrPartitionError,
)
from log.common.node_config import NodeConfig
from log.records.control import ControlRecordType, build_control_batch
from log.replication.fetcher_manager import ReplicaFetcherManager
from log.replication.inter_broker_connector import inter_broker_connector
from log.replication.isr_manager import IsrManager
from log.replication.partition import HostedPartition
from log.replication.partition_state import PartitionState, StateChange
from log.replication.replica_fetcher import FetcherConfig
from log.replication.unified_replica_log import UnifiedReplicaLog
from log.storage.append_origin import AppendOrigin
from log.storage.config import (
    LogConfig,
    default_log_config,
    dynamic_log_config,
    topic_log_config,
)
from log.storage.log import LogAppendInfo
from log.storage.log_dir_failure_channel import LogDirFailedError
from log.storage.manager import LogManager
from log.storage.producer_state import VerificationGuard
from quorum.broker_interface import ControllerChannel, MetadataSource
from quorum.image import MetadataImage, PartitionRegistration, partition_changes

logger = logging.getLogger(__name__)
LISTED_REPLICATION_CHANGES = 5  # more under-replicated/whole partitions at once: one line
# "partition state change" lines per image at INFO; the rest at DEBUG, counted in one INFO line
# (a line costs ~0.1 ms on the event loop: a new topic's thousand partitions, 0.1 s).
LISTED_STATE_CHANGES = 20
RETRY_FAILED_INTERVAL_MS = 1000  # how often a partition whose change failed is tried again
MAX_ACKS_WAIT_MS = 300_000  # the longest an append or DeleteRecords waits, whatever asked
HIGH_WATERMARK_OFFSET = -1  # DeleteRecords' "up to the high watermark"

# cb(topic, partition, producer_id, committed): a transaction marker is durable (HW past it).
TransactionCompletionListener = Callable[[str, int, int, bool], None]


@dataclasses.dataclass(frozen=True, slots=True)
class TxnMarkerEntry:
    """One partition's transaction marker of a WriteTxnMarkers request."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    committed: bool


@dataclasses.dataclass
class AppendResult:
    """One partition's outcome of `append_records`: its error code, the append's offsets
    (None when nothing was appended) and the error's message; for an acks=-1 append not yet
    acknowledged, the partition and the high watermark it waits for (`await_acks`)."""

    error_code: int
    info: LogAppendInfo | None
    message: str | None = None
    awaiting: tuple[HostedPartition, int] | None = None


class ReplicaManager:
    def __init__(
        self,
        config: NodeConfig,
        log_manager: LogManager,
        metadata: MetadataSource,
        controller: ControllerChannel,
        *,
        broker_epoch_getter: Callable[[], int] = lambda: -1,
        clock_ms: Callable[[], int],
        on_isr_change: Callable[[int, int], None] = lambda before, after: None,
    ) -> None:
        self.broker_id = config.node_id
        self.log_manager = log_manager
        # A log directory that failed an I/O goes offline (LogDirFailureChannel); the node has
        # one, so its failure stops the broker: `run` raises LogDirFailedError.
        self.failure_channel = log_manager.failure_channel
        self._log_dirs_failed = trio.Event()
        self._trio_token: trio.lowlevel.TrioToken | None = None
        self.metadata = metadata
        self.clock_ms = clock_ms
        self.default_config = default_log_config(config)
        self._on_isr_change = on_isr_change  # (ISR size before, after): the node's metrics
        self._image = MetadataImage()
        self._inter_broker_listener = config.inter_broker_listener_name
        self._replication_notes: dict[str, list[str]] = {"under": [], "whole": []}
        # Partitions whose last change failed (a storage error: a full or failing disk), tried
        # again every RETRY_FAILED_INTERVAL_MS against the newest image until one works.
        self._failed: set[tuple[str, int]] = set()
        self._next_retry_ms = 0
        self._partitions: dict[tuple[str, int], HostedPartition] = {}
        self.leader_change_count = 0  # became leader/follower of a new leader epoch/offline
        props = config.props
        # How this broker reaches the others (TLS/SASL of the inter-broker listener): replica
        # fetchers and the transaction coordinator's marker channel alike.
        self.inter_broker_connect = inter_broker_connector(config)
        self.fetcher_manager = ReplicaFetcherManager(
            FetcherConfig(
                broker_id=config.node_id,
                replica_fetch_max_bytes=props["replica.fetch.max.bytes"],
                replica_fetch_response_max_bytes=max(
                    props["replica.fetch.response.max.bytes"], props["replica.fetch.max.bytes"]
                ),
                replica_fetch_wait_max_ms=props["replica.fetch.wait.max.ms"],
                replica_fetch_min_bytes=props["replica.fetch.min.bytes"],
                replica_fetch_backoff_ms=props["replica.fetch.backoff.ms"],
                request_timeout_ms=max(30_000, props["replica.fetch.wait.max.ms"] + 10_000),
                connect=self.inter_broker_connect,
            ),
            props["num.replica.fetchers"],
            self.endpoint_for,
            clock_ms,
            on_storage_error=self.report_storage_error,
            image=lambda: self._image,
            broker_epoch=broker_epoch_getter,
        )
        self.isr_manager = IsrManager(
            config.node_id,
            controller,
            broker_epoch_getter,
            lambda: self._image,
            self.leaders,
            self.on_isr_change,
            clock_ms,
            props["replica.lag.time.max.ms"],
            on_batch_applied=self.report_replication,
        )
        self._configs: tuple[MetadataImage | None, dict[str, LogConfig]] = (None, {})
        self._state_changes: collections.Counter[str] = collections.Counter()  # per image
        self._fetching = False  # follower partitions go to the fetchers once they run
        self._txn_completion_listeners: list[TransactionCompletionListener] = []

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Run the replica fetchers and the ISR manager, follow the metadata image (every new
        image is applied to the hosted partitions at once) until cancelled; raise
        LogDirFailedError once the log directory went offline."""
        self._trio_token = trio.lowlevel.current_trio_token()
        self.failure_channel.on_offline = self._on_log_dir_offline
        if self.log_manager.is_offline:  # failed before we ran (recovery, a tick)
            self._on_log_dir_offline(str(self.log_manager.log_dir), "")
        self.metadata.add_image_preparer(self.prepare_image)
        async with trio.open_nursery() as nursery:
            await nursery.start(self.fetcher_manager.run)
            await nursery.start(self.isr_manager.run)
            self._fetching = True
            self.sync()
            nursery.start_soon(self._follow_metadata)
            task_status.started()
            await self._log_dirs_failed.wait()
            reason = self.failure_channel.offline_reason(self.log_manager.log_dir)
            raise LogDirFailedError(
                f"broker {self.broker_id} stops: its log directory {self.log_manager.log_dir} "
                f"failed ({reason}) and it has no other"
            )

    async def _follow_metadata(self) -> None:
        async with self.metadata.subscribe() as images:
            async for _image in images:
                self.sync()  # applies the newest, whichever we were sent

    async def prepare_image(self, published: MetadataImage, image: MetadataImage) -> None:
        """Before `image` is published: open the logs of the partitions it gives this broker
        that have none yet, in a worker thread (log_manager.open_logs), so that applying it
        finds them. Opening a log costs ~0.5 ms; a topic of 2,000 partitions opened in
        apply_image held each node's event loop for ~3 s, every client request waiting.
        Nothing else opens these logs meanwhile: only the published image is applied."""
        if self.log_manager.is_offline or self.log_manager.is_shut_down:
            return
        wanted = []
        leading: dict[tuple[str, int], int] = {}  # new logs this broker leads: their epoch
        for change in partition_changes(published, image):
            state, topic = change.new, change.topic_name
            if state is None or self.broker_id not in state.replicas:
                continue
            if self.log_manager.get_log(topic, change.partition) is not None:
                continue
            wanted.append((topic, change.partition, self._config_for(image, topic)))
            if state.leader == self.broker_id:
                leading[(topic, change.partition)] = state.leader_epoch
        if wanted:
            opened = await trio.to_thread.run_sync(self._open_ahead, wanted, leading)
            self.log_manager.adopt_logs(opened)

    def _open_ahead(self, wanted: list, leading: dict[tuple[str, int], int]) -> list:
        """In a worker thread: open the logs, and in those this broker will lead, start the
        leader epoch at the log end offset as make_leader would (its checkpoint write, ~0.15 ms,
        is then off the event loop too; make_leader finds the epoch there). A failure is left
        for applying the image to meet, where it is handled."""
        opened = self.log_manager.open_logs(wanted, self.clock_ms())
        for key, _config, log in opened:
            epoch = leading.get(key)
            if epoch is not None:
                try:
                    log.leader_epoch_cache.assign(epoch, log.log_end_offset)
                except Exception as exc:  # noqa: BLE001 - see the docstring
                    logger.debug("starting epoch %d of %s-%d ahead failed: %s", epoch, *key, exc)
        return opened

    def sync(self) -> MetadataImage:
        """Apply the newest metadata image to the hosted partitions (cheap when unchanged) and
        return it, so a request never acts on partitions older than the image it answers from."""
        image = self.metadata.image
        if image is not self._image:
            self.apply_image(image, self.clock_ms())
        return image

    # -- log directory failure -----------------------------------------------------------------

    def report_storage_error(self, exc: BaseException) -> None:
        """A storage operation of a hosted partition failed: if that is a directory failure
        (log_dir_failure_channel.is_log_dir_failure), the directory goes offline."""
        self.failure_channel.report(self.log_manager.log_dir, exc)

    def _on_log_dir_offline(self, log_dir: str, reason: str) -> None:
        """LogDirFailureChannel's callback (any thread): handle it on the trio thread."""
        token = self._trio_token
        if token is None:
            return  # not running yet: `run` handles a directory already offline
        try:
            if trio.lowlevel.current_trio_token() is token:
                self._take_log_dir_offline(log_dir, reason)
                return
        except RuntimeError:
            pass  # another thread
        token.run_sync_soon(self._take_log_dir_offline, log_dir, reason)

    def _take_log_dir_offline(self, log_dir: str, reason: str) -> None:
        """Kafka's handleLogDirFailure: every partition in the directory stops being served
        (KAFKA_STORAGE_ERROR) and is no longer fetched; waiters wake and fail. With no
        directory left online, `run` stops the broker."""
        if self._log_dirs_failed.is_set():
            return
        logger.error("log directory %s is offline: %s. Its %d partitions answer "
                     "KAFKA_STORAGE_ERROR; the broker stops (no other log directory)",
                     log_dir, reason or self.failure_channel.offline_reason(log_dir),
                     len(self._partitions))  # fmt: skip
        for key, hosted in self._partitions.items():
            hosted.state.make_offline()
            hosted.is_leader = False
            self._stop_fetching(key)
            hosted.signal_high_watermark()
        self._log_dirs_failed.set()

    @property
    def image(self) -> MetadataImage:
        """The image last applied here."""
        return self._image

    # -- lookups -----------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> HostedPartition | None:
        return self._partitions.get((topic, partition))

    def leader(self, topic: str, partition: int, image: MetadataImage) -> HostedPartition:
        """The partition if this broker leads it; else the Kafka error a client should see."""
        hosted = self._partitions.get((topic, partition))
        if hosted is not None and hosted.is_leader:
            return hosted
        if hosted is not None and self.log_manager.is_offline:
            raise KafkaStorageError(f"{topic}-{partition} is offline: its log directory failed")
        known = image.topic(topic)
        if known is None or partition not in known.partitions:
            known = self._image.topic(topic)
            if known is None or partition not in known.partitions:
                raise UnknownTopicOrPartitionError(f"{topic}-{partition} is unknown")
        raise NotLeaderOrFollowerError(f"broker {self.broker_id} does not lead {topic}-{partition}")

    # -- the high watermark rule (one place) ---------------------------------------------------

    def _advance_and_signal(self, hosted: HostedPartition) -> None:
        """Leader's HW rule (PartitionState.maybe_increment_high_watermark: min log end offset
        over the maximal ISR, never backwards), then wake everyone waiting on the partition:
        they re-check their own condition. Called after ISR and leadership changes (appends
        and follower fetches wake only the waiters that can progress)."""
        if hosted.is_leader:
            hosted.state.maybe_increment_high_watermark()
        hosted.signal_high_watermark()

    # -- appends (clients and coordinators) ----------------------------------------------------

    def append_to_local_log(
        self,
        topic: str,
        partition: int,
        records: memoryview | bytes,
        acks: int,
        image: MetadataImage,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> tuple[HostedPartition, LogAppendInfo]:
        """Append one record batch as leader, now (Kafka's appendToLocalLog): the leader
        check, the min.insync.replicas check for acks=-1 (nothing appended when it fails), the
        append, the HW rule. Raises the KafkaError the client should see for this partition."""
        hosted = self.leader(topic, partition, image)
        if acks == -1:
            hosted.state.check_enough_replicas_for_append(hosted.log.config.min_insync_replicas)
        if not records:
            raise InvalidRecordError("an append needs one record batch")
        log = hosted.log
        high_watermark, last_stable_offset = log.high_watermark, log.last_stable_offset
        try:
            info = log.append_as_leader(records, hosted.leader_epoch, self.clock_ms(), origin)
        except KafkaStorageError as exc:
            self.report_storage_error(exc)
            raise
        hosted.state.maybe_increment_high_watermark()  # a sole ISR member: the HW moves now
        if log.high_watermark != high_watermark or log.last_stable_offset != last_stable_offset:
            hosted.signal_high_watermark()
        else:  # the usual acks=all append: only the followers' fetches can progress
            hosted.signal_appended()
        return hosted, info

    async def await_high_watermark(
        self, hosted: HostedPartition, required_offset: int, timeout_ms: int
    ) -> ErrorCode:
        """acks=-1: wait until the HW reaches `required_offset`; the error code to answer:
        `PartitionState.check_enough_replicas_reach_offset`'s verdict (NONE, or
        NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR fell below min.insync.replicas
        meanwhile, NOT_LEADER_OR_FOLLOWER when leadership moved), NOT_LEADER_OR_FOLLOWER when
        the partition is no longer hosted here, REQUEST_TIMED_OUT after `timeout_ms`."""
        min_insync_replicas = hosted.log.config.min_insync_replicas
        with trio.move_on_after(min(max(timeout_ms, 0), MAX_ACKS_WAIT_MS) / 1000):
            while True:
                event = hosted.high_watermark_changed
                done, error = hosted.state.check_enough_replicas_reach_offset(
                    required_offset, min_insync_replicas
                )
                if done or error != ErrorCode.NONE:
                    return error
                if self._partitions.get((hosted.topic, hosted.partition)) is not hosted:
                    return ErrorCode.NOT_LEADER_OR_FOLLOWER
                await event.wait()
        return ErrorCode.REQUEST_TIMED_OUT

    def append_records(
        self,
        acks: int,
        entries: Iterable[tuple[str, int, memoryview]],
        verification_guards: Mapping[int, VerificationGuard] | None = None,
    ) -> list[AppendResult]:
        """Kafka's ReplicaManager.appendRecords, its local part: append each (topic, partition,
        records) as leader, now, in order. One result per entry; a failure affects only its
        partition. An acks=-1 result is not acknowledged yet: `await_acks` waits for it (the
        Produce path lets other requests of the connection proceed meanwhile, as Kafka's
        delayed produce does not hold the request handler). `verification_guards` (by entry
        index) are the transaction verifications the entries passed (KIP-890 part 1): an entry
        whose guard was voided meanwhile is INVALID_TXN_STATE, nothing appended."""
        assert acks in (-1, 0, 1)
        image = self.sync()
        results: list[AppendResult] = []
        guards = verification_guards or {}
        for index, (topic, partition, records) in enumerate(entries):
            guard = guards.get(index)
            if guard is not None and not self._verification_holds(topic, partition, guard):
                message = "the transaction ended while the partition was being verified"
                results.append(AppendResult(ErrorCode.INVALID_TXN_STATE, None, message))
                continue
            try:
                hosted, info = self.append_to_local_log(topic, partition, records, acks, image)
            except KafkaError as exc:
                results.append(AppendResult(exc.error_code, None, str(exc)))
                continue
            awaiting = (hosted, info.last_offset + 1) if acks == -1 else None
            results.append(AppendResult(ErrorCode.NONE, info, awaiting=awaiting))
        return results

    def _verification_holds(self, topic: str, partition: int, guard: VerificationGuard) -> bool:
        hosted = self._partitions.get((topic, partition))
        if hosted is None:
            return True  # the append answers why not
        return hosted.log.producer_state_manager.verification_holds(guard)

    async def await_acks(self, results: list[AppendResult], timeout_ms: int) -> None:
        """acks=-1 (Kafka's DelayedProduce): wait until the high watermark passes each appended
        batch of `results` in turn and set its error code (`await_high_watermark`), all within
        one deadline, `timeout_ms` from now: a request is answered by its timeout however many
        of its partitions wait (one timeout each would answer k partitions after k timeouts,
        past the client's own request timeout)."""
        deadline = trio.current_time() + min(max(timeout_ms, 0), MAX_ACKS_WAIT_MS) / 1000
        for result in results:
            if result.awaiting is not None:
                hosted, required_offset = result.awaiting
                left_ms = max(0, round((deadline - trio.current_time()) * 1000))
                result.error_code = await self.await_high_watermark(
                    hosted, required_offset, left_ms
                )
                result.awaiting = None

    # -- transaction markers -------------------------------------------------------------------

    def add_transaction_completion_listener(self, listener: TransactionCompletionListener) -> None:
        """Call `listener(topic, partition, producer_id, committed)` after every transaction
        marker this broker appended as leader is durable (the high watermark passed it)."""
        self._txn_completion_listeners.append(listener)

    async def append_txn_markers(
        self, entries: list[TxnMarkerEntry], timeout_ms: int
    ) -> list[ErrorCode]:
        """Append each marker as a control batch (origin COORDINATOR: producer and coordinator
        epochs are checked, sequences are not), all first, then wait for each as acks=-1 does,
        concurrently; a durable one is announced to the completion listeners. One error code
        per entry."""
        image = self.sync()
        codes: list[ErrorCode] = []
        waits: list[tuple[int, HostedPartition, int]] = []
        now_ms = self.clock_ms()
        for entry in entries:
            if entry.producer_id < 0:  # a marker belongs to a producer: bad input
                codes.append(ErrorCode.INVALID_RECORD)
                continue
            batch = build_control_batch(
                ControlRecordType.COMMIT if entry.committed else ControlRecordType.ABORT,
                producer_id=entry.producer_id,
                producer_epoch=entry.producer_epoch,
                coordinator_epoch=entry.coordinator_epoch,
                timestamp_ms=now_ms,
            )
            try:
                hosted, info = self.append_to_local_log(
                    entry.topic, entry.partition, batch, -1, image, AppendOrigin.COORDINATOR
                )
            except KafkaError as exc:
                codes.append(ErrorCode(exc.error_code))
                continue
            waits.append((len(codes), hosted, info.last_offset + 1))
            codes.append(ErrorCode.NONE)

        async def wait_one(index: int, hosted: HostedPartition, required_offset: int) -> None:
            codes[index] = await self.await_high_watermark(hosted, required_offset, timeout_ms)

        async with trio.open_nursery() as nursery:
            for index, hosted, required_offset in waits:
                nursery.start_soon(wait_one, index, hosted, required_offset)
        for index, _, _ in waits:
            if codes[index] == ErrorCode.NONE:
                self._notify_txn_completion(entries[index])
        return codes

    def _notify_txn_completion(self, entry: TxnMarkerEntry) -> None:
        for listener in self._txn_completion_listeners:
            try:
                listener(entry.topic, entry.partition, entry.producer_id, entry.committed)
            except Exception:  # one listener's bug must not fail the marker or the others
                logger.exception("transaction completion listener %r failed", listener)

    # -- follower fetches ----------------------------------------------------------------------

    def record_follower_fetch(
        self,
        hosted: HostedPartition,
        replica_id: int,
        fetch_offset: int,
        log_start_offset: int,
        broker_epoch: int,
        now_ms: int,
    ) -> None:
        """A follower fetched from `fetch_offset`: that is its log end offset. Record it (Kafka's
        updateFollowerFetchState), which may move the HW; wake waiters when it did or when the
        follower's log start offset moved (a DeleteRecords low watermark wait); maybe propose
        an ISR expansion."""
        state = hosted.state
        log_start_before = state.follower_log_start_offset(replica_id)
        moved = state.update_follower_fetch_state(
            replica_id, fetch_offset, log_start_offset, now_ms, broker_epoch
        )
        if log_start_offset > log_start_before:  # a DeleteRecords low watermark wait
            hosted.signal_high_watermark()
        elif moved:
            hosted.signal_high_watermark_moved()
        self.isr_manager.maybe_expand(hosted, replica_id)

    # -- DeleteRecords -------------------------------------------------------------------------

    def delete_records_on_local_log(
        self, topic: str, partition: int, requested_offset: int, image: MetadataImage
    ) -> tuple[HostedPartition, int]:
        """Raise the leader's log start offset (-1: to the high watermark); the partition and
        the offset it now starts at. Followers learn it from their next fetch answer."""
        hosted = self.leader(topic, partition, image)
        log = hosted.log
        if "delete" not in log.config.cleanup_policy.split(","):
            raise PolicyViolationError(
                f"records of {topic} (cleanup.policy={log.config.cleanup_policy}) cannot be "
                "deleted by offset"
            )
        offset = log.high_watermark if requested_offset == HIGH_WATERMARK_OFFSET else (
            requested_offset
        )  # fmt: skip
        if offset < 0:
            raise OffsetOutOfRangeError(f"cannot delete before offset {requested_offset}")
        log.delete_records_before(offset)  # OffsetOutOfRangeError above the high watermark
        hosted.signal_high_watermark()  # followers' long polls: the log start offset moved
        return hosted, offset

    async def await_low_watermark(
        self, hosted: HostedPartition, offset: int, timeout_ms: int
    ) -> tuple[int, ErrorCode]:
        """Wait until every live replica's log start offset reached `offset` (Kafka's
        DelayedDeleteRecords): (low watermark, error code)."""
        low_watermark = -1
        with trio.move_on_after(min(max(timeout_ms, 0), MAX_ACKS_WAIT_MS) / 1000):
            while True:
                event = hosted.high_watermark_changed
                current = self._partitions.get((hosted.topic, hosted.partition)) is hosted
                if not current or not hosted.state.is_leader:
                    return -1, ErrorCode.NOT_LEADER_OR_FOLLOWER
                live = {b for b, r in self._image.brokers.items() if not r.fenced}
                low_watermark = hosted.state.low_watermark(live)
                if low_watermark >= offset:
                    return low_watermark, ErrorCode.NONE
                await event.wait()
        return low_watermark, ErrorCode.REQUEST_TIMED_OUT

    def leaders(self) -> list[HostedPartition]:
        return [h for h in self._partitions.values() if h.is_leader]

    # -- applying metadata ---------------------------------------------------------------------

    def apply_image(self, image: MetadataImage, now_ms: int = 0) -> None:
        old = self._image
        if image is old:
            return
        if self.log_manager.is_offline:
            self._image = image  # nothing is written to a failed directory again
            return
        self._state_changes.clear()
        for change in partition_changes(old, image):
            key = (change.topic_name, change.partition)
            self._failed.discard(key)
            try:
                self._apply_change(image, change.topic_name, change.partition, change.new, now_ms)
            except Exception as exc:  # one partition's failure must not stop the others
                logger.exception("applying %s-%s failed (retried every %d ms)",
                                 change.topic_name, change.partition,
                                 RETRY_FAILED_INTERVAL_MS)  # fmt: skip
                self._fail(key)
                self.report_storage_error(exc)
        if image.configs is not old.configs:
            self._apply_configs(old, image)
        self._image = image
        self._report_state_changes()
        self.report_replication()

    def _fail(self, key: tuple[str, int]) -> None:
        """A change that raised half-way leaves this partition serving nothing (NOT_LEADER /
        no fetching) rather than in a state it never finished entering; retry_failed redoes
        it from scratch (Kafka takes the whole log directory offline instead: not built)."""
        self._failed.add(key)
        hosted = self._partitions.get(key)
        if hosted is not None:
            hosted.state.make_offline()
            hosted.is_leader = False
            self._stop_fetching(key)
            hosted.signal_high_watermark()

    def retry_failed(self, now_ms: int) -> None:
        """Apply the newest image again to each partition whose change failed (at most every
        RETRY_FAILED_INTERVAL_MS; cheap when none failed)."""
        if not self._failed or now_ms < self._next_retry_ms or self.log_manager.is_offline:
            return
        self._next_retry_ms = now_ms + RETRY_FAILED_INTERVAL_MS
        image = self._image
        for key in sorted(self._failed):
            topic = image.topic(key[0])
            state = topic.partitions.get(key[1]) if topic is not None else None
            try:
                self._apply_change(image, key[0], key[1], state, now_ms)
            except Exception as exc:  # noqa: BLE001 - still failing: next interval
                logger.debug("retrying %s-%s failed again: %s", key[0], key[1], exc)
                self._fail(key)  # undo the half-made change again
                self.report_storage_error(exc)
                continue
            self._failed.discard(key)
            logger.info("partition %s-%d applied after an earlier failure", *key)
        self._report_state_changes()
        self.report_replication()

    def _config_for(self, image: MetadataImage, topic: str) -> LogConfig:
        """A topic's log config under `image` (computed once per image and topic: a new
        topic's thousand partitions share it)."""
        if self._configs[0] is not image:
            self._configs = (image, {})
        configs = self._configs[1]
        config = configs.get(topic)
        if config is None:
            dynamic = self._dynamic_defaults(image)
            config = configs[topic] = topic_log_config(dynamic, image.topic_configs(topic))
        return config

    def _dynamic_defaults(self, image: MetadataImage) -> LogConfig:
        """The node's log defaults under the dynamic broker configs: cluster-wide, then ours."""
        return dynamic_log_config(
            self.default_config, image.broker_configs(""), image.broker_configs(str(self.broker_id))
        )

    def _apply_change(
        self,
        image: MetadataImage,
        topic: str,
        partition: int,
        state: PartitionRegistration | None,
        now_ms: int,
    ) -> None:
        key = (topic, partition)
        hosted = self._partitions.get(key)
        if state is None or self.broker_id not in state.replicas:
            if hosted is not None:
                del self._partitions[key]
                hosted.is_leader = False
                hosted.state.make_offline()
                self._stop_fetching(key)
                hosted.signal_high_watermark()  # wake waiters: they re-check and fail
            # the topic is gone, or a reassignment moved this replica elsewhere (Kafka's
            # StopReplica with delete): the log goes; also a stray one left from before a restart
            if state is not None and self.log_manager.get_log(topic, partition) is not None:
                logger.info("partition %s-%d is no longer assigned to broker %d: deleting its log",
                            topic, partition, self.broker_id)  # fmt: skip
            self.log_manager.delete_log(topic, partition)
            return
        if hosted is None:
            config = self._config_for(image, topic)
            log = self.log_manager.get_log(topic, partition)
            if log is None:
                log = self.log_manager.get_or_create_log(topic, partition, config, now_ms)
            elif log.config != config:
                log.update_config(config)
            replication = PartitionState(
                self.broker_id, UnifiedReplicaLog(log), log.config.min_insync_replicas
            )
            hosted = HostedPartition(topic, partition, log, -1, (), (), False, replication)
            self._partitions[key] = hosted
        self._apply_replication_state(key, hosted, state, now_ms)

    def _apply_replication_state(
        self,
        key: tuple[str, int],
        hosted: HostedPartition,
        state: PartitionRegistration,
        now_ms: int,
    ) -> None:
        replication = hosted.state
        was_leader = hosted.is_leader
        if state.leader == self.broker_id:
            change = replication.make_leader(
                state.leader_epoch, state.partition_epoch, state.isr, state.replicas, now_ms
            )
            if change is not StateChange.IGNORED_STALE:
                self._stop_fetching(key)
            role = "leader"
        elif state.leader >= 0:
            change = replication.make_follower(
                state.leader, state.leader_epoch, state.partition_epoch, state.isr, state.replicas
            )
            if change is StateChange.NEW_LEADER_EPOCH and self._fetching:
                self.fetcher_manager.add_partition(
                    key, hosted.log, state.leader, state.leader_epoch
                )
            role = "follower"
        else:  # no leader (all ISR members gone): nobody to fetch from
            replication.make_offline()
            self._stop_fetching(key)
            change, role = StateChange.NEW_LEADER_EPOCH, "offline"
        self.refresh(hosted)
        if change is StateChange.NEW_LEADER_EPOCH or was_leader != hosted.is_leader:
            self.leader_change_count += 1
            listed = sum(self._state_changes.values()) < LISTED_STATE_CHANGES
            self._state_changes[role] += 1
            logger.log(
                logging.INFO if listed else logging.DEBUG,
                "partition state change node=%d topic=%s partition=%d role=%s leader=%d "
                "leader_epoch=%d isr=%s log_end_offset=%d",
                self.broker_id, hosted.topic, hosted.partition, role, state.leader,
                state.leader_epoch, ",".join(map(str, hosted.isr)), hosted.log.log_end_offset,
            )  # fmt: skip
        self._advance_and_signal(hosted)  # waiters re-check leadership and the ISR

    def _report_state_changes(self) -> None:
        """One INFO line for the state changes of an image past LISTED_STATE_CHANGES."""
        more = sum(self._state_changes.values()) - LISTED_STATE_CHANGES
        if more > 0:
            roles = ", ".join(f"{n} {role}" for role, n in sorted(self._state_changes.items()))
            logger.info("partition state change node=%d: %d more partitions in this image, "
                        "logged at DEBUG (all: %s)", self.broker_id, more, roles)  # fmt: skip
        self._state_changes.clear()

    def refresh(self, hosted: HostedPartition) -> None:
        """Copy the replication state's view (leader epoch, ISR) into the hosted fields.

        The leader says when its partition runs below its replication factor (a WARNING, once
        per change, not per fetch) and when it is whole again: an acks=all write to it is then
        on fewer disks than the topic asks for. The changes are collected and logged by
        `report_replication` once per image or AlterPartitions batch: a broker's death turns a
        thousand partitions under-replicated at once, and that is one line, not a thousand."""
        was_under_replicated = hosted.is_leader and len(hosted.isr) < len(hosted.replicas)
        replication = hosted.state
        hosted.leader_epoch = replication.leader_epoch
        hosted.isr = tuple(sorted(replication.isr))
        hosted.replicas = replication.replicas
        hosted.is_leader = replication.is_leader
        under_replicated = hosted.is_leader and len(hosted.isr) < len(hosted.replicas)
        if under_replicated and not was_under_replicated:
            self._replication_notes["under"].append(
                f"{hosted.topic}-{hosted.partition} is under-replicated: isr="
                f"{','.join(map(str, hosted.isr))} replicas={','.join(map(str, hosted.replicas))}"
                f" (writes are on {len(hosted.isr)} of {len(hosted.replicas)} replicas)"
            )
        elif was_under_replicated and not under_replicated and hosted.is_leader:
            self._replication_notes["whole"].append(
                f"{hosted.topic}-{hosted.partition} is fully replicated again: isr="
                f"{','.join(map(str, hosted.isr))}"
            )

    def report_replication(self) -> None:
        """Log the replication changes `refresh` collected: a line per partition up to
        LISTED_REPLICATION_CHANGES, else one line with the count and the first few."""
        for kind, level in (("under", logging.WARNING), ("whole", logging.INFO)):
            notes, self._replication_notes[kind] = self._replication_notes[kind], []
            if len(notes) <= LISTED_REPLICATION_CHANGES:
                for note in notes:
                    logger.log(level, "partition %s", note)
                continue
            shown = "; ".join(notes[:LISTED_REPLICATION_CHANGES])
            logger.log(level, "%d partitions changed: %s; and %d more like it", len(notes),
                       shown, len(notes) - LISTED_REPLICATION_CHANGES)  # fmt: skip

    def on_isr_change(self, hosted: HostedPartition) -> None:
        """An AlterPartition committed: refresh, maybe move the HW, wake waiters (the ISR
        manager calls `report_replication` once its batch is applied)."""
        before_count = len(hosted.isr)
        self.refresh(hosted)
        self._advance_and_signal(hosted)
        self._on_isr_change(before_count, len(hosted.isr))

    def endpoint_for(self, broker_id: int) -> tuple[str, int] | None:
        """`broker_id`'s endpoint on the inter-broker listener, in the image last applied here."""
        registration = self._image.brokers.get(broker_id)
        if registration is None:
            return None
        for endpoint in registration.endpoints:
            if endpoint.name == self._inter_broker_listener:
                return endpoint.host, endpoint.port
        return None

    def _stop_fetching(self, key: tuple[str, int]) -> None:
        if self._fetching:
            self.fetcher_manager.remove_partition(key)

    def _apply_configs(self, old: MetadataImage, image: MetadataImage) -> None:
        ours = ("", str(self.broker_id))  # a dynamic default moved: every topic may change
        defaults_moved = any(old.broker_configs(b) != image.broker_configs(b) for b in ours)
        changed = {
            name
            for name in image.topic_ids_by_name
            if defaults_moved or old.topic_configs(name) != image.topic_configs(name)
        }
        for name in changed:
            self.log_manager.update_topic_config(name, self._config_for(image, name))
        if not changed:
            return
        for (topic, _), hosted in self._partitions.items():
            if topic in changed:  # min.insync.replicas may have moved: the HW rule uses it
                hosted.state.min_insync_replicas = hosted.log.config.min_insync_replicas
                self._advance_and_signal(hosted)

    def describe(self) -> dict[str, Any]:
        return {
            f"{t}-{p}": {"leader": h.is_leader, "epoch": h.leader_epoch, "isr": h.isr}
            for (t, p), h in sorted(self._partitions.items())
        }
