"""IsrManager: the leader's ISR changes, sent to the controller (Kafka's AlterPartitionManager
plus the leader's periodic isr-expiration task), the I/O driver around `PartitionState`.

- Shrink: every `replica.lag.time.max.ms / 2` each led partition runs `check_isr_shrink`.
- Expand: the Fetch handler calls `maybe_expand(hosted, replica_id)` after a follower fetch.
- Either proposal (`IsrChangeProposal` of the core, at most one pending per partition) is
  queued; one sender task sends everything queued as one `ControllerChannel.alter_partitions`
  batch (up to `MAX_ALTER_PARTITION_BATCH`; the controller commits it as one Raft batch, so a
  restarted broker rejoining a thousand ISRs costs a few rounds, not a thousand); each answer
  goes to `on_alter_partition_response`. COMMITTED: the hosted fields are refreshed and
  waiters woken (the HW may have moved, or min ISR be violated now). RETRY (transport failures
  included): queued again after `ALTER_PARTITION_RETRY_BACKOFF_MS` while the same proposal is
  still pending. AWAIT_METADATA: leave it pending; the next metadata image replaces it.

`hosted` is duck-typed: it has `topic`, `partition`, `state` (PartitionState) and `log`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import trio

from log.common.errors import ErrorCode, KafkaError
from log.replication.partition_state import AlterPartitionOutcome, IsrChangeProposal
from quorum import controller as c

logger = logging.getLogger(__name__)


def _ids(broker_ids: Any) -> str:
    """A broker id set as log lines show it: `1,2,3`."""
    return ",".join(map(str, sorted(broker_ids)))


ALTER_PARTITION_RETRY_BACKOFF_MS = 100
ALTER_PARTITION_TIMEOUT_MS = 10_000
MAX_ALTER_PARTITION_BATCH = 1000  # partitions per AlterPartitions request
MIN_SHRINK_CHECK_INTERVAL_MS = 10


class IsrManager:
    def __init__(
        self,
        broker_id: int,
        controller: Any,  # ControllerChannel
        broker_epoch_getter: Callable[[], int],
        image_getter: Callable[[], Any],
        leaders: Callable[[], Iterable[Any]],
        on_change: Callable[[Any], None],
        clock_ms: Callable[[], int],
        replica_lag_time_max_ms: int,
        on_batch_applied: Callable[[], None] = lambda: None,
    ) -> None:
        assert replica_lag_time_max_ms > 0
        self.broker_id = broker_id
        self.controller = controller
        self.broker_epoch_getter = broker_epoch_getter
        self.image_getter = image_getter
        self.leaders = leaders
        self.on_change = on_change
        self.on_batch_applied = on_batch_applied  # after a batch's answers (one log summary)
        self.clock_ms = clock_ms
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._nursery: trio.Nursery | None = None
        # Proposals waiting for the sender, one per partition (a newer one replaces it).
        self._queue: dict[tuple[str, int], tuple[Any, IsrChangeProposal]] = {}
        self._queued = trio.Event()

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._send_batches)
            task_status.started()
            interval_ms = max(self.replica_lag_time_max_ms // 2, MIN_SHRINK_CHECK_INTERVAL_MS)
            try:
                while True:
                    await trio.sleep(interval_ms / 1000)
                    self.check_shrink()
            finally:
                self._nursery = None

    def check_shrink(self) -> None:
        now_ms = self.clock_ms()
        for hosted in list(self.leaders()):
            request = hosted.state.check_isr_shrink(now_ms, self.replica_lag_time_max_ms)
            if request is not None:
                logger.info("isr shrink proposed broker=%d topic=%s partition=%d isr=%s "
                            "new_isr=%s", self.broker_id, hosted.topic, hosted.partition,
                            _ids(hosted.state.isr), _ids(request.new_isr))  # fmt: skip
                self._send(hosted, request)

    def ineligible_replica_ids(self) -> set[int]:
        """Brokers the image shows fenced or not registered (KIP-841): never proposed."""
        image = self.image_getter()
        return {b for b, r in image.brokers.items() if r.fenced}

    def maybe_expand(self, hosted: Any, replica_id: int) -> None:
        state = hosted.state
        if replica_id in state.isr or state.pending_alter_partition is not None:
            return
        ineligible = self.ineligible_replica_ids()
        if replica_id not in self.image_getter().brokers:
            ineligible.add(replica_id)
        request = state.check_isr_expand(replica_id, ineligible)
        if request is not None:
            logger.info("isr expand proposed broker=%d topic=%s partition=%d isr=%s new_isr=%s",
                        self.broker_id, hosted.topic, hosted.partition, _ids(state.isr),
                        _ids(request.new_isr))  # fmt: skip
            self._send(hosted, request)

    def _send(self, hosted: Any, request: IsrChangeProposal) -> None:
        if self._nursery is None:  # not running (in-process tests without the loop)
            return
        self._queue[(hosted.topic, hosted.partition)] = (hosted, request)
        self._queued.set()

    async def _send_batches(self) -> None:
        """The one sender: every queued proposal goes out in the next AlterPartitions batch."""
        while True:
            if not self._queue:
                self._queued = trio.Event()
                await self._queued.wait()
            batch: list[tuple[Any, IsrChangeProposal]] = []
            while self._queue and len(batch) < MAX_ALTER_PARTITION_BATCH:
                key = next(iter(self._queue))
                batch.append(self._queue.pop(key))
            retry = await self._send_batch(batch)
            if retry:
                await trio.sleep(ALTER_PARTITION_RETRY_BACKOFF_MS / 1000)
                for hosted, request in retry:
                    if hosted.state.pending_alter_partition is request:
                        self._queue.setdefault((hosted.topic, hosted.partition), (hosted, request))

    async def _send_batch(self, batch: list[tuple[Any, IsrChangeProposal]]) -> list:
        """Send one batch and apply its answers; the proposals to send again (RETRY)."""
        image = self.image_getter()
        broker_epoch = self.broker_epoch_getter()
        sent = []
        for hosted, request in batch:
            topic = image.topic(hosted.topic)
            if topic is None or hosted.state.pending_alter_partition is not request:
                continue  # deleted, or superseded by new metadata meanwhile
            sent.append((hosted, request, c.AlterPartitionRequest(
                broker_id=self.broker_id, broker_epoch=broker_epoch, topic_id=topic.topic_id,
                partition=hosted.partition, leader_epoch=request.leader_epoch,
                partition_epoch=request.partition_epoch, new_isr=request.new_isr,
            )))  # fmt: skip
        if not sent:
            return []
        responses: tuple = (None,) * len(sent)
        try:
            with trio.fail_after(ALTER_PARTITION_TIMEOUT_MS / 1000):
                answer = await self.controller.alter_partitions(
                    c.AlterPartitionsRequest(tuple(wire for _, _, wire in sent))
                )
            if len(answer.items) == len(sent):
                responses = answer.items
        except (KafkaError, trio.TooSlowError) as exc:
            logger.info("AlterPartition of %d partitions failed: %r", len(sent), exc)
        retry = []
        for (hosted, request, _), response in zip(sent, responses, strict=True):
            if self._apply_answer(hosted, request, response):
                retry.append((hosted, request))
        self.on_batch_applied()
        return retry

    def _apply_answer(self, hosted: Any, request: IsrChangeProposal, response: Any) -> bool:
        """Apply one partition's answer (None: no answer); True when it should be resent."""
        state = hosted.state
        if state.pending_alter_partition is not request:
            return False  # new metadata superseded the proposal meanwhile
        error = ErrorCode.REQUEST_TIMED_OUT if response is None else ErrorCode(response.error_code)
        if error == ErrorCode.NONE:
            result = state.on_alter_partition_response(
                error, response.leader_epoch, response.partition_epoch, response.isr
            )
        else:
            result = state.on_alter_partition_response(error)
        if result.outcome is AlterPartitionOutcome.COMMITTED:
            self.on_change(hosted)
            return False
        return result.outcome is AlterPartitionOutcome.RETRY
