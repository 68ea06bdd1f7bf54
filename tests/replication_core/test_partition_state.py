import pytest

from log.common.errors import (
    ErrorCode,
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
)
from log.replication.partition_state import (
    AlterPartitionOutcome,
    EpochEndOffset,
    PartitionState,
    Role,
    StateChange,
)
from tests.replication_core.memory_log import MemoryLog

LAG_MS = 30_000


def leader(isr=(1, 2, 3), replicas=(1, 2, 3), epoch=5, now_ms=0, records=0):
    log = MemoryLog()
    for i in range(records):
        log.append_as_leader(f"old{i}", 1, 0)
    p = PartitionState(1, log)
    assert p.make_leader(epoch, 10, isr, replicas, now_ms) is StateChange.NEW_LEADER_EPOCH
    return p, log


def test_make_leader_assigns_epoch_start_at_log_end_offset():
    p, log = leader(records=3)
    assert p.leader_epoch_start_offset == 3
    assert log.end_offset_for_epoch(0) == (0, 3)
    assert log.latest_epoch == 5


def test_a_new_leaders_high_watermark_lags_its_epoch_start_until_the_followers_fetch():
    # A follower that had 3 records, of which the previous leader's last high watermark it
    # heard of covers none, becomes the leader: offsets from its high watermark could run
    # backwards from what the previous leader answered (ListOffsets: OFFSET_NOT_AVAILABLE).
    p, log = leader(records=3)
    assert (log.high_watermark, p.leader_epoch_start_offset) == (0, 3)
    assert p.high_watermark_lags_epoch_start
    p.update_follower_fetch_state(2, 3, 0, 100)
    assert p.high_watermark_lags_epoch_start  # replica 3 holds the high watermark back
    p.update_follower_fetch_state(3, 3, 0, 100)
    assert log.high_watermark == 3 and not p.high_watermark_lags_epoch_start
    p.make_follower(2, 6, 11, (1, 2, 3), (1, 2, 3))
    assert not p.high_watermark_lags_epoch_start  # only a leader answers ListOffsets


def test_high_watermark_is_min_over_isr_and_never_backwards():
    p, log = leader()
    for i in range(4):
        log.append_as_leader(f"v{i}", 1, 5)
    assert not p.update_follower_fetch_state(2, 3, 0, 10)  # replica 3 unknown yet
    assert log.high_watermark == 0
    assert p.update_follower_fetch_state(3, 2, 0, 10)
    assert log.high_watermark == 2
    assert p.update_follower_fetch_state(3, 4, 0, 11)
    assert log.high_watermark == 3
    # A slower report cannot move the HW back.
    assert not p.update_follower_fetch_state(2, 1, 0, 12)
    assert log.high_watermark == 3


def test_single_replica_isr_advances_on_append():
    p, log = leader(isr=(1,))
    log.append_as_leader("a", 2, 5)
    assert p.maybe_increment_high_watermark()
    assert log.high_watermark == 2


def test_isr_shrink_keeps_counting_removed_replica_until_committed():
    p, log = leader()
    log.append_as_leader("a", 1, 5)
    p.update_follower_fetch_state(2, 1, 0, 100)  # caught up
    p.update_follower_fetch_state(3, 0, 0, 100)  # behind, and stays behind
    assert log.high_watermark == 0
    # Replica 3 was last caught up when the term began (t=0).
    assert p.check_isr_shrink(LAG_MS, LAG_MS) is None  # exactly at the limit: in sync
    request = p.check_isr_shrink(LAG_MS + 1, LAG_MS)
    assert request is not None and request.new_isr == (1, 2)
    assert (request.leader_epoch, request.partition_epoch) == (5, 10)
    assert p.maximal_isr == {1, 2, 3}
    assert not p.maybe_increment_high_watermark()  # replica 3 still holds the HW back
    assert p.check_isr_shrink(10**9, LAG_MS) is None  # one change in flight at a time
    result = p.on_alter_partition_response(ErrorCode.NONE, 5, 11, (1, 2))
    assert result.outcome is AlterPartitionOutcome.COMMITTED and result.high_watermark_moved
    assert log.high_watermark == 1 and p.isr == {1, 2} and p.partition_epoch == 11


