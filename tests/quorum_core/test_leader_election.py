"""ElectLeaders and leader balancing (quorum/leader_election.py) on a replayed image."""

from __future__ import annotations

from quorum_core_harness import Cluster

from log.common.errors import ErrorCode
from quorum.controller import (
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    alter_partition,
    election_policy,
    fence_expired_brokers,
    heartbeat,
)
from quorum.leader_election import (
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersTopic,
    balance_leaders,
    elect_leaders,
    imbalanced_partition_count,
)
from quorum.partition_change import ElectionPolicy

PREFERRED, UNCLEAN = ElectionType.PREFERRED, ElectionType.UNCLEAN


def _elect(cluster: Cluster, election_type: int, topics) -> tuple[list, dict]:
    image = cluster.image
    records, response = elect_leaders(
        image,
        ElectLeadersRequest(election_type, topics),
        lambda name: election_policy(image, name, ElectionPolicy()),
    )
    assert response.error_code == ErrorCode.NONE
    results = {(t.topic, r.partition): r.error_code for t in response.results for r in t.partitions}
    return records, results


def _fence(cluster: Cluster, broker_id: int) -> None:
    heartbeats = {b: 10_000 for b in cluster.image.brokers}
    heartbeats[broker_id] = 0
    records, fenced = fence_expired_brokers(cluster.image, heartbeats, 10_000, 500)
    assert fenced == [broker_id]
    cluster.commit(records)


def _unfence(cluster: Cluster, broker_id: int, epoch: int) -> None:
    records, hb = heartbeat(cluster.image, BrokerHeartbeatRequest(broker_id, epoch, cluster.offset))
    assert not hb.is_fenced
    cluster.commit(records)


