import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from quorum_core_harness import Cluster

from quorum.checkpoint import (
    CorruptCheckpointError,
    checkpoint_file_name,
    list_checkpoints,
    load_newest_checkpoint,
    write_checkpoint,
)
from quorum.records import NoOpRecord
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
    with pytest.raises(CorruptCheckpointError):
        MetadataStateMachine.from_checkpoint(bytes(blob))


@settings(max_examples=100)
@given(st.binary(max_size=64))
def test_garbage_is_a_corrupt_checkpoint(blob):
    with pytest.raises(CorruptCheckpointError):
        MetadataStateMachine.from_checkpoint(blob)


def test_write_keeps_newest_three_and_loads_newest(tmp_path):
    cluster = _cluster_with_data()
    offsets = []
    for _ in range(5):
        cluster.commit([NoOpRecord()])
        write_checkpoint(str(tmp_path), cluster.sm)
        offsets.append(cluster.sm.last_applied_offset)
    assert [o for o, _ in list_checkpoints(str(tmp_path))] == offsets[::-1][:3]
    assert sorted(os.listdir(tmp_path)) == sorted(checkpoint_file_name(o) for o in offsets[-3:])
    loaded = load_newest_checkpoint(str(tmp_path))
    assert loaded == cluster.sm and loaded.last_applied_offset == offsets[-1]


def test_corrupt_newest_falls_back_to_older(tmp_path):
    cluster = _cluster_with_data()
    write_checkpoint(str(tmp_path), cluster.sm)
    older = MetadataStateMachine.from_checkpoint(cluster.sm.to_checkpoint())
    cluster.create_topic("later", 1, 1)
    newest_path = write_checkpoint(str(tmp_path), cluster.sm)
    with open(newest_path, "r+b") as f:
        f.seek(-3, os.SEEK_END)
        f.write(b"\xff\xff\xff")
    loaded = load_newest_checkpoint(str(tmp_path))
    assert loaded == older and loaded.image.topic("later") is None
    # Truncate the older one too: nothing trustworthy left.
    older_path = list_checkpoints(str(tmp_path))[1][1]
    with open(older_path, "r+b") as f:
        f.truncate(10)
    assert load_newest_checkpoint(str(tmp_path)) is None


def test_no_directory_or_no_files(tmp_path):
    assert load_newest_checkpoint(str(tmp_path / "missing")) is None
    (tmp_path / "unrelated.txt").write_text("x")
    (tmp_path / (checkpoint_file_name(5) + ".tmp")).write_bytes(b"partial")
    assert load_newest_checkpoint(str(tmp_path)) is None


def test_cannot_write_before_anything_applied(tmp_path):
    with pytest.raises(ValueError):
        write_checkpoint(str(tmp_path), MetadataStateMachine())
