"""A deterministic simulated cluster driving the replication cores: one partition, N replicas.

Everything is driven by a seeded `random.Random` and a simulated clock (`now_ms`); nothing
sleeps. Parts:

- `Network`: messages between brokers, the controller and the producer, each delivered after a
  random delay, dropped with some probability, never delivered over a cut link or to a crashed
  process (a crash resets its connections: in-flight messages to and from it are lost).
- `Controller`: a tiny quorum stub holding the partition's registration. It fences a broker
  that is down or unreachable for `session_timeout_ms` (at once after a power failure), and
  answers AlterPartition like KRaft does; every ISR/ELR/leader change is decided by the real
  controller's rules (quorum/partition_change.py, KIP-966). A restarted process registers as a
  new incarnation without a clean shutdown (a crash writes no clean-shutdown marker), which
  takes it out of the ISR and the ELR. Brokers pull its state after random delays (stale
  metadata is normal). `SimConfig.elr=False` models the controller before KIP-966 (fenced
  brokers leave the ISR but never its last member, who leads again when it returns), to show
  the checks catch what that loses.
- `Node`: one broker process: `PartitionState`, `FollowerState`/`FetcherState`, the produce and
  fetch purgatories, over a `MemoryLog` whose unflushed tail a power failure loses (a process
  crash keeps it: the page cache survives; only the in-memory high watermark falls back to its
  checkpoint).

`check_invariants()` runs after every step (see its docstring). A failure raises
`AssertionError` with the seed in the message.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from log.common.errors import ErrorCode, KafkaError
from log.replication.follower_state import (
    EpochQuery,
    FetcherState,
    FollowerState,
    PartitionFetch,
    RecordsMeta,
    TruncationDecision,
)
from log.replication.partition_state import (
    IsrChangeProposal,
    PartitionState,
    Role,
    StateChange,
)
from log.replication.replica_log import UNDEFINED_EPOCH
from quorum.image import PartitionRegistration
from quorum.partition_change import ElectionPolicy, partition_change
from tests.replication_core.memory_log import Batch, MemoryLog

TP = ("topic", 0)
CONTROLLER = "controller"
PRODUCER = "producer"


@dataclass
class SimConfig:
    replica_count: int = 3
    min_insync_replicas: int = 2
    step_ms: int = 5
    network_delay_max_ms: int = 15
    drop_probability: float = 0.02
    metadata_pull_probability: float = 0.3
    session_timeout_ms: int = 60
    replica_lag_time_max_ms: int = 100
    replica_fetch_wait_max_ms: int = 20
    replica_fetch_backoff_ms: int = 20
    replica_fetch_max_bytes: int = 400
    request_timeout_ms: int = 80
    alter_partition_retry_ms: int = 50
    produce_timeout_ms: int = 300
    produce_probability: float = 0.3
    flush_probability: float = 0.05
    # The leader deletes a prefix up to its HW (retention / DeleteRecords).
    retention_probability: float = 0.0
    use_last_fetched_epoch: bool = False
    # Lets a test swap in a deliberately broken follower to prove the checks catch it.
    follower_factory: Callable[[int], FollowerState] = FollowerState
    # Fault injection (per step); zero in scripted scenarios.
    process_crash_probability: float = 0.0
    power_failure_probability: float = 0.0
    # Per step while the ISR is below min.insync.replicas: one of its live members loses power
    # (issue 14: with RF 3 and min.insync.replicas 2, the last ISR member).
    under_min_isr_power_failure_probability: float = 0.0
    isolate_probability: float = 0.0
    cut_link_probability: float = 0.0
    # Preferred-leader election / controlled shutdown: leadership moves to another live ISR
    # member while the old leader stays in the ISR.
    leader_move_probability: float = 0.0
    fault_duration_ms: tuple[int, int] = (30, 400)
    # KIP-966 eligible leader replicas in the controller (False: the rules before it).
    elr: bool = True


# ---------------------------------------------------------------------- messages


@dataclass(frozen=True)
class FetchRequest:
    replica_id: int
    broker_epoch: int
    fetch: PartitionFetch
    max_wait_ms: int
    correlation_id: int


@dataclass(frozen=True)
class FetchResponse:
    request: FetchRequest
    error: ErrorCode
    high_watermark: int = 0
    log_start_offset: int = 0
    batches: tuple[Batch, ...] = ()
    diverging_epoch: tuple[int, int] | None = None


@dataclass(frozen=True)
class EpochRequest:
    query: EpochQuery
    correlation_id: int


@dataclass(frozen=True)
class EpochResponse:
    request: EpochRequest
    error: ErrorCode
    leader_epoch: int = -1
    end_offset: int = -1


@dataclass(frozen=True)
class ListOffsetsRequest:
    current_leader_epoch: int
    correlation_id: int


@dataclass(frozen=True)
class ListOffsetsResponse:
    request: ListOffsetsRequest
    error: ErrorCode
    log_start_offset: int = 0
    log_end_offset: int = 0


@dataclass(frozen=True)
class AlterPartitionMessage:
    request: IsrChangeProposal


@dataclass(frozen=True)
class AlterPartitionAnswer:
    request: IsrChangeProposal
    error: ErrorCode
    leader_epoch: int = -1
    partition_epoch: int = -1
    isr: tuple[int, ...] = ()


@dataclass(frozen=True)
class ProduceRequest:
    payload: str
    record_count: int


@dataclass(frozen=True)
class Metadata:
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]


# ---------------------------------------------------------------------- network


class Network:
    def __init__(self, rng: random.Random, config: SimConfig) -> None:
        self.rng = rng
        self.config = config
        self.queue: list[tuple[int, int, object, object, object]] = []
        self.sequence = itertools.count()
        self.cut_links: dict[frozenset, int] = {}  # link -> heal at ms
        self.drop_enabled = True

    def connected(self, a: object, b: object) -> bool:
        return frozenset((a, b)) not in self.cut_links

    def send(self, now_ms: int, src: object, dst: object, message: object) -> None:
        if not self.connected(src, dst):
            return
        if self.drop_enabled and self.rng.random() < self.config.drop_probability:
            return
        deliver_ms = now_ms + self.rng.randint(1, self.config.network_delay_max_ms)
        heapq.heappush(self.queue, (deliver_ms, next(self.sequence), src, dst, message))

    def due(self, now_ms: int) -> list[tuple[object, object, object]]:
        out = []
        while self.queue and self.queue[0][0] <= now_ms:
            _, _, src, dst, message = heapq.heappop(self.queue)
            if self.connected(src, dst):
                out.append((src, dst, message))
        return out

    def forget(self, node_id: int) -> None:
        """A crashed process's connections are gone, with everything in flight on them."""
        self.queue = [m for m in self.queue if node_id not in (m[2], m[3])]
        heapq.heapify(self.queue)

    def cut(self, a: object, b: object, until_ms: int) -> None:
        self.cut_links[frozenset((a, b))] = until_ms

    def heal(self, now_ms: int) -> None:
        self.cut_links = {link: t for link, t in self.cut_links.items() if t > now_ms}


