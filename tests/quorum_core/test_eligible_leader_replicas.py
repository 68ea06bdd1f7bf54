"""KIP-966 in the controller: eligible leader replicas, unclean restarts, unclean elections.

The scene of issue 14: RF 3, min.insync.replicas 2, the ISR shrinks to one broker, and that
broker restarts after a power failure without its unflushed tail. It must not lead while a
replica that holds every acknowledged record (an ELR member) exists.
"""

import uuid

from quorum_core_harness import Cluster, check_image_invariants

from quorum.controller import (
    AlterConfigsRequest,
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    alter_partition,
    alter_topic_configs,
    fence_expired_brokers,
    heartbeat,
    register_broker,
)
from quorum.image import replay_checkpoint_records
from quorum.partition_change import ElectionPolicy, partition_change
from quorum.records import CONFIG_RESOURCE_BROKER, ConfigRecord


def _cluster(min_isr: int = 2) -> tuple[Cluster, uuid.UUID, list[int]]:
    cluster = Cluster()
    epochs = [cluster.add_broker(b) for b in range(3)]
    topic_id = cluster.create_topic("t", 1, 3)  # replicas (0, 1, 2), leader 0
    records, response = alter_topic_configs(
        cluster.image, AlterConfigsRequest("t", {"min.insync.replicas": str(min_isr)})
    )
    cluster.commit(records)
    return cluster, topic_id, epochs


def _state(cluster: Cluster, topic_id: uuid.UUID):
    check_image_invariants(cluster.image)
    return cluster.image.partition(topic_id, 0)


def _shrink(cluster: Cluster, topic_id: uuid.UUID, epochs: list[int], new_isr: tuple[int, ...]):
    state = _state(cluster, topic_id)
    request = AlterPartitionRequest(
        state.leader,
        epochs[state.leader],
        topic_id,
        0,
        state.leader_epoch,
        state.partition_epoch,
        new_isr,
    )
    records, response = alter_partition(cluster.image, request)
    assert response.error_code == 0, response
    cluster.commit(records)
    return _state(cluster, topic_id)


def _fence(cluster: Cluster, *broker_ids: int) -> None:
    live = cluster.image.live_broker_ids()
    contact = {b: (0 if b in broker_ids else 1000) for b in live}
    records, fenced = fence_expired_brokers(cluster.image, contact, 1000, 500)
    assert sorted(fenced) == sorted(broker_ids)
    cluster.commit(records)


def _restart(cluster: Cluster, broker_id: int, *, clean: bool, wiped: bool = False) -> int:
    """A new incarnation registers (clean: naming its old epoch) and heartbeats until unfenced."""
    old_epoch = cluster.image.brokers[broker_id].broker_epoch
    request = BrokerRegistrationRequest(
        broker_id,
        uuid.uuid4(),
        (),
        previous_broker_epoch=old_epoch if clean else -1,
        log_dir_empty=wiped,
    )
    records, response = register_broker(cluster.image, request)
    cluster.commit(records)
    check_image_invariants(cluster.image)
    records, hb = heartbeat(
        cluster.image, BrokerHeartbeatRequest(broker_id, response.broker_epoch, cluster.offset)
    )
    assert not hb.is_fenced
    cluster.commit(records)
    return response.broker_epoch


def _to_sole_isr_member(cluster, topic_id, epochs):
    """ISR (0, 1, 2) -> (0, 1) -> (0): broker 1 left below min.insync.replicas 2."""
    state = _shrink(cluster, topic_id, epochs, (0, 1))
    assert state.elr == ()  # still at min.insync.replicas
    state = _shrink(cluster, topic_id, epochs, (0,))
    assert (state.isr, state.elr) == ((0,), (1,))
    return state


def test_isr_shrinking_below_min_isr_keeps_the_removed_members_as_elr():
    cluster, topic_id, epochs = _cluster()
    state = _to_sole_isr_member(cluster, topic_id, epochs)
    assert state.leader == 0
    # Back at min.insync.replicas: the ELR is cleared.
    state = _shrink(cluster, topic_id, epochs, (0, 2))
    assert (state.isr, state.elr, state.last_known_elr) == ((0, 2), (), ())


def test_min_isr_1_keeps_no_elr_while_the_isr_has_a_member():
    cluster, topic_id, epochs = _cluster(min_isr=1)
    state = _shrink(cluster, topic_id, epochs, (0,))
    assert state.elr == ()


def test_fenced_sole_isr_leader_hands_over_to_a_live_elr_member():
    cluster, topic_id, epochs = _cluster()
    _to_sole_isr_member(cluster, topic_id, epochs)
    _fence(cluster, 0)
    state = _state(cluster, topic_id)
    assert (state.leader, state.isr, state.elr) == (1, (1,), (0,))
    assert state.leader_epoch == 1


def test_unclean_restart_of_the_sole_isr_member_does_not_lead_while_an_elr_member_exists():
    cluster, topic_id, epochs = _cluster()
    _to_sole_isr_member(cluster, topic_id, epochs)
    _fence(cluster, 1)  # the ELR member is away (partitioned, say)...
    _fence(cluster, 0)  # ...when the last ISR member loses power
    state = _state(cluster, topic_id)
    assert (state.leader, state.isr, state.elr, state.last_known_elr) == (-1, (), (0, 1), (0,))
    _restart(cluster, 0, clean=False)
    state = _state(cluster, topic_id)
    assert (state.leader, state.isr, state.elr) == (-1, (), (1,))
    # The ELR member returns (without restarting, or after a clean shutdown): it leads.
    _restart(cluster, 1, clean=True)
    state = _state(cluster, topic_id)
    assert (state.leader, state.isr, state.elr, state.last_known_elr) == (1, (1,), (), ())