def test_isr_expand_requires_hw_and_epoch_start_then_counts_immediately():
    p, log = leader(isr=(1, 2), records=2)  # epoch 5 starts at offset 2
    log.append_as_leader("a", 1, 5)
    p.update_follower_fetch_state(2, 3, 0, 1)
    assert log.high_watermark == 3
    p.update_follower_fetch_state(3, 2, 0, 1)
    assert p.check_isr_expand(3) is None  # below the HW
    p.update_follower_fetch_state(3, 3, 0, 2, broker_epoch=7)
    assert p.check_isr_expand(3, ineligible_replica_ids={3}) is None  # fenced per metadata
    request = p.check_isr_expand(3)
    assert request is not None and request.new_isr == (1, 2, 3)
    # The controller can refuse a member whose broker epoch is stale (KIP-903).
    assert request.new_isr_broker_epochs == (-1, -1, 7)
    assert p.maximal_isr == {1, 2, 3}
    log.append_as_leader("b", 1, 5)
    p.update_follower_fetch_state(2, 4, 0, 3)
    assert log.high_watermark == 3  # the joining replica holds the HW back while pending
    assert p.check_enough_replicas_reach_offset(3, 3) == (True, ErrorCode.NONE)
    with pytest.raises(NotEnoughReplicasError):  # the committed ISR is still 2
        p.check_enough_replicas_for_append(3)


def test_isr_expand_refused_below_leader_epoch_start_offset():
    p, log = leader(isr=(1, 2), records=4)
    p.update_follower_fetch_state(3, 0, 0, 1)
    assert log.high_watermark == 0
    # Offset 0 >= HW 0, but the follower has not reached where epoch 5 started (4).
    assert p.check_isr_expand(3) is None


def test_alter_partition_errors():
    p, log = leader()
    p.update_follower_fetch_state(2, 0, 0, 0)
    p.update_follower_fetch_state(3, 0, 0, 0)
    log.append_as_leader("a", 1, 5)
    assert p.check_isr_shrink(LAG_MS + 1, LAG_MS) is not None
    assert (
        p.on_alter_partition_response(ErrorCode.NOT_CONTROLLER).outcome
        is AlterPartitionOutcome.RETRY
    )
    assert p.pending_alter_partition is not None
    fenced = p.on_alter_partition_response(ErrorCode.FENCED_LEADER_EPOCH)
    assert fenced.outcome is AlterPartitionOutcome.AWAIT_METADATA
    assert p.maximal_isr == {1, 2, 3}
    stale = p.on_alter_partition_response(ErrorCode.NONE, 4, 11, (1,))
    assert stale.outcome is AlterPartitionOutcome.IGNORED
    reset = p.on_alter_partition_response(ErrorCode.OPERATION_NOT_ATTEMPTED)
    assert reset.outcome is AlterPartitionOutcome.RESET and p.pending_alter_partition is None
    # New metadata with the same leader epoch replaces the ISR and keeps follower progress.
    assert p.make_leader(5, 12, (1, 2), (1, 2, 3), 0) is StateChange.UPDATED
    assert p.isr == {1, 2} and p.followers[2].log_end_offset == 0


