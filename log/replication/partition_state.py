"""One partition's replication state on this broker (Kafka's `Partition`), sans-IO.

The leader tracks each follower's fetch progress (`ReplicaState`), advances the high watermark to
the minimum log end offset over the in-sync replicas (never backwards), and proposes ISR changes
to the controller (AlterPartition). A proposal is *pending* until the controller answers; while
pending, the high watermark and the min.insync.replicas check after an append use the **maximal
ISR** (committed ISR plus a pending expansion; a pending shrink still counts the larger, old set),
so a change is only relied upon once the controller has committed it. Only one proposal is in
flight at a time, as in Kafka.

Roles and legal transitions (`make_leader`, `make_follower`, `make_offline`):

    NONE     -> LEADER | FOLLOWER
    LEADER   -> LEADER   same leader_epoch, newer partition_epoch: ISR/replicas update, keep state
             -> LEADER   newer leader_epoch: a new term, follower states reset
             -> FOLLOWER newer leader_epoch
    FOLLOWER -> FOLLOWER newer leader_epoch (new leader or same leader re-elected): re-truncate
             -> FOLLOWER same leader_epoch, newer partition_epoch: ISR update only
             -> LEADER   newer leader_epoch
    any      -> NONE     (make_offline: replica stopped or deleted)

A change with an older leader_epoch, or the same leader_epoch and an older partition_epoch, is
stale and ignored (`StateChange.IGNORED_STALE`); so is one equal to what is already applied (the
leader may have learned that partition_epoch from an AlterPartition answer and since proposed a
new change: re-applying the old state would silently drop that proposal, which the controller
may commit, leaving the leader computing the HW over a smaller ISR than the controller's).

Everything here is synchronous and takes `now_ms`; the driver owns the clock, the network and
the log's appends. Failures that can happen are raised as `KafkaError` subclasses carrying
Kafka's error code.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from log.common.errors import (
    ErrorCode,
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
)
from log.replication.replica_log import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    UNKNOWN_OFFSET,
    ReplicaLog,
)

# No leader (Kafka's LeaderAndIsr.NO_LEADER).
NO_LEADER = -1
# Bound on assigned replicas per partition (Kafka has no hard cap; ours keeps per-fetch work small).
MAX_REPLICAS = 64


class Role(enum.Enum):
    NONE = "none"
    LEADER = "leader"
    FOLLOWER = "follower"


class StateChange(enum.Enum):
    IGNORED_STALE = "ignored_stale"
    UPDATED = "updated"  # same leader_epoch: ISR / replicas / partition_epoch refreshed
    NEW_LEADER_EPOCH = "new_leader_epoch"  # a new term: followers (re)truncate


class AlterPartitionOutcome(enum.Enum):
    COMMITTED = "committed"  # the controller accepted; ISR and partition_epoch updated
    RETRY = "retry"  # transient error: resend `pending_alter_partition` after a back-off
    AWAIT_METADATA = "await_metadata"  # fenced / stale version: keep pending until new metadata
    RESET = "reset"  # not applied (OPERATION_NOT_ATTEMPTED, INELIGIBLE_REPLICA): back to committed
    IGNORED = "ignored"  # nothing pending, or an answer for an older leader_epoch/partition_epoch


# Errors after which Kafka keeps the proposal pending and waits for the controller's metadata.
_AWAIT_METADATA_ERRORS = frozenset(
    {
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.INVALID_UPDATE_VERSION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NEW_LEADER_ELECTED,
    }
)
_RESET_ERRORS = frozenset({ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA})


@dataclass
class ReplicaState:
    """A follower as its leader sees it (Kafka's `Replica` state snapshot)."""

    replica_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_caught_up_time_ms: int = 0
    last_fetch_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    broker_epoch: int = -1  # the follower process incarnation that fetched last (KIP-903)

    def is_caught_up(
        self, leader_end_offset: int, now_ms: int, replica_lag_time_max_ms: int
    ) -> bool:
        return (
            self.log_end_offset == leader_end_offset
            or now_ms - self.last_caught_up_time_ms <= replica_lag_time_max_ms
        )


@dataclass(frozen=True)
class IsrChangeProposal:
    """What the leader asks the controller (the AlterPartition request, one partition)."""

    leader_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    # Per new_isr member, the broker epoch its state was learned from (-1: unknown / leader).
    # The controller refuses (INELIGIBLE_REPLICA) a member that has re-registered since: a
    # proposal built from a dead incarnation's fetch must not put a restarted broker, which may
    # have lost its unflushed tail, into the ISR (KIP-903).
    new_isr_broker_epochs: tuple[int, ...] = ()


@dataclass(frozen=True)
class AlterPartitionResult:
    outcome: AlterPartitionOutcome
    high_watermark_moved: bool = False


@dataclass(frozen=True)
class EpochEndOffset:
    """One partition's OffsetsForLeaderEpoch answer (error is raised, not carried)."""

    leader_epoch: int
    end_offset: int


@dataclass(frozen=True)
class FetchValidation:
    """The leader's verdict on a fetch before reading; `diverging_epoch` means: read nothing."""

    diverging_epoch: EpochEndOffset | None = None


class PartitionState:
    """Leader/follower state of one partition on broker `local_broker_id`."""

    def __init__(self, local_broker_id: int, log: ReplicaLog, min_insync_replicas: int = 1) -> None:
        self.local_broker_id = local_broker_id
        self.log = log
        # The topic's min.insync.replicas (the driver keeps it current): a leader under it does
        # not advance its high watermark (KIP-966).
        self.min_insync_replicas = min_insync_replicas
        self.role = Role.NONE
        self.leader_id = NO_LEADER
        self.leader_epoch = UNDEFINED_EPOCH
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: frozenset[int] = frozenset()  # committed by the controller
        self.pending_alter_partition: IsrChangeProposal | None = None
        self.leader_epoch_start_offset = UNDEFINED_EPOCH_OFFSET
        self.followers: dict[int, ReplicaState] = {}

    # ---------------------------------------------------------------- transitions

    def make_leader(
        self,
        leader_epoch: int,
        partition_epoch: int,
        isr: Iterable[int],
        replicas: Iterable[int],
        now_ms: int,
    ) -> StateChange:
        """Become (or stay) leader. A new leader_epoch starts at the current log end offset."""
        isr_set, replica_tuple = self._validated_assignment(isr, replicas)
        assert self.local_broker_id in isr_set, "a leader is elected from the ISR"
        if self._is_stale(leader_epoch, partition_epoch, Role.LEADER):
            return StateChange.IGNORED_STALE
        is_new_leader_epoch = self.role is not Role.LEADER or leader_epoch > self.leader_epoch
        self._set_assignment(
            self.local_broker_id, leader_epoch, partition_epoch, isr_set, replica_tuple
        )
        previous = self.followers
        self.followers = {}
        for replica_id in replica_tuple:
            if replica_id == self.local_broker_id:
                continue
            if not is_new_leader_epoch and replica_id in previous:
                self.followers[replica_id] = previous[replica_id]
            else:
                # Kafka's resetReplicaState: ISR members count as caught up now.
                caught_up_ms = now_ms if replica_id in isr_set else 0
                self.followers[replica_id] = ReplicaState(
                    replica_id, last_caught_up_time_ms=caught_up_ms
                )
        if is_new_leader_epoch:
            self.role = Role.LEADER
            self.leader_epoch_start_offset = self.log.log_end_offset
            self.log.maybe_assign_epoch_start_offset(leader_epoch, self.leader_epoch_start_offset)
        self.maybe_increment_high_watermark()
        return StateChange.NEW_LEADER_EPOCH if is_new_leader_epoch else StateChange.UPDATED

    def make_follower(
        self,
        leader_id: int,
        leader_epoch: int,
        partition_epoch: int,
        isr: Iterable[int],
        replicas: Iterable[int],
    ) -> StateChange:
        """Follow `leader_id`. NEW_LEADER_EPOCH means: restart this partition's fetch with truncation."""
        isr_set, replica_tuple = self._validated_assignment(isr, replicas)
        assert leader_id != self.local_broker_id, "use make_leader"
        if self._is_stale(leader_epoch, partition_epoch, Role.FOLLOWER):
            return StateChange.IGNORED_STALE
        is_new_leader_epoch = (
            self.role is not Role.FOLLOWER
            or leader_epoch > self.leader_epoch
            or leader_id != self.leader_id
        )
        self._set_assignment(leader_id, leader_epoch, partition_epoch, isr_set, replica_tuple)
        self.role = Role.FOLLOWER
        self.followers = {}
        self.leader_epoch_start_offset = UNDEFINED_EPOCH_OFFSET
        return StateChange.NEW_LEADER_EPOCH if is_new_leader_epoch else StateChange.UPDATED

    def make_offline(self) -> None:
        """Stop replicating (replica stopped or deleted); waiting operations see NOT_LEADER."""
        self.role = Role.NONE
        self.leader_id = NO_LEADER
        self.followers = {}
        self.pending_alter_partition = None

    def _is_stale(self, leader_epoch: int, partition_epoch: int, role: Role) -> bool:
        """Older, or exactly what we have already applied (perhaps via an AlterPartition
        answer): re-applying it would drop a proposal the controller may since have committed."""
        if leader_epoch != self.leader_epoch:
            return leader_epoch < self.leader_epoch
        if partition_epoch != self.partition_epoch:
            return partition_epoch < self.partition_epoch
        return self.role is role

    def _validated_assignment(
        self, isr: Iterable[int], replicas: Iterable[int]
    ) -> tuple[frozenset[int], tuple[int, ...]]:
        replica_tuple = tuple(replicas)
        isr_set = frozenset(isr)
        assert 0 < len(replica_tuple) <= MAX_REPLICAS, replica_tuple
        assert len(set(replica_tuple)) == len(replica_tuple), replica_tuple
        assert isr_set <= set(replica_tuple), (isr_set, replica_tuple)
        return isr_set, replica_tuple

    def _set_assignment(
        self,
        leader_id: int,
        leader_epoch: int,
        partition_epoch: int,
        isr: frozenset[int],
        replicas: tuple[int, ...],
    ) -> None:
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.isr = isr
        self.replicas = replicas
        # New metadata from the controller supersedes whatever we had proposed.
        self.pending_alter_partition = None

    # ---------------------------------------------------------------- leader: ISR and HW

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def maximal_isr(self) -> frozenset[int]:
        """Committed ISR plus a pending expansion; a pending shrink keeps the larger set."""
        if self.pending_alter_partition is None:
            return self.isr
        return self.isr | frozenset(self.pending_alter_partition.new_isr)

    def update_follower_fetch_state(
        self,
        replica_id: int,
        fetch_offset: int,
        log_start_offset: int,
        now_ms: int,
        broker_epoch: int = -1,
    ) -> bool:
        """Record a valid follower fetch at `fetch_offset`; return whether the HW moved.

        `broker_epoch` is the fetching process's broker epoch (Fetch v15 `replica_epoch`), -1 when
        unknown; it travels with ISR expansions so that the controller can reject stale ones.
        """
        replica = self._follower_or_raise(replica_id)
        replica.broker_epoch = broker_epoch
        leader_end_offset = self.log.log_end_offset
        assert 0 <= fetch_offset <= leader_end_offset, (fetch_offset, leader_end_offset)
        if fetch_offset >= leader_end_offset:
            replica.last_caught_up_time_ms = max(replica.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= replica.last_fetch_leader_log_end_offset >= 0:
            # Caught up to where the leader was at the previous fetch: in sync as of that fetch.
            replica.last_caught_up_time_ms = max(
                replica.last_caught_up_time_ms, replica.last_fetch_time_ms
            )
        previous_end_offset = replica.log_end_offset
        replica.log_end_offset = fetch_offset
        replica.log_start_offset = log_start_offset
        replica.last_fetch_leader_log_end_offset = leader_end_offset
        replica.last_fetch_time_ms = now_ms
        if previous_end_offset == fetch_offset:
            return False
        return self.maybe_increment_high_watermark()

    @property
    def is_under_min_isr(self) -> bool:
        """A leader whose committed ISR is smaller than the effective min.insync.replicas
        (at most the replication factor, as Kafka's effectiveMinIsr)."""
        effective = min(self.min_insync_replicas, len(self.replicas))
        return self.role is Role.LEADER and len(self.isr) < effective

    @property
    def high_watermark_lags_epoch_start(self) -> bool:
        """A new leader whose high watermark is still below where its epoch started: records
        the previous leader had acknowledged lie above it until the followers' next fetches
        move it (Kafka's check, KIP-207). Offsets a client asks for now could run backwards,
        so ListOffsets answers OFFSET_NOT_AVAILABLE (retriable) meanwhile."""
        return self.role is Role.LEADER and self.leader_epoch_start_offset > self.log.high_watermark

    def maybe_increment_high_watermark(self) -> bool:
        """HW := min log end offset over the maximal ISR (leader included), never backwards.
        Not while under min ISR (KIP-966, Kafka's maybeIncrementLeaderHW): a sole ISR member
        would commit records no eligible leader replica holds, and an election of one of those
        would then take committed records back."""
        if self.role is not Role.LEADER or self.is_under_min_isr:
            return False
        new_high_watermark = self.log.log_end_offset
        for replica_id in self.maximal_isr:
            if replica_id == self.local_broker_id:
                continue
            replica = self.followers.get(replica_id)
            end_offset = replica.log_end_offset if replica is not None else UNKNOWN_OFFSET
            new_high_watermark = min(new_high_watermark, end_offset)
        if new_high_watermark <= self.log.high_watermark:
            return False
        self.log.update_high_watermark(new_high_watermark)
        return True

    def low_watermark(self, live_broker_ids: frozenset[int] | set[int]) -> int:
        """The smallest log start offset over the leader and its live followers (Kafka's
        lowWatermarkIfLeader): what DeleteRecords waits for. A live follower that never
        fetched counts as UNKNOWN_OFFSET (-1): nothing is known deleted there."""
        assert self.role is Role.LEADER
        low = self.log.log_start_offset
        for replica_id, replica in self.followers.items():
            if replica_id in live_broker_ids:
                low = min(low, replica.log_start_offset)
        return low

    def follower_log_start_offset(self, replica_id: int) -> int:
        """A follower's log start offset from its last fetch (UNKNOWN_OFFSET: none yet)."""
        replica = self.followers.get(replica_id)
        return replica.log_start_offset if replica is not None else UNKNOWN_OFFSET

    def check_isr_shrink(
        self, now_ms: int, replica_lag_time_max_ms: int
    ) -> IsrChangeProposal | None:
        """Propose removing followers not caught up within the lag limit (None: nothing to do)."""
        if self.role is not Role.LEADER or self.pending_alter_partition is not None:
            return None
        leader_end_offset = self.log.log_end_offset
        out_of_sync = {
            replica_id
            for replica_id in self.isr
            if replica_id != self.local_broker_id
            and not self._follower_or_raise(replica_id).is_caught_up(
                leader_end_offset, now_ms, replica_lag_time_max_ms
            )
        }
        if not out_of_sync:
            return None
        return self._propose(self.isr - out_of_sync)

    def check_isr_expand(
        self, replica_id: int, ineligible_replica_ids: Collection[int] = ()
    ) -> IsrChangeProposal | None:
        """Propose adding `replica_id` once it reached the HW and the current epoch's start.

        `ineligible_replica_ids`: brokers the metadata image shows fenced or shutting down
        (KIP-841); the controller would refuse them, so they are not proposed.
        """
        if self.role is not Role.LEADER or self.pending_alter_partition is not None:
            return None
        if replica_id in self.isr or replica_id not in self.followers:
            return None
        if replica_id in ineligible_replica_ids:
            return None
        end_offset = self.followers[replica_id].log_end_offset
        if end_offset < self.log.high_watermark or end_offset < self.leader_epoch_start_offset:
            return None
        return self._propose(self.isr | {replica_id})

    def _propose(self, new_isr: frozenset[int]) -> IsrChangeProposal:
        assert self.local_broker_id in new_isr
        members = tuple(sorted(new_isr))
        request = IsrChangeProposal(
            leader_id=self.local_broker_id,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            new_isr=members,
            new_isr_broker_epochs=tuple(
                self.followers[r].broker_epoch if r in self.followers else -1 for r in members
            ),
        )
        self.pending_alter_partition = request
        return request

    def on_alter_partition_response(
        self,
        error: ErrorCode,
        leader_epoch: int = UNDEFINED_EPOCH,
        partition_epoch: int = -1,
        isr: Iterable[int] = (),
    ) -> AlterPartitionResult:
        """Apply the controller's answer to `pending_alter_partition`."""
        if self.pending_alter_partition is None or self.role is not Role.LEADER:
            return AlterPartitionResult(AlterPartitionOutcome.IGNORED)
        if error in _AWAIT_METADATA_ERRORS:
            return AlterPartitionResult(AlterPartitionOutcome.AWAIT_METADATA)
        if error in _RESET_ERRORS:
            self.pending_alter_partition = None
            return AlterPartitionResult(AlterPartitionOutcome.RESET)
        if error != ErrorCode.NONE:
            return AlterPartitionResult(AlterPartitionOutcome.RETRY)
        if leader_epoch != self.leader_epoch or partition_epoch < self.partition_epoch:
            return AlterPartitionResult(AlterPartitionOutcome.IGNORED)
        new_isr = frozenset(isr)
        assert self.local_broker_id in new_isr and new_isr <= set(self.replicas), new_isr
        self.isr = new_isr
        self.partition_epoch = partition_epoch
        self.pending_alter_partition = None
        return AlterPartitionResult(
            AlterPartitionOutcome.COMMITTED, self.maybe_increment_high_watermark()
        )

    # ---------------------------------------------------------------- leader: produce

    def check_enough_replicas_for_append(self, min_insync_replicas: int) -> None:
        """Before an acks=all append: raise NOT_LEADER_OR_FOLLOWER / NOT_ENOUGH_REPLICAS."""
        if self.role is not Role.LEADER:
            raise NotLeaderOrFollowerError(f"broker {self.local_broker_id} is not the leader")
        if len(self.isr) < min_insync_replicas:
            raise NotEnoughReplicasError(
                f"ISR {sorted(self.isr)} is smaller than min.insync.replicas={min_insync_replicas}"
            )

    def check_enough_replicas_reach_offset(
        self, required_offset: int, min_insync_replicas: int
    ) -> tuple[bool, ErrorCode]:
        """Kafka's checkEnoughReplicasReachOffset: (done, error) for a waiting acks=all append."""
        if self.role is not Role.LEADER:
            return False, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark < required_offset:
            return False, ErrorCode.NONE
        if len(self.maximal_isr) < min_insync_replicas:
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True, ErrorCode.NONE

    # ---------------------------------------------------------------- leader: fetch / epochs

    def validate_current_leader_epoch(self, current_leader_epoch: int) -> None:
        """Raise unless we lead in exactly the requester's epoch (-1: the requester does not say)."""
        if self.role is not Role.LEADER:
            raise NotLeaderOrFollowerError(f"broker {self.local_broker_id} is not the leader")
        if current_leader_epoch == UNDEFINED_EPOCH:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"request epoch {current_leader_epoch} < {self.leader_epoch}"
            )
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError(
                f"request epoch {current_leader_epoch} > {self.leader_epoch}"
            )

    def validate_fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        current_leader_epoch: int,
        last_fetched_epoch: int = UNDEFINED_EPOCH,
    ) -> FetchValidation:
        """Check a follower fetch before reading; raise the Kafka error, or report divergence.

        With `last_fetched_epoch` (Fetch v12+), a follower whose log diverges from ours gets the
        `diverging_epoch` (our end offset for its epoch) and must truncate before fetching again.
        """
        self.validate_current_leader_epoch(current_leader_epoch)
        self._follower_or_raise(replica_id)
        log_start_offset = self.log.log_start_offset
        if fetch_offset < log_start_offset:
            raise OffsetOutOfRangeError(
                f"fetch offset {fetch_offset} < log start {log_start_offset}"
            )
        if last_fetched_epoch != UNDEFINED_EPOCH:
            epoch, end_offset = self.log.end_offset_for_epoch(last_fetched_epoch)
            if epoch < last_fetched_epoch or end_offset < fetch_offset:
                return FetchValidation(EpochEndOffset(epoch, end_offset))
        log_end_offset = self.log.log_end_offset
        if fetch_offset > log_end_offset:
            raise OffsetOutOfRangeError(f"fetch offset {fetch_offset} > log end {log_end_offset}")
        return FetchValidation()

    def offsets_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int
    ) -> EpochEndOffset:
        """Answer OffsetsForLeaderEpoch: where `leader_epoch` ends in our log."""
        self.validate_current_leader_epoch(current_leader_epoch)
        epoch, end_offset = self.log.end_offset_for_epoch(leader_epoch)
        return EpochEndOffset(epoch, end_offset)

    def _follower_or_raise(self, replica_id: int) -> ReplicaState:
        replica = self.followers.get(replica_id)
        if replica is None:
            raise NotLeaderOrFollowerError(
                f"replica {replica_id} is not a follower of this partition"
            )
        return replica