# ---------------------------------------------------------------------- controller


class Controller:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        replicas = tuple(range(cluster.config.replica_count))
        self.replicas = replicas
        self.state = PartitionRegistration(replicas, replicas, replicas[0], 0, 0)
        self.policy = ElectionPolicy(cluster.config.min_insync_replicas)
        self.fenced: set[int] = set()
        self.unreachable_since: dict[int, int] = {}
        self.fence_now: set[int] = set()
        # The broker epoch of each broker's registered incarnation.
        self.registered_epoch = {n: node.broker_epoch for n, node in cluster.nodes.items()}

    @property
    def leader(self) -> int:
        return self.state.leader

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def partition_epoch(self) -> int:
        return self.state.partition_epoch

    @property
    def isr(self) -> tuple[int, ...]:
        return self.state.isr

    def metadata(self) -> Metadata:
        return Metadata(
            self.leader, self.leader_epoch, self.partition_epoch, self.isr, self.replicas
        )

    def tick(self, now_ms: int) -> None:
        # A broker that lost its unflushed tail is fenced first (its connection closed), so that
        # a broker that holds the data and times out in the same tick is not fenced before it.
        for node_id in sorted(self.fence_now - self.fenced):
            self._fence(node_id)
        for node_id, node in self.cluster.nodes.items():
            reachable = node.alive and self.cluster.network.connected(CONTROLLER, node_id)
            if reachable:
                self.unreachable_since.pop(node_id, None)
            else:
                self.unreachable_since.setdefault(node_id, now_ms)
            if reachable and node.broker_epoch != self.registered_epoch[node_id]:
                self._register_unclean(node_id, node.broker_epoch)
            if node_id in self.fenced:
                if reachable and node_id not in self.fence_now:
                    self._unfence(node_id)
                continue
            timeout_ms = self.cluster.config.session_timeout_ms
            if not reachable and now_ms - self.unreachable_since[node_id] >= timeout_ms:
                self._fence(node_id)
        self.fence_now = {n for n in self.fence_now if not self.cluster.nodes[n].alive}

    def move_leader(self, rng: random.Random) -> None:
        candidates = [
            r
            for r in self.isr
            if r != self.leader and r not in self.fenced and self.cluster.nodes[r].alive
        ]
        if self.leader < 0 or not candidates:
            return
        self._set(
            dataclasses.replace(
                self.state,
                leader=rng.choice(candidates),
                leader_epoch=self.leader_epoch + 1,
                partition_epoch=self.partition_epoch + 1,
            )
        )

    def _set(self, state: PartitionRegistration) -> None:
        if state.leader != self.state.leader and state.leader != -1:
            self.cluster.elections += 1
        self.state = state

    def _change(
        self, target_isr: tuple[int, ...], gone: int = -1, added: int = -1, unclean: bool = False
    ) -> None:
        def may_lead(r: int) -> bool:
            return r != gone and (r == added or r not in self.fenced)

        self._set(
            partition_change(
                self.state,
                target_isr,
                may_lead,
                self.policy,
                unclean_shutdown_replicas=(gone,) if unclean else (),
            )
        )

    def _fence(self, node_id: int) -> None:
        self.fenced.add(node_id)
        if not self.cluster.config.elr:
            self._fence_before_kip_966(node_id)
            return
        if node_id in self.isr or node_id == self.leader:
            self._change(tuple(r for r in self.isr if r != node_id), gone=node_id)

    def _register_unclean(self, node_id: int, broker_epoch: int) -> None:
        """A new incarnation without a clean shutdown: out of the ISR and the ELR (fenced
        until it heartbeats)."""
        self.registered_epoch[node_id] = broker_epoch
        self.fenced.add(node_id)
        if not self.cluster.config.elr:
            self._fence_before_kip_966(node_id)
            return
        state = self.state
        if node_id in state.isr or node_id in state.elr or node_id == state.leader:
            self._change(tuple(r for r in state.isr if r != node_id), gone=node_id, unclean=True)

    def _unfence(self, node_id: int) -> None:
        self.fenced.discard(node_id)
        if self.leader != -1:
            return
        if not self.cluster.config.elr:
            if node_id in self.isr:
                self._elect_before_kip_966()
            return
        self._change(self.isr, added=node_id)

    def _fence_before_kip_966(self, node_id: int) -> None:
        if node_id not in self.isr:
            return
        remaining = tuple(r for r in self.isr if r != node_id)
        if remaining:
            self.state = dataclasses.replace(
                self.state, isr=remaining, partition_epoch=self.partition_epoch + 1
            )
        if self.leader == node_id:
            self._elect_before_kip_966()

    def _elect_before_kip_966(self) -> None:
        live = [r for r in self.isr if r not in self.fenced]
        self._set(
            dataclasses.replace(
                self.state,
                leader=live[0] if live else -1,
                leader_epoch=self.leader_epoch + 1,
                partition_epoch=self.partition_epoch + 1,
            )
        )

    def on_alter_partition(self, src: int, request: IsrChangeProposal) -> AlterPartitionAnswer:
        if src != self.leader or request.leader_epoch != self.leader_epoch:
            return AlterPartitionAnswer(request, ErrorCode.FENCED_LEADER_EPOCH)
        if request.partition_epoch != self.partition_epoch:
            return AlterPartitionAnswer(request, ErrorCode.INVALID_UPDATE_VERSION)
        if any(r in self.fenced for r in request.new_isr):
            return AlterPartitionAnswer(request, ErrorCode.INELIGIBLE_REPLICA)
        for replica_id, broker_epoch in zip(
            request.new_isr, request.new_isr_broker_epochs, strict=True
        ):
            if broker_epoch not in (-1, self.cluster.nodes[replica_id].broker_epoch):
                return AlterPartitionAnswer(request, ErrorCode.INELIGIBLE_REPLICA)
        new_isr = tuple(sorted(request.new_isr))
        if self.cluster.config.elr:
            self._change(new_isr)
            assert self.isr == new_isr and self.leader == src
        else:
            self.state = dataclasses.replace(
                self.state, isr=new_isr, partition_epoch=self.partition_epoch + 1
            )
        return AlterPartitionAnswer(
            request, ErrorCode.NONE, self.leader_epoch, self.partition_epoch, self.isr
        )


