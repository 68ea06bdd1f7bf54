import uuid

import pytest
from quorum_core_harness import Cluster

from log.common.errors import ErrorCode
from quorum.broker_heartbeats import BrokerHeartbeatTracker
from quorum.controller import (
    MAX_ALTER_PARTITION_ITEMS,
    PRODUCER_ID_BLOCK_SIZE,
    AllocateProducerIdsRequest,
    AlterConfigsRequest,
    AlterPartitionRequest,
    AlterPartitionsRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    ControlledShutdownRequest,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    UnregisterBrokerRequest,
    activate_controller,
    allocate_producer_ids,
    alter_partition,
    alter_partitions,
    alter_topic_configs,
    controlled_shutdown,
    create_partitions,
    create_topics,
    delete_topics,
    fence_expired_brokers,
    heartbeat,
    place_replicas,
    register_broker,
    unregister_broker,
)
from quorum.image import MAX_PRODUCER_ID, MAX_REMEMBERED_DELETIONS, replay_checkpoint_records
from quorum.records import (
    BrokerEndpoint,
    MetadataRecordError,
    PartitionChangeRecord,
    ProducerIdsRecord,
)


def test_broker_epoch_increases_across_re_registrations():
    cluster = Cluster()
    epochs = []
    for _ in range(4):
        request = BrokerRegistrationRequest(7, uuid.uuid4(), (BrokerEndpoint("PLAINTEXT", "h", 1),))
        records, response = register_broker(cluster.image, request)
        assert response.error_code == ErrorCode.NONE
        cluster.commit(records)
        assert cluster.image.brokers[7].broker_epoch == response.broker_epoch
        assert cluster.image.brokers[7].fenced
        epochs.append(response.broker_epoch)
    assert epochs == sorted(set(epochs))
    # A retry of the same incarnation gets the same epoch and writes nothing.
    retry = BrokerRegistrationRequest(7, cluster.image.brokers[7].incarnation_id, ())
    records, response = register_broker(cluster.image, retry)
    assert records == [] and response.broker_epoch == epochs[-1]


def test_duplicate_registration_while_the_old_session_lives_is_refused():
    cluster = Cluster()
    cluster.add_broker(1)
    request = BrokerRegistrationRequest(1, uuid.uuid4(), ())
    records, response = register_broker(cluster.image, request, previous_session_alive=True)
    assert (records, response.error_code) == ([], ErrorCode.DUPLICATE_BROKER_REGISTRATION)


def test_a_clean_shutdown_of_the_registered_epoch_ends_its_session():
    """KIP-966: the new incarnation names the old one's epoch as its clean shutdown's; a stale
    or unknown previous epoch (an unclean restart) is still refused while the session lives."""
    cluster = Cluster()
    old_epoch = cluster.add_broker(1)
    for previous, expected in ((-1, ErrorCode.DUPLICATE_BROKER_REGISTRATION),
                               (old_epoch - 1, ErrorCode.DUPLICATE_BROKER_REGISTRATION),
                               (old_epoch, ErrorCode.NONE)):  # fmt: skip
        request = BrokerRegistrationRequest(1, uuid.uuid4(), (), previous_broker_epoch=previous)
        records, response = register_broker(cluster.image, request, previous_session_alive=True)
        assert response.error_code == expected, previous
    assert response.broker_epoch > old_epoch and records


def test_a_completed_controlled_shutdown_ends_the_session_an_unclean_stop_waits_it_out():
    """Kafka's controlled shutdown: once the want_shut_down heartbeat's batch applied, the old
    session is over (has_valid_session) and a new incarnation registers at once, with no
    previous broker epoch needed; after an unclean stop the old session stays valid until
    session_timeout_ms passes without a heartbeat (DUPLICATE_BROKER_REGISTRATION until then)."""
    cluster = Cluster()
    epochs = {b: cluster.add_broker(b) for b in (1, 2)}
    cluster.create_topic("t", 4, 2)
    tracker = BrokerHeartbeatTracker(session_timeout_ms=100)
    tracker.on_activate(cluster.image, now_ms=1000)

    def restart(broker_id: int, now_ms: int) -> ErrorCode:
        alive = tracker.has_valid_session(cluster.image, broker_id, now_ms)
        request = BrokerRegistrationRequest(broker_id, uuid.uuid4(), ())
        return register_broker(cluster.image, request, previous_session_alive=alive)[1].error_code

    # Broker 1 is stopped with SIGTERM: a controlled shutdown, then a restart 1 ms later.
    shut_down = BrokerHeartbeatRequest(1, epochs[1], cluster.offset, want_shut_down=True)
    records, response = heartbeat(cluster.image, shut_down)
    assert response.should_shut_down and response.error_code == ErrorCode.NONE
    cluster.commit(records)
    tracker.touch(1, 1010)
    assert not tracker.has_valid_session(cluster.image, 1, 1011)
    assert restart(1, 1011) == ErrorCode.NONE
    # Broker 2 is killed right after a heartbeat at 1010: refused for the whole session.
    tracker.touch(2, 1010)
    for now_ms in (1011, 1110):
        assert restart(2, now_ms) == ErrorCode.DUPLICATE_BROKER_REGISTRATION, now_ms
    assert restart(2, 1111) == ErrorCode.NONE
    assert tracker.has_valid_session(cluster.image, 2, 1110)
    assert not tracker.has_valid_session(cluster.image, 3, 1010)  # never registered


