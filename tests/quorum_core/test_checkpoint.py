import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from quorum_core_harness import Cluster

from quorum.checkpoint import CorruptImageError
from quorum.state_machine import MetadataStateMachine


def _cluster_with_data() -> Cluster:
    cluster = Cluster()
    for b in range(3):
        cluster.add_broker(b)
    cluster.create_topic("orders", 3, 2)
    cluster.create_topic("events", 1, 3)
    return cluster


def test_round_trip_preserves_image_and_offset():
    cluster = _cluster_with_data()
    blob = cluster.sm.to_checkpoint()
    restored = MetadataStateMachine.from_checkpoint(blob)
    assert restored == cluster.sm
    assert restored.last_applied_offset == cluster.sm.last_applied_offset
    assert restored.image.brokers[1].registered_offset == cluster.image.brokers[1].registered_offset


def test_empty_state_machine_round_trips():
    sm = MetadataStateMachine()
    assert MetadataStateMachine.from_checkpoint(sm.to_checkpoint()) == sm


@settings(max_examples=100)
@given(st.data())
def test_any_damage_is_a_corrupt_checkpoint(data):
    blob = bytearray(_cluster_with_data().sm.to_checkpoint())
    kind = data.draw(st.sampled_from(["flip", "cut", "extend"]))
    if kind == "flip":
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i] ^= data.draw(st.integers(1, 255))
    elif kind == "cut":
        del blob[data.draw(st.integers(0, len(blob) - 1)) :]
    else:
        blob += data.draw(st.binary(min_size=1, max_size=10))
    with pytest.raises(CorruptImageError):
        MetadataStateMachine.from_checkpoint(bytes(blob))


@settings(max_examples=100)
@given(st.binary(max_size=64))
def test_garbage_is_a_corrupt_checkpoint(blob):
    with pytest.raises(CorruptImageError):
        MetadataStateMachine.from_checkpoint(blob)
