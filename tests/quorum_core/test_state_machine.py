import uuid

from hypothesis import given, settings
from hypothesis import strategies as st
from quorum_core_harness import Cluster

from log.common.errors import ErrorCode
from quorum.image import MetadataImage, MetadataReplayError, partition_changes, replay_batch
from quorum.records import (
    ActiveControllerRecord,
    BrokerRegistrationOffsetRecord,
    MetadataBatch,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    encode_batch,
)
from quorum.state_machine import MetadataStateMachine


@settings(max_examples=200)
@given(st.integers(-5, 50), st.binary(max_size=100))
def test_apply_never_raises_on_garbage(offset, payload):
    sm = MetadataStateMachine()
    result = sm.apply(offset, payload)
    assert not result.accepted
    assert sm.image.brokers == {} and sm.image.topics == {}


def test_apply_never_raises_on_wrong_types():
    sm = MetadataStateMachine()
    for offset, payload in [(1, None), ("x", b""), (None, b"\x01"), (2, 12345), (3, "text")]:
        assert not sm.apply(offset, payload).accepted  # type: ignore[arg-type]
    assert sm.rejected_count + sm.skipped_count == 5


def test_rejected_batch_leaves_content_untouched_but_advances_offset():
    cluster = Cluster()
    cluster.add_broker(0)
    before = cluster.image
    bad = PartitionRecord(uuid.uuid4(), 0, (0,), (0,), 0)  # unknown topic
    good_then_bad = [TopicRecord("t", uuid.uuid4()), bad]
    result = cluster.apply(good_then_bad)
    assert not result.accepted and result.error_code == ErrorCode.INVALID_REQUEST
    assert result.proposal_id == cluster.proposal_id
    assert cluster.image.topics == before.topics  # TopicRecord of the batch not applied either
    assert cluster.image.last_offset == cluster.offset == cluster.sm.last_applied_offset
    assert cluster.sm.rejected[-1] == result


def test_offsets_must_increase_gaps_allowed():
    cluster = Cluster()
    assert cluster.apply([NoOpRecord()], gap=5).accepted
    assert cluster.image.last_offset == 7
    payload = encode_batch([NoOpRecord()], 1, 99)
    for offset in (7, 3):
        result = cluster.sm.apply(offset, payload)
        assert not result.accepted and "already applied" in result.reason
    assert cluster.image.last_offset == 7
    assert (cluster.sm.skipped_count, cluster.sm.rejected_count) == (2, 0)


def test_controller_epoch_fencing():
    cluster = Cluster(controller_epoch=3)
    assert cluster.apply([NoOpRecord()]).accepted
    # A newer controller that has not committed its ActiveControllerRecord yet.
    assert cluster.apply([NoOpRecord()], controller_epoch=4).error_code == (
        ErrorCode.STALE_CONTROLLER_EPOCH
    )
    cluster.controller_epoch = 4
    cluster.commit([ActiveControllerRecord(2, 4), NoOpRecord()])
    assert (cluster.image.controller_id, cluster.image.controller_epoch) == (2, 4)
    # In-flight proposals of the old controller are rejected on replay.
    stale = cluster.apply([NoOpRecord()], controller_epoch=3)
    assert not stale.accepted and stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    # The ActiveControllerRecord must open the batch, carry the batch epoch, and be newer.
    assert not cluster.apply(
        [NoOpRecord(), ActiveControllerRecord(1, 5)], controller_epoch=5
    ).accepted
    assert not cluster.apply([ActiveControllerRecord(1, 6)], controller_epoch=5).accepted
    assert not cluster.apply([ActiveControllerRecord(1, 4)], controller_epoch=4).accepted
    assert cluster.image.controller_epoch == 4


def test_nothing_applies_before_a_controller_is_active():
    sm = MetadataStateMachine()
    assert not sm.apply(1, encode_batch([NoOpRecord()], 0, 1)).accepted
    assert not sm.apply(2, encode_batch([NoOpRecord()], -1, 1)).accepted
    assert sm.apply(3, encode_batch([ActiveControllerRecord(1, 0)], 0, 1)).accepted


def test_checkpoint_only_record_is_rejected_live():
    cluster = Cluster()
    cluster.add_broker(0)
    assert not cluster.apply([BrokerRegistrationOffsetRecord(0, 1)]).accepted


def test_partition_change_putting_a_fenced_broker_in_the_isr_is_rejected():
    cluster = Cluster()
    cluster.add_broker(0)
    cluster.add_broker(1, unfence=False)
    topic_id = cluster.create_topic("t", 1, 1)
    # Give the partition both brokers as replicas, then try to add the fenced one to the ISR.
    cluster.commit([PartitionChangeRecord(topic_id, 0, 0, 1, replicas=(0, 1))])
    result = cluster.apply([PartitionChangeRecord(topic_id, 0, 0, 2, isr=(0, 1))])
    assert not result.accepted and "fenced" in result.reason
    result = cluster.apply([PartitionChangeRecord(topic_id, 0, 0, 2, isr=(1,))])
    assert not result.accepted  # leader not in isr


def test_broker_epoch_must_increase_on_replay():
    cluster = Cluster()
    epoch = cluster.add_broker(0)
    again = RegisterBrokerRecord(0, epoch, uuid.uuid4(), ())
    assert not cluster.apply([again]).accepted


def test_replay_batch_is_pure():
    image = MetadataImage()
    batch = MetadataBatch(1, 1, (ActiveControllerRecord(0, 1),))
    new = replay_batch(image, batch, 1)
    assert image == MetadataImage() and new.controller_epoch == 1
    try:
        replay_batch(new, batch, 2)
    except MetadataReplayError as e:
        assert e.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    else:
        raise AssertionError("a second ActiveControllerRecord of the same epoch was accepted")


def test_partition_changes_between_images():
    cluster = Cluster()
    for b in range(2):
        cluster.add_broker(b)
    empty = cluster.image
    a = cluster.create_topic("a", 2, 2)
    with_a = cluster.image
    changes = partition_changes(empty, with_a)
    assert [(c.topic_name, c.partition, c.old) for c in changes] == [("a", 0, None), ("a", 1, None)]
    cluster.create_topic("b", 1, 1)
    cluster.commit([PartitionChangeRecord(a, 1, 1, 1, leader=0, isr=(0,))])
    changes = partition_changes(with_a, cluster.image)
    assert [(c.topic_name, c.partition) for c in changes] == [("a", 1), ("b", 0)]
    assert changes[0].new.leader == 0 and changes[0].new.leader_epoch == 1
    assert partition_changes(cluster.image, cluster.image) == []
    gone = partition_changes(cluster.image, empty)
    assert {(c.topic_name, c.new) for c in gone} == {("a", None), ("b", None)}