def test_re_registration_of_a_live_broker_moves_its_leaderships_in_the_same_batch():
    cluster = Cluster()
    for b in range(3):
        cluster.add_broker(b)
    topic_id = cluster.create_topic("t", 3, 3)
    records, _ = register_broker(cluster.image, BrokerRegistrationRequest(0, uuid.uuid4(), ()))
    cluster.commit(records)  # accepted: the invariant holds after the batch
    for state in cluster.image.topics[topic_id].partitions.values():
        assert 0 not in state.isr and state.leader != 0


def test_unfence_only_once_caught_up_to_the_registration():
    cluster = Cluster()
    request = BrokerRegistrationRequest(3, uuid.uuid4(), ())
    records, response = register_broker(cluster.image, request)
    cluster.commit(records)
    behind = BrokerHeartbeatRequest(3, response.broker_epoch, cluster.offset - 1)
    records, hb = heartbeat(cluster.image, behind)
    assert records == [] and hb.is_fenced and not hb.is_caught_up
    records, hb = heartbeat(cluster.image, BrokerHeartbeatRequest(3, response.broker_epoch - 1, 99))
    assert hb.error_code == ErrorCode.STALE_BROKER_EPOCH
    records, hb = heartbeat(cluster.image, BrokerHeartbeatRequest(4, 0, 99))
    assert hb.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED
    records, hb = heartbeat(cluster.image, BrokerHeartbeatRequest(3, response.broker_epoch, 10**6))
    cluster.commit(records)
    assert not hb.is_fenced and not cluster.image.brokers[3].fenced


def test_fencing_moves_leadership_to_first_live_isr_member_with_epoch_bump():
    cluster = Cluster()
    for b in range(4):
        cluster.add_broker(b)
    topic_id = cluster.create_topic("t", 1, 4, start_index=1)  # replicas (1, 2, 3, 0)
    before = cluster.image.partition(topic_id, 0)
    assert before.leader == 1 and before.isr == (1, 2, 3, 0)
    heartbeats = {0: 1000, 1: 0, 2: 0, 3: 1000}  # 1 and 2 expired
    records, fenced = fence_expired_brokers(cluster.image, heartbeats, 1200, 500)
    assert fenced == [1, 2]
    cluster.commit(records)
    after = cluster.image.partition(topic_id, 0)
    assert after.leader == 3 and after.isr == (3, 0)
    assert after.leader_epoch == before.leader_epoch + 1
    assert after.partition_epoch == before.partition_epoch + 1
    assert cluster.image.brokers[1].fenced and cluster.image.brokers[2].fenced
    # Nothing more to fence: nothing is emitted.
    assert fence_expired_brokers(cluster.image, heartbeats, 1200, 500) == ([], [])


def test_follower_fenced_shrinks_isr_without_leader_epoch_bump():
    cluster = Cluster()
    for b in range(2):
        cluster.add_broker(b)
    topic_id = cluster.create_topic("t", 1, 2)  # replicas (0, 1)
    records, _ = fence_expired_brokers(cluster.image, {0: 100, 1: 0}, 100, 50)
    cluster.commit(records)
    state = cluster.image.partition(topic_id, 0)
    assert (state.leader, state.isr, state.leader_epoch, state.partition_epoch) == (0, (0,), 0, 1)


def test_no_live_isr_member_leaves_partition_leaderless_until_last_member_returns():
    cluster = Cluster()
    cluster.add_broker(0)
    epoch1 = cluster.add_broker(1)
    topic_id = cluster.create_topic("t", 1, 1, start_index=1)  # replicas (1,)
    records, _ = fence_expired_brokers(cluster.image, {0: 100, 1: 0}, 100, 50)
    cluster.commit(records)
    state = cluster.image.partition(topic_id, 0)
    # KIP-966: the ISR empties, its last member kept as an eligible leader replica.
    assert (state.leader, state.isr, state.elr, state.last_known_elr) == (-1, (), (1,), (1,))
    assert state.leader_epoch == 1
    records, hb = heartbeat(cluster.image, BrokerHeartbeatRequest(1, epoch1, cluster.offset))
    cluster.commit(records)
    state = cluster.image.partition(topic_id, 0)
    assert (state.leader, state.isr, state.leader_epoch, state.partition_epoch) == (1, (1,), 2, 2)
    assert state.elr == state.last_known_elr == ()