def test_clean_restart_of_the_sole_isr_member_leads_again():
    cluster, topic_id, epochs = _cluster()
    _to_sole_isr_member(cluster, topic_id, epochs)
    _fence(cluster, 1)
    _fence(cluster, 0)
    _restart(cluster, 0, clean=True)
    state = _state(cluster, topic_id)
    assert (state.leader, state.isr, state.elr) == (0, (0,), (1,))


def test_an_elr_member_that_restarts_uncleanly_leaves_the_elr():
    cluster, topic_id, epochs = _cluster()
    _to_sole_isr_member(cluster, topic_id, epochs)
    _fence(cluster, 1)
    _restart(cluster, 1, clean=False)
    state = _state(cluster, topic_id)
    assert (state.leader, state.isr, state.elr) == (0, (0,), ())


def test_unclean_restart_of_a_live_leader_moves_leadership_to_the_isr():
    """The old incarnation was never fenced (it restarted within the session)."""
    cluster, topic_id, epochs = _cluster()
    _restart(cluster, 0, clean=False)
    state = _state(cluster, topic_id)
    assert state.leader in (1, 2) and 0 not in state.isr and state.elr == ()


def test_with_no_isr_nor_elr_left_the_last_known_leader_recovers():
    """Balanced recovery: every ELR member restarted uncleanly too, so the last leader holds
    as much as anyone; a lone broker killed with -9 comes back as its partitions' leader."""
    cluster, topic_id, epochs = _cluster()
    _to_sole_isr_member(cluster, topic_id, epochs)
    _fence(cluster, 1)
    _fence(cluster, 0)
    _restart(cluster, 1, clean=False)
    state = _state(cluster, topic_id)
    assert (state.leader, state.elr, state.last_known_elr) == (-1, (0,), (0,))
    _restart(cluster, 0, clean=False)
    state = _state(cluster, topic_id)
    assert (state.leader, state.isr, state.elr, state.last_known_elr) == (0, (0,), (), ())


def test_a_wiped_last_leader_never_leads_without_unclean_election():
    cluster, topic_id, epochs = _cluster(min_isr=1)
    state = _shrink(cluster, topic_id, epochs, (0,))
    _fence(cluster, 0)
    assert _state(cluster, topic_id).last_known_elr == (0,)
    _restart(cluster, 0, clean=False, wiped=True)
    state = _state(cluster, topic_id)
    assert (state.leader, state.isr, state.elr, state.last_known_elr) == (-1, (), (), ())
    # Only enabling unclean.leader.election.enable elects (any live replica, as in Kafka: the
    # operator accepts losing what the others lack).
    records, response = alter_topic_configs(
        cluster.image, AlterConfigsRequest("t", {"unclean.leader.election.enable": "true"})
    )
    assert response.error_code == 0
    cluster.commit(records)
    state = _state(cluster, topic_id)
    assert (state.leader, state.isr, state.elr) == (0, (0,), ())
    assert state.leader_epoch == 2


def test_unclean_election_is_off_by_default_and_per_topic_or_cluster():
    def leaderless(unclean_topic: str | None, unclean_cluster: str | None, node: bool):
        cluster, topic_id, epochs = _cluster(min_isr=1)
        _shrink(cluster, topic_id, epochs, (0,))
        if unclean_topic:
            records, _ = alter_topic_configs(
                cluster.image,
                AlterConfigsRequest("t", {"unclean.leader.election.enable": unclean_topic}),
            )
            cluster.commit(records)
        if unclean_cluster:
            key = "unclean.leader.election.enable"
            cluster.commit([ConfigRecord(CONFIG_RESOURCE_BROKER, "", key, unclean_cluster)])
        contact = {0: 0, 1: 1000, 2: 1000}
        records, _ = fence_expired_brokers(
            cluster.image,
            contact,
            1000,
            500,
            ElectionPolicy(1, unclean_leader_election_enable=node),
        )
        cluster.commit(records)
        return _state(cluster, topic_id).leader

    assert leaderless(None, None, node=False) == -1
    assert leaderless(None, None, node=True) == 1
    assert leaderless(None, "true", node=False) == 1
    assert leaderless("false", "true", node=True) == -1
    assert leaderless("true", None, node=False) == 1


def test_elr_survives_a_checkpoint():
    cluster, topic_id, epochs = _cluster()
    _to_sole_isr_member(cluster, topic_id, epochs)
    _fence(cluster, 1)
    _fence(cluster, 0)
    image = cluster.image
    rebuilt = replay_checkpoint_records(image.to_records(), image.last_offset)
    assert rebuilt.partition(topic_id, 0) == image.partition(topic_id, 0)
    assert rebuilt.partition(topic_id, 0).elr == (0, 1)


def test_partition_change_is_a_no_op_when_nothing_changes():
    cluster, topic_id, epochs = _cluster()
    state = _state(cluster, topic_id)
    assert partition_change(state, state.isr, lambda r: True, ElectionPolicy(2)) is state


def test_an_empty_log_dir_travels_as_kafkas_lost_directory_id():
    from log.protocol import controller_extra
    from log.protocol.controller import BROKER_REGISTRATION_REQUEST
    from quorum.controller import LOST_DIRECTORY_ID

    body = BROKER_REGISTRATION_REQUEST.cls(
        broker_id=1,
        cluster_id="c",
        incarnation_id=uuid.uuid4(),
        listeners=[],
        features=[],
        rack=None,
        previous_broker_epoch=-1,
        log_dirs=[LOST_DIRECTORY_ID],
    )
    frame = controller_extra.encode_request_frame(62, 1, "t", body)
    _, _, decoded = controller_extra.decode_request_frame(frame[4:])
    assert list(decoded.log_dirs) == [LOST_DIRECTORY_ID] and decoded.previous_broker_epoch == -1
