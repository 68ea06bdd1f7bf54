import pytest

from log.common.errors import ErrorCode
from log.replication.partition_state import PartitionState
from log.replication.purgatory import (
    DelayedFetch,
    DelayedOperationPurgatory,
    DelayedProduce,
    FetchPartitionStatus,
    ProducePartitionStatus,
    PurgatoryFullError,
)
from tests.replication_core.memory_log import MemoryLog

TP = ("t", 0)
TP1 = ("t", 1)


def leader_partition(isr=(1, 2)) -> tuple[PartitionState, MemoryLog]:
    log = MemoryLog()
    p = PartitionState(1, log)
    p.make_leader(1, 1, isr, (1, 2, 3), 0)
    return p, log


def produce(partitions: dict, required_offset: int, min_isr: int, deadline_ms: int = 100):
    status = {tp: ProducePartitionStatus(required_offset, min_isr) for tp in partitions}
    return DelayedProduce(deadline_ms, status, partitions.get)


def test_delayed_produce_case_c_completes_when_hw_reaches_required_offset():
    p, log = leader_partition()
    log.append_as_leader("a", 1, 1)
    purgatory: DelayedOperationPurgatory[DelayedProduce] = DelayedOperationPurgatory("produce")
    op = produce({TP: p}, 1, 2)
    assert not purgatory.try_complete_else_watch(op)
    assert purgatory.check_and_complete(TP) == [] and len(purgatory) == 1
    assert p.update_follower_fetch_state(2, 1, 0, 5)
    assert purgatory.check_and_complete(TP) == [op]
    assert op.completed and not op.expired
    assert op.produce_status[TP].error is ErrorCode.NONE
    assert len(purgatory) == 0 and purgatory.next_deadline_ms() is None


def test_delayed_produce_not_enough_replicas_after_append():
    p, log = leader_partition(isr=(1,))
    log.append_as_leader("a", 1, 1)
    p.maybe_increment_high_watermark()
    op = produce({TP: p}, 1, 2)
    assert DelayedOperationPurgatory("produce").try_complete_else_watch(op)
    assert op.produce_status[TP].error is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_delayed_produce_cases_a_and_b_and_expiry():
    p, log = leader_partition()
    log.append_as_leader("a", 1, 1)
    partitions = {TP: p, TP1: None}
    purgatory: DelayedOperationPurgatory[DelayedProduce] = DelayedOperationPurgatory("produce")
    op = produce(partitions, 1, 2, deadline_ms=50)
    partitions[TP1] = PartitionState(1, MemoryLog())  # hosted, but never led: case B
    assert not purgatory.try_complete_else_watch(op)
    assert op.produce_status[TP1].error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert purgatory.next_deadline_ms() == 50
    assert purgatory.expire(49) == []
    assert purgatory.expire(50) == [op]
    assert op.expired and op.produce_status[TP].error is ErrorCode.REQUEST_TIMED_OUT
    assert purgatory.check_and_complete(TP) == []  # completed exactly once

    op2 = produce({TP: p}, 1, 2)
    purgatory.try_complete_else_watch(op2)
    p.make_follower(2, 2, 2, (2,), (1, 2, 3))  # leadership moved away
    assert purgatory.check_and_complete(TP) == [op2]
    assert op2.produce_status[TP].error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    op3 = produce({TP: None}, 1, 2)  # case A: partition gone
    assert purgatory.try_complete_else_watch(op3)
    assert op3.produce_status[TP].error is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_purgatory_bound_refuses_new_operations_with_retriable_error():
    p, log = leader_partition()
    log.append_as_leader("a", 1, 1)
    purgatory: DelayedOperationPurgatory[DelayedProduce] = DelayedOperationPurgatory(
        "produce", max_operations=2
    )
    ops = [produce({TP: p}, 1, 2, deadline_ms=10 + i) for i in range(3)]
    assert not purgatory.try_complete_else_watch(ops[0])
    assert not purgatory.try_complete_else_watch(ops[1])
    with pytest.raises(PurgatoryFullError) as raised:
        purgatory.try_complete_else_watch(ops[2])
    assert raised.value.retriable
    assert purgatory.expire(10) == [ops[0]]
    assert not purgatory.try_complete_else_watch(ops[2])
    assert purgatory.next_deadline_ms() == 11


def test_delayed_fetch_min_bytes_leader_change_and_truncation():
    p, log = leader_partition()
    readable = {"bytes": 0}

    def readable_bytes(tp, fetch_offset):
        return readable["bytes"] if fetch_offset <= log.log_end_offset else None

    purgatory: DelayedOperationPurgatory[DelayedFetch] = DelayedOperationPurgatory("fetch")
    status = {TP: FetchPartitionStatus(0, current_leader_epoch=1)}
    op = DelayedFetch(
        500, status, min_bytes=100, partition_for={TP: p}.get, readable_bytes=readable_bytes
    )
    assert not purgatory.try_complete_else_watch(op)
    readable["bytes"] = 99
    assert purgatory.check_and_complete(TP) == []
    readable["bytes"] = 100
    assert purgatory.check_and_complete(TP) == [op] and op.accumulated_bytes == 100

    beyond = DelayedFetch(
        500, {TP: FetchPartitionStatus(5, 1)}, 1, {TP: p}.get, readable_bytes=readable_bytes
    )
    assert purgatory.try_complete_else_watch(beyond)  # fetch offset past the log end

    stale = DelayedFetch(500, {TP: FetchPartitionStatus(0, 0)}, 1, {TP: p}.get, readable_bytes)
    assert purgatory.try_complete_else_watch(stale)  # the requester's leader epoch is old

    readable["bytes"] = 0
    waiting = DelayedFetch(500, status, 1, {TP: p}.get, readable_bytes)
    assert not purgatory.try_complete_else_watch(waiting)
    p.make_follower(2, 2, 2, (2,), (1, 2, 3))
    assert purgatory.check_and_complete(TP) == [waiting]