# ---------------------------------------------------------------------- broker


@dataclass
class WaitingProduce:
    """An acks=all append waiting for the high watermark (ReplicaManager.await_high_watermark)."""

    batch: Batch
    required_offset: int
    min_insync_replicas: int
    deadline_ms: int


@dataclass
class WaitingFetch:
    """A long-polling fetch that found no bytes (the Fetch handler's wait)."""

    src: int
    request: FetchRequest
    deadline_ms: int


MAX_WAITING_FETCHES = 100  # beyond it a fetch answers at once, empty


class Node:
    def __init__(self, cluster: Cluster, node_id: int) -> None:
        self.cluster = cluster
        self.config = cluster.config
        self.node_id = node_id
        self.log = MemoryLog()
        self.alive = True
        self.correlation = itertools.count()
        self.start_process()

    def start_process(self) -> None:
        # Each process incarnation registers with a new broker epoch.
        self.broker_epoch = next(self.cluster.broker_epochs)
        # Without KIP-966 (config.elr off) the leader's HW ignores min.insync.replicas.
        min_isr = self.config.min_insync_replicas if self.config.elr else 1
        self.partition = PartitionState(self.node_id, self.log, min_isr)
        self.follower = self.config.follower_factory(self.config.replica_fetch_backoff_ms)
        self.fetcher = FetcherState(
            -1,
            replica_fetch_max_bytes=self.config.replica_fetch_max_bytes,
            use_last_fetched_epoch=self.config.use_last_fetched_epoch,
        )
        # What waits, as the broker's ReplicaManager and Fetch handler wait: woken by every
        # change to the partition (`complete_delayed`, the broker's signal_high_watermark),
        # each re-checks its condition with the same PartitionState calls; a deadline ends it.
        self.waiting_produces: list[WaitingProduce] = []
        self.waiting_fetches: list[WaitingFetch] = []
        self.delayed_fetch_requests: dict[int, tuple[int, FetchRequest]] = {}
        self.metadata_seen: tuple[int, int] = (-1, -1)
        self.inflight: tuple[int, int] | None = None  # (correlation_id, sent_ms)
        self.alter_sent_ms: int | None = None
        # Invariant tracking for this process incarnation.
        self.high_watermark_seen = self.log.high_watermark
        self.leader_epoch_seen = -1

    def send(self, dst: object, message: object) -> None:
        self.cluster.network.send(self.cluster.now_ms, self.node_id, dst, message)

    # ------------------------------------------------------------ crash / restart

    def crash(self, lose_unflushed: bool) -> None:
        self.alive = False
        self.log.crash(lose_unflushed)
        self.cluster.network.forget(self.node_id)

    def restart(self) -> None:
        self.alive = True
        self.start_process()

    # ------------------------------------------------------------ metadata

    def apply_metadata(self, md: Metadata, now_ms: int) -> None:
        if (md.leader_epoch, md.partition_epoch) <= self.metadata_seen:
            return
        self.metadata_seen = (md.leader_epoch, md.partition_epoch)
        if md.leader == self.node_id:
            change = self.partition.make_leader(
                md.leader_epoch, md.partition_epoch, md.isr, md.replicas, now_ms
            )
            if change is StateChange.NEW_LEADER_EPOCH:
                self.cluster.record_leader(md.leader_epoch, self.node_id)
                self.fetcher.remove_partition(TP)
                self.inflight = None
                self.alter_sent_ms = None
        else:
            change = self.partition.make_follower(
                md.leader, md.leader_epoch, md.partition_epoch, md.isr, md.replicas
            )
            if change is StateChange.NEW_LEADER_EPOCH:
                self.follower.on_become_follower(md.leader, md.leader_epoch, self.log)
                self.fetcher.remove_partition(TP)
                if md.leader >= 0:
                    self.fetcher.add_partition(TP, self.follower)
                self.inflight = None
        self.complete_delayed(now_ms)

    def complete_delayed(self, now_ms: int) -> None:
        """The partition changed: wake every waiter; each re-checks (ReplicaManager's
        await_high_watermark, the Fetch handler's long poll)."""
        still_waiting = []
        for produce in self.waiting_produces:
            done, error = self.partition.check_enough_replicas_reach_offset(
                produce.required_offset, produce.min_insync_replicas
            )
            if done or error != ErrorCode.NONE:
                self.on_produce_completed(produce.batch, error)
            else:
                still_waiting.append(produce)
        self.waiting_produces = still_waiting
        fetches, self.waiting_fetches = self.waiting_fetches, []
        for fetch in fetches:
            if self.fetch_ready(fetch.request):
                self.answer_fetch(fetch.src, fetch.request, now_ms, allow_delay=False)
            else:
                self.waiting_fetches.append(fetch)

    def expire_waiting(self, now_ms: int) -> None:
        """Deadlines: an acks=all append times out (REQUEST_TIMED_OUT, never acknowledged), a
        long poll answers with what there is."""
        for produce in [p for p in self.waiting_produces if p.deadline_ms <= now_ms]:
            self.waiting_produces.remove(produce)
            self.on_produce_completed(produce.batch, ErrorCode.REQUEST_TIMED_OUT)
        for fetch in [f for f in self.waiting_fetches if f.deadline_ms <= now_ms]:
            self.waiting_fetches.remove(fetch)
            self.answer_fetch(fetch.src, fetch.request, now_ms, allow_delay=False)

    # ------------------------------------------------------------ periodic work

    def tick(self, now_ms: int) -> None:
        self.expire_waiting(now_ms)
        if self.partition.role is Role.LEADER:
            self.leader_tick(now_ms)
        elif self.partition.role is Role.FOLLOWER and self.partition.leader_id >= 0:
            self.follower_tick(now_ms)

    def leader_tick(self, now_ms: int) -> None:
        request = self.partition.check_isr_shrink(now_ms, self.config.replica_lag_time_max_ms)
        if request is not None:
            self.send_alter_partition(request, now_ms)
        pending = self.partition.pending_alter_partition
        if (
            pending is not None
            and self.alter_sent_ms is not None
            and now_ms - self.alter_sent_ms >= self.config.alter_partition_retry_ms
        ):
            self.send_alter_partition(pending, now_ms)

    def send_alter_partition(self, request: IsrChangeProposal, now_ms: int) -> None:
        self.alter_sent_ms = now_ms
        self.send(CONTROLLER, AlterPartitionMessage(request))

    def follower_tick(self, now_ms: int) -> None:
        if self.inflight is not None:
            if now_ms - self.inflight[1] < self.config.request_timeout_ms:
                return
            self.inflight = None
        leader_id = self.partition.leader_id
        poll = self.fetcher.poll(now_ms, lambda topic_partition: self.log)
        for decision in poll.truncate_now.values():
            self.apply_truncation(decision)
        correlation_id = next(self.correlation)
        if poll.epoch_queries:
            self.inflight = (correlation_id, now_ms)
            self.send(leader_id, EpochRequest(poll.epoch_queries[TP], correlation_id))
        elif poll.fetch:
            self.inflight = (correlation_id, now_ms)
            request = FetchRequest(
                self.node_id,
                self.broker_epoch,
                poll.fetch[TP],
                self.config.replica_fetch_wait_max_ms,
                correlation_id,
            )
            self.send(leader_id, request)

    def apply_truncation(self, decision: TruncationDecision | None) -> None:
        if decision is None:
            return
        high_watermark = self.log.high_watermark
        if decision.fully:
            self.log.truncate_fully_and_start_at(decision.offset)
        else:
            # KIP-101: truncation never cuts committed data.
            assert (
                decision.offset >= high_watermark or decision.offset >= self.log.log_end_offset
            ), (
                f"seed {self.cluster.seed}: node {self.node_id} truncating to {decision.offset} "
                f"below its high watermark {high_watermark}"
            )
            self.log.truncate_to(decision.offset)
        self.cluster.truncations += 1

    # ------------------------------------------------------------ message handling

    def receive(self, src: object, message: object, now_ms: int) -> None:
        handler = {
            FetchRequest: self.on_fetch_request,
            FetchResponse: self.on_fetch_response,
            EpochRequest: self.on_epoch_request,
            EpochResponse: self.on_epoch_response,
            ListOffsetsRequest: self.on_list_offsets_request,
            ListOffsetsResponse: self.on_list_offsets_response,
            AlterPartitionAnswer: self.on_alter_partition_answer,
            ProduceRequest: self.on_produce_request,
        }[type(message)]
        handler(src, message, now_ms)

    # leader side

    def on_produce_request(self, src: object, request: ProduceRequest, now_ms: int) -> None:
        min_isr = self.config.min_insync_replicas
        try:
            self.partition.check_enough_replicas_for_append(min_isr)
        except KafkaError:
            return
        batch = self.log.append_as_leader(
            request.payload, request.record_count, self.partition.leader_epoch
        )
        self.cluster.record_append(batch, self.node_id)
        self.partition.maybe_increment_high_watermark()
        self.waiting_produces.append(
            WaitingProduce(
                batch, batch.next_offset, min_isr, now_ms + self.config.produce_timeout_ms
            )  # fmt: skip
        )
        self.complete_delayed(now_ms)

    def on_produce_completed(self, batch: Batch, error: ErrorCode) -> None:
        if error == ErrorCode.NONE:
            self.cluster.record_ack(batch)

    def on_fetch_request(self, src: int, request: FetchRequest, now_ms: int) -> None:
        self.answer_fetch(src, request, now_ms, allow_delay=True)

    def answer_fetch(self, src: int, request: FetchRequest, now_ms: int, allow_delay: bool) -> None:
        fetch = request.fetch
        try:
            validation = self.partition.validate_fetch(
                request.replica_id,
                fetch.fetch_offset,
                fetch.current_leader_epoch,
                fetch.last_fetched_epoch,
            )
        except KafkaError as error:
            self.send(src, FetchResponse(request, error.error_code, self.log.high_watermark))
            return
        if validation.diverging_epoch is not None:
            diverging = validation.diverging_epoch
            self.send(
                src,
                FetchResponse(
                    request,
                    ErrorCode.NONE,
                    self.log.high_watermark,
                    self.log.log_start_offset,
                    diverging_epoch=(diverging.leader_epoch, diverging.end_offset),
                ),
            )
            return
        if self.partition.update_follower_fetch_state(
            request.replica_id,
            fetch.fetch_offset,
            fetch.log_start_offset,
            now_ms,
            request.broker_epoch,
        ):
            self.complete_delayed(now_ms)
        expand = self.partition.check_isr_expand(request.replica_id)
        if expand is not None:
            self.send_alter_partition(expand, now_ms)
        batches = self.log.read(
            fetch.fetch_offset, fetch.partition_max_bytes, self.log.log_end_offset
        )
        if not batches and allow_delay and request.max_wait_ms > 0:
            if len(self.waiting_fetches) < MAX_WAITING_FETCHES:
                self.waiting_fetches.append(
                    WaitingFetch(src, request, now_ms + request.max_wait_ms)
                )
                return
        self.send(
            src,
            FetchResponse(
                request,
                ErrorCode.NONE,
                self.log.high_watermark,
                self.log.log_start_offset,
                tuple(batches),
            ),
        )

    def fetch_ready(self, request: FetchRequest) -> bool:
        """A woken long poll answers now, as the Fetch handler's re-read does, when it would
        find an error (leadership or leader epoch moved, the log truncated below its fetch
        offset) or at least one byte (min_bytes 1); otherwise it keeps waiting."""
        fetch = request.fetch
        partition = self.partition
        if not partition.is_leader:
            return True
        epoch = fetch.current_leader_epoch
        if epoch != UNDEFINED_EPOCH and epoch != partition.leader_epoch:
            return True
        if fetch.fetch_offset > self.log.log_end_offset:
            return True
        return self.log.bytes_between(fetch.fetch_offset, self.log.log_end_offset) > 0

    def on_epoch_request(self, src: int, request: EpochRequest, now_ms: int) -> None:
        try:
            answer = self.partition.offsets_for_leader_epoch(
                request.query.current_leader_epoch, request.query.leader_epoch
            )
        except KafkaError as error:
            self.send(src, EpochResponse(request, error.error_code))
            return
        self.send(
            src, EpochResponse(request, ErrorCode.NONE, answer.leader_epoch, answer.end_offset)
        )

    def on_list_offsets_request(self, src: int, request: ListOffsetsRequest, now_ms: int) -> None:
        try:
            self.partition.validate_current_leader_epoch(request.current_leader_epoch)
        except KafkaError as error:
            self.send(src, ListOffsetsResponse(request, error.error_code))
            return
        self.send(
            src,
            ListOffsetsResponse(
                request, ErrorCode.NONE, self.log.log_start_offset, self.log.log_end_offset
            ),
        )

    def on_alter_partition_answer(
        self, src: object, answer: AlterPartitionAnswer, now_ms: int
    ) -> None:
        if answer.request != self.partition.pending_alter_partition:
            return
        result = self.partition.on_alter_partition_response(
            answer.error, answer.leader_epoch, answer.partition_epoch, answer.isr
        )
        if result.high_watermark_moved:
            self.complete_delayed(now_ms)

    # follower side

    def _current(self, correlation_id: int) -> bool:
        if self.inflight is None or self.inflight[0] != correlation_id:
            return False
        self.inflight = None
        return self.partition.role is Role.FOLLOWER

    def on_epoch_response(self, src: int, response: EpochResponse, now_ms: int) -> None:
        if not self._current(response.request.correlation_id):
            return
        if response.request.query.current_leader_epoch != self.follower.leader_epoch:
            return
        if response.error != ErrorCode.NONE:
            self.follower.on_error(response.error, now_ms)
            return
        decision = self.follower.on_epoch_end_offset(
            response.leader_epoch, response.end_offset, self.log
        )
        self.apply_truncation(decision)

    def on_fetch_response(self, src: int, response: FetchResponse, now_ms: int) -> None:
        if not self._current(response.request.correlation_id):
            return
        batches = list(response.batches)
        meta = None
        if batches:
            meta = RecordsMeta(
                batches[0].base_offset,
                batches[-1].next_offset,
                sum(b.size_bytes for b in batches),
            )
        outcome = self.follower.on_fetch_response(
            response.request.fetch,
            response.error,
            response.high_watermark,
            response.log_start_offset,
            meta,
            self.log,
            now_ms,
            diverging_epoch=response.diverging_epoch,
        )
        if outcome.ignored:
            return
        self.apply_truncation(outcome.truncation)
        if outcome.needs_leader_offsets:
            self.cluster.offset_resets += 1
            correlation_id = next(self.correlation)
            self.inflight = (correlation_id, now_ms)
            self.send(src, ListOffsetsRequest(self.follower.leader_epoch, correlation_id))
            return
        if outcome.append:
            self.log.append_as_follower(batches)
            self.fetcher.mark_fetched(TP)
        if outcome.high_watermark is not None:
            self.log.update_high_watermark(outcome.high_watermark)
        if outcome.log_start_offset is not None:
            self.log.maybe_increment_log_start_offset(outcome.log_start_offset)

    def on_list_offsets_response(
        self, src: int, response: ListOffsetsResponse, now_ms: int
    ) -> None:
        if not self._current(response.request.correlation_id):
            return
        if response.request.current_leader_epoch != self.follower.leader_epoch:
            return
        if response.error != ErrorCode.NONE:
            self.follower.on_error(response.error, now_ms)
            return
        self.apply_truncation(
            self.follower.on_leader_offsets(
                response.log_start_offset, response.log_end_offset, self.log
            )
        )