def test_controlled_shutdown_moves_leaderships_off_the_broker():
    cluster = Cluster()
    epochs = [cluster.add_broker(b) for b in range(3)]
    topic_id = cluster.create_topic("t", 6, 2)
    request = ControlledShutdownRequest(0, epochs[0])
    records, response = controlled_shutdown(cluster.image, request)
    assert response.error_code == ErrorCode.NONE and response.moved_partitions
    cluster.commit(records)
    for state in cluster.image.topics[topic_id].partitions.values():
        assert state.leader != 0 and 0 not in state.isr
    assert cluster.image.brokers[0].fenced
    _, response = controlled_shutdown(cluster.image, ControlledShutdownRequest(0, epochs[0] - 1))
    assert response.error_code == ErrorCode.STALE_BROKER_EPOCH


def test_heartbeat_want_shut_down_is_a_controlled_shutdown():
    cluster = Cluster()
    epochs = [cluster.add_broker(b) for b in range(2)]
    cluster.create_topic("t", 2, 2)
    records, hb = heartbeat(
        cluster.image, BrokerHeartbeatRequest(1, epochs[1], cluster.offset, want_shut_down=True)
    )
    assert hb.should_shut_down
    cluster.commit(records)
    assert cluster.image.brokers[1].fenced


def test_create_topic_placement_is_round_robin_from_start_index():
    assert place_replicas([5, 1, 3], 0, 4, 2, start_index=1) == [(3, 5), (5, 1), (1, 3), (3, 5)]
    cluster = Cluster()
    for b in range(3):
        cluster.add_broker(b)
    topic_id = cluster.create_topic("t", 6, 3, start_index=2)
    leaders = [s.leader for s in cluster.image.topics[topic_id].partitions.values()]
    assert sorted(leaders) == [0, 0, 1, 1, 2, 2]
    assert leaders[0] == 2
    for state in cluster.image.topics[topic_id].partitions.values():
        assert state.isr == state.replicas and state.leader == state.replicas[0]