def test_preferred_election_waits_for_the_preferred_replica_to_be_live_and_in_sync():
    cluster = Cluster()
    epochs = [cluster.add_broker(b) for b in range(3)]
    topic_id = cluster.create_topic("t", 1, 3)  # replicas (0, 1, 2), leader 0
    one = (ElectLeadersTopic("t", (0,)),)
    assert _elect(cluster, PREFERRED, one) == ([], {("t", 0): ErrorCode.ELECTION_NOT_NEEDED})

    _fence(cluster, 0)
    moved = cluster.image.partition(topic_id, 0)
    assert (moved.leader, moved.isr) == (1, (1, 2))
    assert imbalanced_partition_count(cluster.image) == 1
    # fenced, then live but not yet back in the ISR: no election possible
    assert _elect(cluster, PREFERRED, one)[1] == {
        ("t", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    }
    _unfence(cluster, 0, epochs[0])
    assert _elect(cluster, PREFERRED, one)[1] == {
        ("t", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    }
    assert balance_leaders(cluster.image) == []

    # the leader takes broker 0 back into the ISR once it caught up
    request = AlterPartitionRequest(1, epochs[1], topic_id, 0, moved.leader_epoch,
                                    moved.partition_epoch, (1, 2, 0))  # fmt: skip
    cluster.commit(alter_partition(cluster.image, request)[0])
    records, results = _elect(cluster, PREFERRED, one)
    assert results == {("t", 0): ErrorCode.NONE} and len(records) == 1
    cluster.commit(records)
    after = cluster.image.partition(topic_id, 0)
    assert (after.leader, after.isr) == (0, (1, 2, 0))
    assert after.leader_epoch == moved.leader_epoch + 1
    assert after.partition_epoch == moved.partition_epoch + 2  # the ISR expansion, the election
    assert imbalanced_partition_count(cluster.image) == 0


def test_electing_every_partition_lists_only_those_that_needed_an_election():
    cluster = Cluster()
    epochs = [cluster.add_broker(b) for b in range(2)]
    topic_id = cluster.create_topic("t", 4, 2)  # preferred leaders 0, 1, 0, 1
    _fence(cluster, 0)
    _unfence(cluster, 0, epochs[0])
    for p in (0, 2):
        state = cluster.image.partition(topic_id, p)
        assert state.leader == 1
        request = AlterPartitionRequest(1, epochs[1], topic_id, p, state.leader_epoch,
                                        state.partition_epoch, (1, 0))  # fmt: skip
        cluster.commit(alter_partition(cluster.image, request)[0])
    records, results = _elect(cluster, PREFERRED, None)
    assert results == {("t", 0): ErrorCode.NONE, ("t", 2): ErrorCode.NONE}
    cluster.commit(records)
    assert [cluster.image.partition(topic_id, p).leader for p in range(4)] == [0, 1, 0, 1]
    assert _elect(cluster, PREFERRED, None) == ([], {})


def test_unknown_partitions_and_election_types():
    cluster = Cluster()
    cluster.add_broker(0)
    cluster.create_topic("t", 1, 1)
    asked = (ElectLeadersTopic("t", (0, 5)), ElectLeadersTopic("nope", (0,)))
    assert _elect(cluster, PREFERRED, asked)[1] == {
        ("t", 0): ErrorCode.ELECTION_NOT_NEEDED,
        ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    records, response = elect_leaders(
        cluster.image, ElectLeadersRequest(7, None), lambda name: ElectionPolicy()
    )
    assert records == [] and response.error_code == ErrorCode.INVALID_REQUEST


def test_unclean_election_on_request_elects_a_live_out_of_sync_replica():
    cluster = Cluster()
    epochs = [cluster.add_broker(b) for b in range(2)]
    topic_id = cluster.create_topic("t", 1, 2)  # replicas (0, 1)
    one = (ElectLeadersTopic("t", (0,)),)
    assert _elect(cluster, UNCLEAN, one)[1] == {("t", 0): ErrorCode.ELECTION_NOT_NEEDED}
    _fence(cluster, 1)
    _fence(cluster, 0)  # the last ISR member goes: leaderless, 0 kept as an eligible leader
    _unfence(cluster, 1, epochs[1])
    state = cluster.image.partition(topic_id, 0)
    assert (state.leader, state.isr, state.elr) == (-1, (), (0,))
    # a preferred election cannot help; without unclean.leader.election.enable only an
    # operator's unclean election elects broker 1
    assert _elect(cluster, PREFERRED, one)[1] == {
        ("t", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    }
    records, results = _elect(cluster, UNCLEAN, one)
    assert results == {("t", 0): ErrorCode.NONE}
    cluster.commit(records)
    state = cluster.image.partition(topic_id, 0)
    assert (state.leader, state.isr, state.elr) == (1, (1,), ())


def test_unclean_election_with_no_live_replica_is_not_possible():
    cluster = Cluster()
    cluster.add_broker(0)
    cluster.add_broker(1)
    cluster.create_topic("t", 1, 1, start_index=1)  # replicas (1,)
    _fence(cluster, 1)
    one = (ElectLeadersTopic("t", (0,)),)
    assert _elect(cluster, UNCLEAN, one) == (
        [],
        {("t", 0): ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE},
    )


def test_balancing_elects_at_most_the_limit_per_batch():
    cluster = Cluster()
    epochs = [cluster.add_broker(b) for b in range(2)]
    topic_id = cluster.create_topic("t", 6, 2)
    _fence(cluster, 0)
    _unfence(cluster, 0, epochs[0])
    for p in (0, 2, 4):
        state = cluster.image.partition(topic_id, p)
        request = AlterPartitionRequest(1, epochs[1], topic_id, p, state.leader_epoch,
                                        state.partition_epoch, (1, 0))  # fmt: skip
        cluster.commit(alter_partition(cluster.image, request)[0])
    assert imbalanced_partition_count(cluster.image) == 3
    first = balance_leaders(cluster.image, limit=2)
    assert [r.partition for r in first] == [0, 2]
    cluster.commit(first)
    rest = balance_leaders(cluster.image, limit=2)
    assert [r.partition for r in rest] == [4]
    cluster.commit(rest)
    assert balance_leaders(cluster.image) == [] and imbalanced_partition_count(cluster.image) == 0