def test_check_enough_replicas_reach_offset_cases():
    p, log = leader(isr=(1, 2))
    log.append_as_leader("a", 1, 5)
    assert p.check_enough_replicas_reach_offset(1, 2) == (False, ErrorCode.NONE)
    p.update_follower_fetch_state(2, 1, 0, 0)
    assert p.check_enough_replicas_reach_offset(1, 2) == (True, ErrorCode.NONE)
    assert p.check_enough_replicas_reach_offset(1, 3) == (
        True,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    )
    p.make_follower(2, 6, 11, (2,), (1, 2, 3))
    assert p.check_enough_replicas_reach_offset(1, 2) == (False, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    with pytest.raises(NotLeaderOrFollowerError):
        p.check_enough_replicas_for_append(1)


def test_transitions_and_stale_updates():
    p, log = leader()
    assert p.make_leader(4, 99, (1,), (1, 2, 3), 0) is StateChange.IGNORED_STALE
    assert p.make_leader(5, 9, (1,), (1, 2, 3), 0) is StateChange.IGNORED_STALE
    assert p.make_follower(2, 6, 11, (1, 2), (1, 2, 3)) is StateChange.NEW_LEADER_EPOCH
    assert p.role is Role.FOLLOWER and p.followers == {}
    assert p.make_follower(2, 6, 12, (2,), (1, 2, 3)) is StateChange.UPDATED
    assert p.make_follower(3, 7, 13, (1, 3), (1, 2, 3)) is StateChange.NEW_LEADER_EPOCH
    assert p.make_leader(8, 14, (1, 3), (1, 2, 3), 0) is StateChange.NEW_LEADER_EPOCH
    assert p.followers[2].log_end_offset == -1  # a new term forgets follower progress
    p.make_offline()
    assert p.role is Role.NONE and not p.is_leader


def test_fetch_validation_epochs_and_ranges():
    p, log = leader(records=3)  # epoch 0: offsets 0..2, epoch 5 starts at 3
    log.append_as_leader("x", 2, 5)  # offsets 3..4
    with pytest.raises(FencedLeaderEpochError):
        p.validate_fetch(2, 0, 4)
    with pytest.raises(UnknownLeaderEpochError):
        p.validate_fetch(2, 0, 6)
    with pytest.raises(NotLeaderOrFollowerError):
        p.validate_fetch(9, 0, 5)
    with pytest.raises(OffsetOutOfRangeError):
        p.validate_fetch(2, 6, 5)
    assert p.validate_fetch(2, 5, 5).diverging_epoch is None
    assert p.validate_fetch(2, 5, -1).diverging_epoch is None  # epoch not given: no check
    # Follower has epoch 0 up to offset 4 (which we never had in epoch 0): diverged at 3.
    assert p.validate_fetch(2, 4, 5, last_fetched_epoch=0).diverging_epoch == EpochEndOffset(0, 3)
    # Follower claims epoch 3 which we never had: our floor epoch 0 ends at 3.
    assert p.validate_fetch(2, 3, 5, last_fetched_epoch=3).diverging_epoch == EpochEndOffset(0, 3)
    assert p.validate_fetch(2, 3, 5, last_fetched_epoch=0).diverging_epoch is None
    log.update_high_watermark(2)
    log.maybe_increment_log_start_offset(2)
    with pytest.raises(OffsetOutOfRangeError):
        p.validate_fetch(2, 1, 5)


def test_offsets_for_leader_epoch():
    p, log = leader(records=3)
    log.append_as_leader("x", 2, 5)
    assert p.offsets_for_leader_epoch(5, 0) == EpochEndOffset(0, 3)
    assert p.offsets_for_leader_epoch(5, 5) == EpochEndOffset(5, 5)
    assert p.offsets_for_leader_epoch(-1, 2) == EpochEndOffset(0, 3)
    assert p.offsets_for_leader_epoch(5, 7) == EpochEndOffset(-1, -1)
    with pytest.raises(FencedLeaderEpochError):
        p.offsets_for_leader_epoch(4, 0)


def test_lagging_follower_keeps_caught_up_time_when_it_reaches_previous_leader_end():
    p, log = leader(isr=(1, 2), replicas=(1, 2))
    log.append_as_leader("a", 1, 5)
    p.update_follower_fetch_state(2, 0, 0, 1_000)  # leader end was 1
    log.append_as_leader("b", 1, 5)
    p.update_follower_fetch_state(2, 1, 0, 2_000)  # reached the previous leader end (1)
    assert p.followers[2].last_caught_up_time_ms == 1_000
    assert p.check_isr_shrink(1_000 + LAG_MS, LAG_MS) is None
    assert p.check_isr_shrink(1_001 + LAG_MS, LAG_MS) is not None


def test_metadata_already_applied_does_not_drop_a_newer_proposal():
    """Found by the simulation: the leader learns partition_epoch 11 from the AlterPartition
    answer, proposes the next change, then metadata for epoch 11 arrives. Re-applying it must not
    clear the new proposal (the controller may commit it), or the HW would ignore a replica the
    controller counts as in sync."""
    p, log = leader(isr=(1, 2))
    p.update_follower_fetch_state(2, 0, 0, 0)
    p.update_follower_fetch_state(3, 0, 0, 0)
    assert p.check_isr_expand(3) is not None
    assert p.on_alter_partition_response(ErrorCode.NONE, 5, 11, (1, 2, 3)).outcome is (
        AlterPartitionOutcome.COMMITTED
    )
    log.append_as_leader("a", 1, 5)
    shrink = p.check_isr_shrink(LAG_MS + 1, LAG_MS)
    assert shrink is not None and shrink.partition_epoch == 11
    assert p.make_leader(5, 11, (1, 2, 3), (1, 2, 3), 0) is StateChange.IGNORED_STALE
    assert p.pending_alter_partition == shrink
    assert p.make_follower(2, 5, 11, (1, 2, 3), (1, 2, 3)) is StateChange.NEW_LEADER_EPOCH