# ---------------------------------------------------------------------- the cluster


def batches_between(log: MemoryLog, from_offset: int, to_offset: int) -> list[Batch]:
    """The batches starting at or after from_offset and ending before to_offset."""
    first = bisect.bisect_left(log.batches, from_offset, key=lambda b: b.base_offset)
    end = bisect.bisect_right(log.batches, to_offset - 1, key=lambda b: b.last_offset)
    return log.batches[first:end]


@dataclass
class Fault:
    kind: str
    node_id: int
    until_ms: int


@dataclass
class Cluster:
    seed: int
    config: SimConfig = field(default_factory=SimConfig)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.broker_epochs = itertools.count()
        self.now_ms = 0
        self.network = Network(self.rng, self.config)
        self.nodes = {i: Node(self, i) for i in range(self.config.replica_count)}
        self.controller = Controller(self)
        self.acked: dict[int, Batch] = {}  # base_offset -> batch
        self.acked_set: set[Batch] = set()
        self.leader_of_epoch: dict[int, int] = {}
        self.writer_of_epoch: dict[int, int] = {}
        self.restarts: list[tuple[int, int]] = []  # (restart at ms, node_id)
        self.payloads = itertools.count()
        self.producer_view = self.controller.leader
        self.elections = 0
        self.truncations = 0
        self.offset_resets = 0
        self.faults = 0
        self.power_failures = 0
        self.sole_isr_power_failures = 0  # of the last ISR member (issue 14)
        self.under_min_isr_power_failures = 0  # of a member of an ISR below min ISR
        # Brokers that crashed (True: losing their unflushed tail) and have not been back in
        # the ISR since: KIP-966 keeps acknowledged data through min.insync.replicas - 1 such
        # unclean shutdowns; the faults keep to one at a time when one of them lost data.
        self.unclean: dict[int, bool] = {}

    # ------------------------------------------------------------ bookkeeping

    def record_leader(self, leader_epoch: int, node_id: int) -> None:
        owner = self.leader_of_epoch.setdefault(leader_epoch, node_id)
        assert owner == node_id, (
            f"seed {self.seed}: two leaders in epoch {leader_epoch}: {owner} and {node_id}"
        )

    def record_append(self, batch: Batch, node_id: int) -> None:
        owner = self.writer_of_epoch.setdefault(batch.leader_epoch, node_id)
        assert owner == node_id, f"seed {self.seed}: epoch {batch.leader_epoch} has two writers"
        assert self.leader_of_epoch.get(batch.leader_epoch) == node_id

    def record_ack(self, batch: Batch) -> None:
        previous = self.acked.setdefault(batch.base_offset, batch)
        assert previous == batch, f"seed {self.seed}: offset {batch.base_offset} acked twice"
        self.acked_set.add(batch)

    # ------------------------------------------------------------ actions

    def produce(self, target: int | None = None) -> None:
        payload = f"p{next(self.payloads)}"
        count = self.rng.randint(1, 3)
        dst = self.producer_view if target is None else target
        if dst >= 0:
            self.network.send(self.now_ms, PRODUCER, dst, ProduceRequest(payload, count))

    def crash(self, node_id: int, lose_unflushed: bool, down_ms: int | None = None) -> None:
        node = self.nodes[node_id]
        assert node.alive
        node.crash(lose_unflushed)
        self.unclean[node_id] = self.unclean.get(node_id, False) or lose_unflushed
        if lose_unflushed:
            self.power_failures += 1
            isr = self.controller.isr
            if isr == (node_id,):
                self.sole_isr_power_failures += 1
            if node_id in isr and len(isr) < self.config.min_insync_replicas:
                self.under_min_isr_power_failures += 1
            self.controller.fence_now.add(node_id)
        if down_ms is not None:
            self.restarts.append((self.now_ms + down_ms, node_id))
        self.faults += 1

    def restart(self, node_id: int, clean: bool = False) -> None:
        """`clean`: the new process registers naming its previous broker epoch (a clean
        shutdown's marker), so the controller keeps it where it was; otherwise (any crash) it
        registers uncleanly and leaves the ISR and the ELR."""
        node = self.nodes[node_id]
        node.restart()
        if clean:
            self.controller.registered_epoch[node_id] = node.broker_epoch
            self.unclean.pop(node_id, None)

    def isolate(self, node_id: int, duration_ms: int) -> None:
        until_ms = self.now_ms + duration_ms
        for other in [*self.nodes, CONTROLLER, PRODUCER]:
            if other != node_id:
                self.network.cut(node_id, other, until_ms)
        self.faults += 1

    def delete_prefix(self) -> None:
        """The leader moves its log start offset to a random offset up to its HW."""
        leader = self.nodes.get(self.controller.leader)
        if leader is None or not leader.alive or leader.partition.role is not Role.LEADER:
            return
        log = leader.log
        if log.high_watermark > log.log_start_offset:
            # Any offset, batch boundary or not (DeleteRecords may cut inside a batch).
            log.maybe_increment_log_start_offset(
                self.rng.randint(log.log_start_offset, log.high_watermark)
            )

    def power_failure_allowed(self, node_id: int) -> bool:
        """Unless another broker's unclean shutdown is still pending (KIP-966 keeps acked data
        through min.insync.replicas - 1 unclean shutdowns; Kafka relies on replication, not
        fsync): any broker with min.insync.replicas >= 2, the last ISR member included; with
        min.insync.replicas 1 (no such guarantee) only one whose data another live ISR or ELR
        member holds."""
        if any(other != node_id for other in self.unclean):
            return False
        if self.config.min_insync_replicas >= 2:
            return True
        holders = self.controller.isr + self.controller.state.elr
        return node_id not in holders or any(r != node_id and self.nodes[r].alive for r in holders)

    def process_crash_allowed(self, node_id: int) -> bool:
        """A crash keeps the page cache, but registers uncleanly all the same (no marker)."""
        return not any(lost for other, lost in self.unclean.items() if other != node_id)

    def forget_recovered_unclean_shutdowns(self) -> None:
        controller = self.controller
        for node_id in list(self.unclean):
            node = self.nodes[node_id]
            registered = controller.registered_epoch[node_id] == node.broker_epoch
            if node.alive and registered and node_id in controller.isr:
                del self.unclean[node_id]

    # ------------------------------------------------------------ the loop

    def step(self) -> None:
        """One tick of `step_ms`; any failed assertion is re-raised naming the seed."""
        try:
            self._step()
        except AssertionError as error:
            if f"seed {self.seed}" in str(error):
                raise
            raise AssertionError(f"seed {self.seed} at {self.now_ms} ms: {error!r}") from error

    def _step(self) -> None:
        config = self.config
        self.now_ms += config.step_ms
        self.network.heal(self.now_ms)
        for at_ms, node_id in [r for r in self.restarts if r[0] <= self.now_ms]:
            self.restarts.remove((at_ms, node_id))
            self.restart(node_id)
        self.inject_faults()
        self.controller.tick(self.now_ms)
        self.forget_recovered_unclean_shutdowns()
        for src, dst, message in self.network.due(self.now_ms):
            if dst == CONTROLLER:
                answer = self.controller.on_alter_partition(src, message.request)
                self.network.send(self.now_ms, CONTROLLER, src, answer)
            elif dst != PRODUCER and self.nodes[dst].alive:
                self.nodes[dst].receive(src, message, self.now_ms)
        for node_id, node in self.nodes.items():
            if not node.alive:
                continue
            if self.network.connected(CONTROLLER, node_id) and (
                self.rng.random() < config.metadata_pull_probability
            ):
                node.apply_metadata(self.controller.metadata(), self.now_ms)
            node.tick(self.now_ms)
            if self.rng.random() < config.flush_probability:
                node.log.flush()
        if self.rng.random() < config.retention_probability:
            self.delete_prefix()
        if self.rng.random() < config.metadata_pull_probability:
            self.producer_view = self.controller.leader
        if self.rng.random() < config.produce_probability:
            self.produce()
        self.check_invariants()

    def inject_faults(self) -> None:
        config = self.config
        rng = self.rng
        alive = [n for n, node in self.nodes.items() if node.alive]
        low, high = config.fault_duration_ms
        if alive and rng.random() < config.process_crash_probability:
            node_id = rng.choice(alive)
            if self.process_crash_allowed(node_id):
                self.crash(node_id, lose_unflushed=False, down_ms=rng.randint(low, high))
        alive = [n for n, node in self.nodes.items() if node.alive]
        if alive and rng.random() < config.power_failure_probability:
            node_id = rng.choice(alive)
            if self.power_failure_allowed(node_id):
                self.crash(node_id, lose_unflushed=True, down_ms=rng.randint(low, high))
        live_isr = [r for r in self.controller.isr if self.nodes[r].alive]
        if (
            live_isr
            and len(self.controller.isr) < config.min_insync_replicas
            and rng.random() < config.under_min_isr_power_failure_probability
        ):
            node_id = rng.choice(live_isr)
            if self.power_failure_allowed(node_id):
                self.crash(node_id, lose_unflushed=True, down_ms=rng.randint(low, high))
        if rng.random() < config.isolate_probability:
            self.isolate(rng.choice(list(self.nodes)), rng.randint(low, high))
        if rng.random() < config.leader_move_probability:
            self.controller.move_leader(rng)
        if rng.random() < config.cut_link_probability:
            a, b = rng.sample([*self.nodes, CONTROLLER], 2)
            self.network.cut(a, b, self.now_ms + rng.randint(low, high))
            self.faults += 1

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step()

    def run_until(self, predicate: Callable[[], bool], max_steps: int = 1000) -> None:
        for _ in range(max_steps):
            if predicate():
                return
            self.step()
        raise AssertionError(f"seed {self.seed}: condition not reached in {max_steps} steps")

    def leader_is(self, node_id: int) -> bool:
        node = self.nodes[node_id]
        return self.controller.leader == node_id and node.partition.role is Role.LEADER

    def acked_payloads(self) -> set[str]:
        return {batch.payload for batch in self.acked.values()}

    def quiesce(self) -> None:
        """No more faults or produce; heal the network and restart every crashed node."""
        config = self.config
        config.process_crash_probability = config.power_failure_probability = 0.0
        config.under_min_isr_power_failure_probability = 0.0
        config.isolate_probability = config.cut_link_probability = 0.0
        config.leader_move_probability = 0.0
        config.produce_probability = 0.0
        self.heal_all()

    def heal_all(self) -> None:
        self.network.cut_links.clear()
        for at_ms, node_id in list(self.restarts):
            self.restarts.remove((at_ms, node_id))
            self.restart(node_id)
        for node_id, node in self.nodes.items():
            if not node.alive:
                self.restart(node_id)

    # ------------------------------------------------------------ invariants

    def check_invariants(self) -> None:
        """After every step:

        1. every acknowledged (acks=all) batch is in the log of every live member of the
           controller's ISR (the current leader included): same offset, leader epoch, payload;
        2. every two live replicas hold identical batches below the smaller of their HWs, and
           each live replica's log below its HW is a prefix of the live leader's log;
        3. per process, the high watermark and the partition's leader epoch never go backwards
           (truncation below the HW is asserted never to happen in `apply_truncation`);
        4. one leader per leader epoch, and only it appends batches of that epoch (recorded on
           make_leader and on append).
        """
        seed = self.seed
        live = [node for node in self.nodes.values() if node.alive]
        leader_id = self.controller.leader
        holders = [self.nodes[r] for r in self.controller.isr if self.nodes[r].alive]
        for node in holders:
            missing = [
                batch
                for batch in self.acked_set.difference(node.log.batches)
                if batch.next_offset > node.log.log_start_offset  # not deleted by retention
            ]
            assert not missing, (
                f"seed {seed}: acked {sorted(missing)[:3]} missing on ISR member {node.node_id} "
                f"(leader {leader_id}, log {node.log.batches})"
            )
        for node in live:
            hw = node.log.high_watermark
            assert hw >= node.high_watermark_seen, f"seed {seed}: HW went back on {node.node_id}"
            node.high_watermark_seen = hw
            epoch = node.partition.leader_epoch
            assert epoch >= node.leader_epoch_seen, f"seed {seed}: epoch went back"
            node.leader_epoch_seen = epoch
        for a in live:
            for b in live:
                if a.node_id < b.node_id:
                    self.check_same_below_high_watermarks(
                        a.log, b.log, f"replicas {a.node_id}, {b.node_id}"
                    )
        if leader_id >= 0 and self.nodes[leader_id].alive:
            leader_log = self.nodes[leader_id].log
            for node in live:
                start = max(node.log.log_start_offset, leader_log.log_start_offset)
                mine = batches_between(node.log, start, node.log.high_watermark)
                assert batches_between(leader_log, start, node.log.high_watermark) == mine, (
                    f"seed {seed}: node {node.node_id}'s committed log is not in leader {leader_id}'s"
                )

    def check_same_below_high_watermarks(self, a: MemoryLog, b: MemoryLog, what: str) -> None:
        start = max(a.log_start_offset, b.log_start_offset)
        end = min(a.high_watermark, b.high_watermark)
        assert batches_between(a, start, end) == batches_between(b, start, end), (
            f"seed {self.seed}: {what} differ below their high watermarks"
        )

    def converged(self) -> bool:
        leader_id = self.controller.leader
        if leader_id < 0:
            return False
        leader = self.nodes[leader_id]
        if leader.partition.role is not Role.LEADER:
            return False
        end_offset = leader.log.log_end_offset
        # Log start offsets may legitimately differ (a follower reset after OFFSET_OUT_OF_RANGE
        # starts where an earlier leader had deleted to): compare from the highest one.
        start = max(node.log.log_start_offset for node in self.nodes.values())
        expected = batches_between(leader.log, start, end_offset)
        for node in self.nodes.values():
            if node.log.log_end_offset != end_offset or node.log.high_watermark != end_offset:
                return False
            if batches_between(node.log, start, end_offset) != expected:
                return False
        return set(self.controller.isr) == set(self.nodes)