@pytest.mark.parametrize(
    "topic, code",
    [
        (CreatableTopic(".", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (CreatableTopic("..", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (CreatableTopic("", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (CreatableTopic("a" * 250, 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (CreatableTopic("bad name", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (CreatableTopic("ünï", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (CreatableTopic("exists", 1, 1), ErrorCode.TOPIC_ALREADY_EXISTS),
        (CreatableTopic("exi_sts", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),  # vs "exi.sts"
        (CreatableTopic("t", 0, 1), ErrorCode.INVALID_PARTITIONS),
        (CreatableTopic("t", 1, 3), ErrorCode.INVALID_REPLICATION_FACTOR),
        (CreatableTopic("t", 1, 0), ErrorCode.INVALID_REPLICATION_FACTOR),
        (CreatableTopic("t", 1, 1, {"no.such.config": "1"}), ErrorCode.INVALID_CONFIG),
        (CreatableTopic("t", 1, 1, {"retention.ms": "soon"}), ErrorCode.INVALID_CONFIG),
        (CreatableTopic("t", 1, 1, {"cleanup.policy": "shred"}), ErrorCode.INVALID_CONFIG),
        (CreatableTopic("t", 1, 1, {"min.insync.replicas": "0"}), ErrorCode.INVALID_CONFIG),
    ],
)
def test_create_topic_validation_errors(topic, code):
    cluster = Cluster()
    cluster.add_broker(0)
    cluster.add_broker(1)
    cluster.add_broker(2, unfence=False)  # fenced brokers do not count for the RF
    cluster.create_topic("exists", 1, 1)
    cluster.create_topic("exi.sts", 1, 1)
    records, response = create_topics(
        cluster.image, CreateTopicsRequest((topic,)), start_index=0, topic_ids=[uuid.uuid4()]
    )
    assert records == []
    assert response.results[0].error_code == code


def test_create_topics_mixed_results_and_configs():
    cluster = Cluster()
    cluster.add_broker(0)
    request = CreateTopicsRequest(
        (
            CreatableTopic("ok", configs={"retention.ms": "1000", "cleanup.policy": "compact"}),
            CreatableTopic("dup"),
            CreatableTopic("dup"),
        )
    )
    ids = [uuid.uuid4() for _ in range(3)]
    records, response = create_topics(cluster.image, request, start_index=0, topic_ids=ids)
    assert [r.error_code for r in response.results] == [0, 42, 42]
    cluster.commit(records)
    assert cluster.image.topic_configs("ok") == {
        "retention.ms": "1000",
        "cleanup.policy": "compact",
    }
    # validate_only writes nothing
    request = CreateTopicsRequest((CreatableTopic("v"),), validate_only=True)
    records, response = create_topics(cluster.image, request, start_index=0, topic_ids=ids[1:])
    assert records == [] and response.results[0].error_code == ErrorCode.NONE


def test_delete_topics_and_their_configs():
    cluster = Cluster()
    cluster.add_broker(0)
    topic_id = cluster.create_topic("t", 2, 1)
    cluster.commit(
        alter_topic_configs(cluster.image, AlterConfigsRequest("t", {"segment.ms": "5"}))[0]
    )
    records, response = delete_topics(cluster.image, DeleteTopicsRequest(("t", "nope")))
    assert [r.error_code for r in response.results] == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    cluster.commit(records)
    assert topic_id not in cluster.image.topics and cluster.image.topic_configs("t") == {}
    _, response = delete_topics(cluster.image, DeleteTopicsRequest(topic_ids=(topic_id,)))
    assert response.results[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_a_retried_delete_answers_as_its_first_attempt_did():
    """A retry (the same request_id) of a deletion that was applied answers it again with no
    records, by name and by id, even when the name has been created again since (the retry
    must not delete the new topic); a fresh request gets Kafka's UNKNOWN_* answers."""
    cluster = Cluster()
    cluster.add_broker(0)
    t_id, u_id = cluster.create_topic("t", 1, 1), cluster.create_topic("u", 1, 1)
    request = DeleteTopicsRequest(("t",), (u_id,), request_id=uuid.uuid4())
    records, first = delete_topics(cluster.image, request)
    cluster.commit(records)
    assert cluster.image.deletions == {request.request_id: {"t": t_id, "u": u_id}}
    new_t = cluster.create_topic("t", 1, 1)
    records, retry = delete_topics(cluster.image, request)
    assert records == [] and retry == first
    assert [(r.name, r.topic_id, r.error_code) for r in retry.results] == [
        ("t", t_id, ErrorCode.NONE),
        ("u", u_id, ErrorCode.NONE),
    ]
    assert cluster.image.topic("t").topic_id == new_t
    fresh = DeleteTopicsRequest(("gone",), (u_id,), request_id=uuid.uuid4())
    _, response = delete_topics(cluster.image, fresh)
    assert [r.error_code for r in response.results] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
    ]


def test_deletions_are_remembered_for_the_newest_requests_and_survive_a_checkpoint():
    cluster = Cluster()
    cluster.add_broker(0)
    request_ids = []
    for _ in range(MAX_REMEMBERED_DELETIONS + 1):
        cluster.create_topic("t", 1, 1)
        request_ids.append(uuid.uuid4())
        cluster.commit(
            delete_topics(cluster.image, DeleteTopicsRequest(("t",), (), request_ids[-1]))[0]
        )
    cluster.create_topic("t", 1, 1)  # a live topic named as the remembered ones were
    image = cluster.image
    assert list(image.deletions) == request_ids[1:]  # the oldest request's forgotten
    rebuilt = replay_checkpoint_records(image.to_records(), image.last_offset)
    assert rebuilt == image and list(rebuilt.deletions) == request_ids[1:]  # in their order


def test_alter_configs_validation():
    cluster = Cluster()
    cluster.add_broker(0)
    cluster.create_topic("t", 1, 1)
    _, r = alter_topic_configs(cluster.image, AlterConfigsRequest("t", {"segment.bytes": "x"}))
    assert r.error_code == ErrorCode.INVALID_CONFIG
    _, r = alter_topic_configs(cluster.image, AlterConfigsRequest("u", {"segment.bytes": "1"}))
    assert r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    records, r = alter_topic_configs(
        cluster.image, AlterConfigsRequest("t", {"segment.bytes": "1048576"})
    )
    cluster.commit(records)
    records, r = alter_topic_configs(
        cluster.image, AlterConfigsRequest("t", {"segment.bytes": None})
    )
    cluster.commit(records)
    assert cluster.image.topic_configs("t") == {}


def test_create_partitions_increase_only():
    cluster = Cluster()
    for b in range(2):
        cluster.add_broker(b)
    topic_id = cluster.create_topic("t", 2, 2)
    request = CreatePartitionsRequest(
        (CreatePartitionsTopic("t", 5), CreatePartitionsTopic("nope", 3))
    )
    records, response = create_partitions(cluster.image, request, start_index=0)
    assert [r.error_code for r in response.results] == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    cluster.commit(records)
    assert len(cluster.image.topics[topic_id].partitions) == 5
    for count in (5, 1):
        request = CreatePartitionsRequest((CreatePartitionsTopic("t", count),))
        _, response = create_partitions(cluster.image, request, start_index=0)
        assert response.results[0].error_code == ErrorCode.INVALID_PARTITIONS


def test_a_retried_create_partitions_answers_as_its_first_attempt_did():
    """The last new partition carries the request's id: a retry of an applied increase answers
    it again with no records, even after another client raised the count further; another
    request for the count the topic has is refused, as Kafka does, with or without an id."""
    cluster = Cluster()
    cluster.add_broker(0)
    topic_id = cluster.create_topic("t", 1, 1)
    request = CreatePartitionsRequest((CreatePartitionsTopic("t", 3),), request_id=uuid.uuid4())
    records, first = create_partitions(cluster.image, request, start_index=0)
    cluster.commit(records)
    partitions = cluster.image.topics[topic_id].partitions
    assert [partitions[p].request_id for p in range(3)] == [None, None, request.request_id]
    for request_id in (uuid.uuid4(), None):
        again = CreatePartitionsRequest((CreatePartitionsTopic("t", 3),), request_id=request_id)
        _, response = create_partitions(cluster.image, again, start_index=0)
        assert response.results[0].error_code == ErrorCode.INVALID_PARTITIONS
    more = CreatePartitionsRequest((CreatePartitionsTopic("t", 4),), request_id=uuid.uuid4())
    cluster.commit(create_partitions(cluster.image, more, start_index=0)[0])
    records, retry = create_partitions(cluster.image, request, start_index=0)
    assert records == [] and retry == first
    assert first.results[0].error_code == ErrorCode.NONE
    image = cluster.image  # the ids survive a checkpoint
    assert replay_checkpoint_records(image.to_records(), image.last_offset) == image


def _isr_cluster():
    cluster = Cluster()
    epochs = [cluster.add_broker(b) for b in range(3)]
    topic_id = cluster.create_topic("t", 1, 3)  # replicas (0, 1, 2), leader 0
    return cluster, epochs, topic_id


def test_alter_partition_shrink_and_expand():
    cluster, epochs, topic_id = _isr_cluster()
    request = AlterPartitionRequest(0, epochs[0], topic_id, 0, 0, 0, (0, 1))
    records, response = alter_partition(cluster.image, request)
    assert response.error_code == ErrorCode.NONE and response.partition_epoch == 1
    cluster.commit(records)
    state = cluster.image.partition(topic_id, 0)
    assert (state.isr, state.leader_epoch, state.partition_epoch) == ((0, 1), 0, 1)
    request = AlterPartitionRequest(0, epochs[0], topic_id, 0, 0, 1, (0, 1, 2))
    cluster.commit(alter_partition(cluster.image, request)[0])
    assert cluster.image.partition(topic_id, 0).isr == (0, 1, 2)


def test_alter_partitions_decides_a_batch_and_commits_it_as_one():
    cluster = Cluster()
    epochs = [cluster.add_broker(b) for b in range(3)]
    topic_id = cluster.create_topic("t", 6, 3)
    led = [p for p in range(6) if cluster.image.partition(topic_id, p).leader == 0]
    assert len(led) >= 2
    items = [AlterPartitionRequest(0, epochs[0], topic_id, p, 0, 0, (0, 1)) for p in led]
    bad = AlterPartitionRequest(0, epochs[0], topic_id, led[1], 0, 7, (0, 1))  # stale epoch
    duplicate = items[0]
    records, response = alter_partitions(
        cluster.image, AlterPartitionsRequest((*items[:1], bad, *items[2:], duplicate))
    )
    codes = [r.error_code for r in response.items]
    assert codes == [ErrorCode.NONE, ErrorCode.INVALID_UPDATE_VERSION,
                     *[ErrorCode.NONE] * (len(items) - 2), ErrorCode.INVALID_REQUEST]  # fmt: skip
    assert len(records) == len(items) - 1
    cluster.commit(records)  # one batch, accepted on replay
    assert cluster.image.partition(topic_id, led[0]).isr == (0, 1)
    assert cluster.image.partition(topic_id, led[1]).isr == (0, 1, 2)
    oversized = AlterPartitionsRequest((items[0],) * (MAX_ALTER_PARTITION_ITEMS + 1))
    records, response = alter_partitions(cluster.image, oversized)
    assert records == [] and {r.error_code for r in response.items} == {ErrorCode.INVALID_REQUEST}


@pytest.mark.parametrize(
    "change, code",
    [
        ({"partition_epoch": 7}, ErrorCode.INVALID_UPDATE_VERSION),
        ({"leader_epoch": 3}, ErrorCode.FENCED_LEADER_EPOCH),
        ({"broker_id": 1}, ErrorCode.NOT_LEADER_OR_FOLLOWER),
        ({"broker_epoch": -5}, ErrorCode.STALE_BROKER_EPOCH),
        ({"new_isr": (1, 2)}, ErrorCode.INVALID_REQUEST),
        ({"new_isr": (0, 9)}, ErrorCode.INVALID_REQUEST),
        ({"partition": 4}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ({"topic_id": uuid.UUID(int=1)}, ErrorCode.UNKNOWN_TOPIC_ID),
    ],
)
def test_alter_partition_rejections(change, code):
    cluster, epochs, topic_id = _isr_cluster()
    fields = dict(
        broker_id=0,
        broker_epoch=epochs[0],
        topic_id=topic_id,
        partition=0,
        leader_epoch=0,
        partition_epoch=0,
        new_isr=(0, 1),
    )
    if change.get("broker_id") == 1:
        fields["broker_epoch"] = epochs[1]
    fields.update(change)
    records, response = alter_partition(cluster.image, AlterPartitionRequest(**fields))
    assert records == [] and response.error_code == code


def test_alter_partition_with_fenced_member_is_ineligible():
    cluster, epochs, topic_id = _isr_cluster()
    request = AlterPartitionRequest(0, epochs[0], topic_id, 0, 0, 0, (0, 1))
    cluster.commit(alter_partition(cluster.image, request)[0])
    cluster.commit(fence_expired_brokers(cluster.image, {0: 9, 1: 9, 2: 0}, 9, 5)[0])
    request = AlterPartitionRequest(0, epochs[0], topic_id, 0, 0, 1, (0, 1, 2))
    _, response = alter_partition(cluster.image, request)
    assert response.error_code == ErrorCode.INELIGIBLE_REPLICA


def test_two_decisions_on_the_same_image_second_is_rejected_on_replay():
    cluster, epochs, topic_id = _isr_cluster()
    image = cluster.image
    first, _ = alter_partition(
        image, AlterPartitionRequest(0, epochs[0], topic_id, 0, 0, 0, (0, 1))
    )
    second, _ = alter_partition(
        image, AlterPartitionRequest(0, epochs[0], topic_id, 0, 0, 0, (0, 2))
    )
    cluster.commit(first)
    before = cluster.image
    result = cluster.apply(second)
    assert not result.accepted and "partition_epoch" in result.reason
    assert cluster.image.topics == before.topics


def test_producer_id_blocks_never_overlap_and_increase():
    cluster = Cluster()
    epochs = {b: cluster.add_broker(b) for b in range(3)}
    blocks = []
    for i in range(20):
        b = i % 3
        records, response = allocate_producer_ids(
            cluster.image, AllocateProducerIdsRequest(b, epochs[b])
        )
        assert response.error_code == ErrorCode.NONE
        assert response.producer_id_len == PRODUCER_ID_BLOCK_SIZE
        cluster.commit(records)
        blocks.append(response.producer_id_start)
    assert blocks == [i * PRODUCER_ID_BLOCK_SIZE for i in range(20)]
    _, response = allocate_producer_ids(cluster.image, AllocateProducerIdsRequest(0, epochs[0] + 1))
    assert response.error_code == ErrorCode.STALE_BROKER_EPOCH
    _, response = allocate_producer_ids(cluster.image, AllocateProducerIdsRequest(9, 0))
    assert response.error_code == ErrorCode.STALE_BROKER_EPOCH


def test_producer_ids_record_must_strictly_increase_on_replay():
    cluster = Cluster()
    epoch = cluster.add_broker(0)
    cluster.commit([ProducerIdsRecord(0, epoch, 5000)])
    for next_id in (5000, 4000):
        result = cluster.apply([ProducerIdsRecord(0, epoch, next_id)])
        assert not result.accepted
    assert cluster.image.next_producer_id == 5000
    with pytest.raises(MetadataRecordError):  # beyond int64: cannot even be proposed
        cluster.apply([ProducerIdsRecord(0, epoch, MAX_PRODUCER_ID + 1)])
    assert not cluster.apply([ProducerIdsRecord(0, epoch + 1, 6000)]).accepted  # stale epoch


def test_producer_id_space_exhaustion():
    cluster = Cluster()
    epoch = cluster.add_broker(0)
    last_block = MAX_PRODUCER_ID - PRODUCER_ID_BLOCK_SIZE
    cluster.commit([ProducerIdsRecord(0, epoch, last_block)])
    records, response = allocate_producer_ids(cluster.image, AllocateProducerIdsRequest(0, epoch))
    assert response.error_code == ErrorCode.NONE and response.producer_id_start == last_block
    cluster.commit(records)
    assert cluster.image.next_producer_id == MAX_PRODUCER_ID
    records, response = allocate_producer_ids(cluster.image, AllocateProducerIdsRequest(0, epoch))
    assert records == [] and response.error_code == ErrorCode.UNKNOWN_SERVER_ERROR


def test_leader_change_record_must_bump_leader_epoch():
    cluster, epochs, topic_id = _isr_cluster()
    bad = PartitionChangeRecord(topic_id, 0, leader_epoch=0, partition_epoch=1, leader=1)
    assert not cluster.apply([bad]).accepted
    good = PartitionChangeRecord(topic_id, 0, leader_epoch=1, partition_epoch=1, leader=1)
    cluster.commit([good])
    back = PartitionChangeRecord(topic_id, 0, leader_epoch=0, partition_epoch=2, leader=0)
    assert not cluster.apply([back]).accepted


def test_unregister_broker_leaves_isrs_then_disappears():
    cluster = Cluster()
    for b in range(3):
        cluster.add_broker(b)
    topic_id = cluster.create_topic("t", 3, 2)
    records, response = unregister_broker(cluster.image, UnregisterBrokerRequest(1))
    assert response.error_code == ErrorCode.NONE
    cluster.commit(records)
    assert 1 not in cluster.image.brokers
    for state in cluster.image.topics[topic_id].partitions.values():
        assert 1 not in state.isr and state.leader != 1
    _, response = unregister_broker(cluster.image, UnregisterBrokerRequest(1))
    assert response.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED


def test_activate_controller_batch_opens_a_new_epoch():
    cluster = Cluster(controller_epoch=1)
    cluster.controller_epoch = 2
    cluster.commit(activate_controller(5, 2))
    assert (cluster.image.controller_id, cluster.image.controller_epoch) == (5, 2)


def test_heartbeat_tracker_gives_a_grace_period_after_activation():
    cluster = Cluster()
    for b in range(2):
        cluster.add_broker(b)
    tracker = BrokerHeartbeatTracker(session_timeout_ms=100)
    tracker.on_activate(cluster.image, now_ms=1000)
    assert tracker.fence_expired(cluster.image, 1100) == ([], [])
    tracker.touch(0, 1050)
    records, fenced = tracker.fence_expired(cluster.image, 1101)
    assert fenced == [1]
    cluster.commit(records)
    assert tracker.fence_expired(cluster.image, 1140) == ([], [])  # 1 is fenced already
    records, fenced = tracker.fence_expired(cluster.image, 1151)
    assert fenced == [0]


def test_time_the_controller_could_not_run_counts_against_no_session_or_grace():
    cluster = Cluster()
    for b in range(3):
        cluster.add_broker(b)
    tracker = BrokerHeartbeatTracker(session_timeout_ms=100, disconnect_grace_ms=50)
    tracker.on_activate(cluster.image, now_ms=0)
    tracker.touch(0, 80, connection_id=7)
    tracker.touch(1, 90, connection_id=8)
    tracker.connection_closed(8, 95)  # broker 1's grace starts
    tracker.on_stall(1000, now_ms=1100)  # nothing ran from 100 to 1100
    assert tracker.fence_expired(cluster.image, 1100) == ([], [])
    assert tracker.last_heartbeat_ms_by_broker == {0: 1080, 1: 1090, 2: 1000}
    # 46 ms of running after the stall: 1's grace (5 + 46 ms) and 2's session (100 + 46 ms,
    # never heard since the activation) ran out, not 0's (20 + 46 ms)
    _, fenced = tracker.fence_expired(cluster.image, 1146)
    assert fenced == [1, 2]
    tracker.touch(0, 1150)  # heard right after a stall: its contact never moves past now
    tracker.on_stall(600, now_ms=1700)
    assert tracker.last_heartbeat_ms_by_broker[0] == 1700


def test_a_broker_whose_heartbeat_connection_closed_is_fenced_after_the_grace_not_the_session():
    """Fast fencing: the connection a broker last heartbeated on closes (its process died); no
    heartbeat on another connection within disconnect_grace_ms fences it, long before the
    session timeout. A broker that reconnects and heartbeats within the grace is kept; a
    connection that is not a broker's current one changes nothing."""
    cluster = Cluster()
    for b in range(3):
        cluster.add_broker(b)
    cluster.create_topic("t", 3, 3)
    tracker = BrokerHeartbeatTracker(session_timeout_ms=9000, disconnect_grace_ms=500)
    tracker.on_activate(cluster.image, now_ms=0)
    for b in range(3):
        tracker.touch(b, 100, connection_id=10 + b)
    assert tracker.next_deadline_ms() is None
    assert tracker.connection_closed(99, 200) == []  # e.g. a MetadataFetch connection
    assert tracker.connection_closed(10, 200) == [0]
    assert tracker.connection_closed(11, 300) == [1]
    assert tracker.next_deadline_ms() == 700
    assert not tracker.has_valid_session(cluster.image, 0, 300)  # a restart registers at once
    tracker.touch(1, 650, connection_id=21)  # broker 1 reconnected in time
    assert tracker.fence_expired(cluster.image, 700) == ([], [])
    records, fenced = tracker.fence_expired(cluster.image, 701)
    assert fenced == [0]
    assert tracker.reason(0, 701) == "controller_connection_lost"
    cluster.commit(records)
    assert all(0 not in state.isr for _, _, state in cluster.image.iter_partitions())
    assert tracker.fence_expired(cluster.image, 800) == ([], [])
    assert tracker.next_deadline_ms() is None  # a fenced broker is not waited on
    # An old connection of broker 1 closing after it moved to a new one is not a loss.
    assert tracker.connection_closed(11, 900) == []
    assert tracker.has_valid_session(cluster.image, 1, 900)


def test_after_activation_only_the_previous_controllers_broker_gets_the_short_grace():
    """A new active controller has no connections. The previous controller's own broker (most
    often dead with it) must heartbeat within the disconnect grace; every other broker keeps
    Kafka's session timeout, so one that is merely slow (paused, starved) is not fenced. With
    no grace set the session timeout alone applies to all."""
    cluster = Cluster()
    for b in range(3):
        cluster.add_broker(b)
    tracker = BrokerHeartbeatTracker(session_timeout_ms=9000, disconnect_grace_ms=100)
    tracker.on_activate(cluster.image, now_ms=1000, previous_controller_id=2)
    assert tracker.next_deadline_ms() == 1100
    records, fenced = tracker.fence_expired(cluster.image, 1101)
    assert fenced == [2] and tracker.reason(2, 1101) == "controller_connection_lost"
    cluster.commit(records)
    assert tracker.next_deadline_ms() is None or tracker.fence_expired(cluster.image, 1102)[1] == []
    assert tracker.fence_expired(cluster.image, 9_999) == ([], [])  # silent, within the session
    assert tracker.fence_expired(cluster.image, 10_001)[1] == [0, 1]
    assert tracker.reason(0, 10_001) == "session_expired"
    slow = BrokerHeartbeatTracker(session_timeout_ms=9000)
    slow.on_activate(cluster.image, now_ms=1000, previous_controller_id=0)
    assert slow.next_deadline_ms() is None
    assert slow.fence_expired(cluster.image, 9999) == ([], [])


def test_a_dead_previous_controllers_grace_runs_from_the_loss_of_its_connection():
    """The new controller activates an election after the previous one's Raft connection
    closed: its broker's grace started at that loss, so it is fenced at the activation, not a
    grace later. A loss not known, or reported later than the activation, starts it then."""
    cluster = Cluster()
    for b in range(3):
        cluster.add_broker(b)
    tracker = BrokerHeartbeatTracker(session_timeout_ms=9000, disconnect_grace_ms=100)
    tracker.on_activate(cluster.image, now_ms=1000, previous_controller_id=2, previous_lost_ms=600)
    assert tracker.next_deadline_ms() == 700
    assert tracker.fence_expired(cluster.image, 1000)[1] == [2]
    later = BrokerHeartbeatTracker(session_timeout_ms=9000, disconnect_grace_ms=100)
    later.on_activate(cluster.image, now_ms=1000, previous_controller_id=2, previous_lost_ms=1500)
    assert later.next_deadline_ms() == 1100


def test_an_operation_of_more_than_10000_records_fails_whole_before_any_is_built():
    """Kafka's MAX_RECORDS_PER_USER_OP: CreateTopics / CreatePartitions that would write more
    than 10,000 metadata records fail whole with POLICY_VIOLATION, so a small request (a
    thousand topics of ten thousand partitions) cannot make the controller build millions."""
    cluster = Cluster()
    for b in range(3):
        cluster.add_broker(b)
    huge = CreateTopicsRequest(tuple(CreatableTopic(f"t{i}", 10_000, 3) for i in range(1000)))
    ids = [uuid.uuid4() for _ in range(1000)]
    records, response = create_topics(cluster.image, huge, start_index=0, topic_ids=ids)
    assert records == []
    assert {r.error_code for r in response.results} == {ErrorCode.POLICY_VIOLATION}
    # At the limit: 1 TopicRecord + 9,998 PartitionRecords + 1 ConfigRecord = 10,000.
    fits = CreateTopicsRequest((CreatableTopic("a", 9_998, 1, configs={"retention.ms": "1"}),))
    records, response = create_topics(cluster.image, fits, start_index=0, topic_ids=ids[:1])
    assert response.results[0].error_code == ErrorCode.NONE and len(records) == 10_000
    over = CreateTopicsRequest((CreatableTopic("b", 5_000, 1), CreatableTopic("c", 5_000, 1)))
    records, response = create_topics(cluster.image, over, start_index=0, topic_ids=ids[1:3])
    assert records == [] and [r.error_code for r in response.results] == [44, 44]
    cluster.create_topic("small", 1, 1)
    cluster.create_topic("other", 1, 1)
    grow = CreatePartitionsRequest(
        (CreatePartitionsTopic("small", 6_000), CreatePartitionsTopic("other", 6_000))
    )
    records, response = create_partitions(cluster.image, grow, start_index=0)
    assert records == [] and [r.error_code for r in response.results] == [44, 44]
    grow = CreatePartitionsRequest((CreatePartitionsTopic("small", 6_000),))
    records, response = create_partitions(cluster.image, grow, start_index=0)
    assert response.results[0].error_code == ErrorCode.NONE and len(records) == 5_999
