"""Partition reassignment decisions (quorum/reassignment.py) on a replayed image: start, the
AlterPartition that completes it, cancel, replace, errors."""

from __future__ import annotations

from quorum_core_harness import Cluster

from log.common.errors import ErrorCode
from quorum.controller import AlterPartitionRequest, alter_partition, election_policy
from quorum.partition_change import ElectionPolicy
from quorum.reassignment import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
    alter_partition_reassignments,
)


def _reassign(cluster: Cluster, replicas, partition: int = 0, topic: str = "t"):
    image = cluster.image
    records, response = alter_partition_reassignments(
        image,
        AlterPartitionReassignmentsRequest(
            (ReassignableTopic(topic, (ReassignablePartition(partition, replicas),)),)
        ),
        lambda name: election_policy(image, name, ElectionPolicy()),
    )
    [result] = response.topics[0].partitions
    if records:
        cluster.commit(records)
    return result.error_code


def _expand_isr(cluster: Cluster, epochs, topic_id, isr):
    state = cluster.image.partition(topic_id, 0)
    request = AlterPartitionRequest(state.leader, epochs[state.leader], topic_id, 0,
                                    state.leader_epoch, state.partition_epoch, isr)  # fmt: skip
    records, response = alter_partition(cluster.image, request)
    assert response.error_code == ErrorCode.NONE, response
    cluster.commit(records)
    return response


def _setup(brokers: int = 4):
    cluster = Cluster()
    epochs = {b: cluster.add_broker(b) for b in range(brokers)}
    topic_id = cluster.create_topic("t", 1, 2)  # replicas (0, 1), leader 0
    return cluster, epochs, topic_id


def test_a_move_completes_when_the_new_replicas_are_in_sync_and_the_leader_hands_over():
    cluster, epochs, topic_id = _setup()
    assert _reassign(cluster, (2, 3)) == ErrorCode.NONE
    state = cluster.image.partition(topic_id, 0)
    assert state.replicas == (2, 3, 0, 1)
    assert (state.adding_replicas, state.removing_replicas) == ((2, 3), (0, 1))
    assert (state.leader, state.isr, state.leader_epoch) == (0, (0, 1), 0)
    # broker 2 catches up first: not complete until every target replica is in sync
    _expand_isr(cluster, epochs, topic_id, (0, 1, 2))
    assert cluster.image.partition(topic_id, 0).is_reassigning
    response = _expand_isr(cluster, epochs, topic_id, (0, 1, 2, 3))
    done = cluster.image.partition(topic_id, 0)
    assert (done.replicas, done.isr, done.adding_replicas, done.removing_replicas) == (
        (2, 3), (2, 3), (), ()
    )  # fmt: skip
    assert done.leader == 2 and done.leader_epoch == state.leader_epoch + 1
    assert done.partition_epoch == state.partition_epoch + 2  # two changes, one epoch each
    # the old leader's answer carries the new leader epoch: it ignores it and learns from
    # the metadata that it no longer leads
    assert (response.leader, response.leader_epoch) == (2, 1)


def test_growing_the_replication_factor_keeps_the_leader():
    cluster, epochs, topic_id = _setup()
    assert _reassign(cluster, (0, 1, 2)) == ErrorCode.NONE
    state = cluster.image.partition(topic_id, 0)
    assert (state.replicas, state.adding_replicas, state.removing_replicas) == ((0, 1, 2), (2,), ())
    _expand_isr(cluster, epochs, topic_id, (0, 1, 2))
    done = cluster.image.partition(topic_id, 0)
    assert (done.replicas, done.isr, done.leader, done.is_reassigning) == (
        (0, 1, 2), (0, 1, 2), 0, False
    )  # fmt: skip


def test_shrinking_to_in_sync_replicas_completes_at_once():
    cluster, _, topic_id = _setup()
    before = cluster.image.partition(topic_id, 0)
    assert _reassign(cluster, (1,)) == ErrorCode.NONE
    state = cluster.image.partition(topic_id, 0)
    assert (state.replicas, state.isr, state.leader, state.is_reassigning) == ((1,), (1,), 1, False)
    assert state.partition_epoch == before.partition_epoch + 1
    assert state.leader_epoch == before.leader_epoch + 1


def test_cancel_and_replace():
    cluster, epochs, topic_id = _setup()
    assert _reassign(cluster, None) == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    assert _reassign(cluster, (2, 3)) == ErrorCode.NONE
    _expand_isr(cluster, epochs, topic_id, (0, 1, 2))
    # a new target is computed from the original replicas; 2 leaves, 3 stays added
    assert _reassign(cluster, (0, 3)) == ErrorCode.NONE
    state = cluster.image.partition(topic_id, 0)
    assert (state.replicas, state.adding_replicas, state.removing_replicas, state.isr) == (
        (0, 3, 1), (3,), (1,), (0, 1)
    )  # fmt: skip
    assert _reassign(cluster, None) == ErrorCode.NONE
    state = cluster.image.partition(topic_id, 0)
    assert (state.replicas, state.isr, state.leader, state.is_reassigning) == (
        (0, 1), (0, 1), 0, False
    )  # fmt: skip
    # the same replicas again: nothing to do, nothing written
    offset = cluster.offset
    assert _reassign(cluster, (0, 1)) == ErrorCode.NONE and cluster.offset == offset


def test_bad_targets():
    cluster, _, _ = _setup()
    assert _reassign(cluster, ()) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert _reassign(cluster, (2, 2)) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert _reassign(cluster, (2, 9)) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert _reassign(cluster, (2,), partition=3) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _reassign(cluster, (2,), topic="nope") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_the_image_round_trips_an_ongoing_reassignment_through_a_checkpoint():
    from quorum.state_machine import MetadataStateMachine

    cluster, _, topic_id = _setup()
    _reassign(cluster, (2, 3))
    copy = MetadataStateMachine.from_checkpoint(cluster.sm.to_checkpoint())
    assert copy.image.partition(topic_id, 0) == cluster.image.partition(topic_id, 0)
