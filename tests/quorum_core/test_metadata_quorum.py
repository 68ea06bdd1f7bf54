"""The voter set's pure parts: replaying and undoing membership changes (quorum.raft_voters), the
checks that refuse a change that could stall the quorum (quorum.metadata_quorum), the voter set
in a checkpoint file (quorum.raft_checkpoint) and the controller directory in the image."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quorum import metadata_quorum as mq
from quorum.image import MetadataImage, MetadataReplayError, replay_checkpoint_records
from quorum.raft_checkpoint import (
    CHECKPOINT_MAGIC_V2,
    RaftCheckpoint,
    decode_checkpoint,
    encode_checkpoint,
)
from quorum.raft_voters import ADD, REMOVE, voters_after, voters_before
from quorum.records import RegisterControllerRecord

A, B, C, D = "a:1", "b:1", "c:1", "d:1"
DIRECTORY = {
    i: mq.VoterEndpoints(i, address, f"host{i}:9093")
    for i, address in enumerate((A, B, C, D), start=1)
}

changes = st.lists(st.tuples(st.sampled_from([ADD, REMOVE]), st.sampled_from([A, B, C, D])))


@given(st.sets(st.sampled_from([A, B, C, D])), changes)
def test_undoing_single_changes_gives_back_the_set_before_them(start, log):
    # Raft's single-server changes: each add names a non-voter and each remove a voter
    voters, valid = set(start), []
    for kind, address in log:
        if (kind == ADD) != (address in voters):
            valid.append((kind, address))
            voters = set(voters_after(voters, [(kind, address)]))
    after = voters_after(start, valid)
    assert after == tuple(sorted(voters))
    assert voters_before(after, valid) == tuple(sorted(start))


def test_a_change_that_needs_a_dead_voter_is_refused():
    add_d = mq.AddRaftVoterRequest(4, D, "host4:9093")
    voters = (A, B, C)
    # C is dead: 4 voters would need 3 of A, B, D -- fine while A and B are up
    assert mq.check_add(add_d, voters, {A, B}, DIRECTORY) == ""
    # only A is up: A + D is not a majority of 4
    assert "remove the dead voters first" in mq.check_add(add_d, voters, {A}, DIRECTORY)
    assert "already a voter" in mq.check_add(
        mq.AddRaftVoterRequest(3, "c2:1", "h:1"), voters, {A, B}, DIRECTORY
    )
    assert "already a voter" in mq.check_add(
        mq.AddRaftVoterRequest(9, C, "h:1"), voters, {A, B}, DIRECTORY
    )
    assert "not host:port" in mq.check_add(
        mq.AddRaftVoterRequest(4, "d", "h:1"), voters, {A, B}, DIRECTORY
    )
    assert mq.check_remove(C, voters, {A, B}, A) == ""
    assert "leader" in mq.check_remove(A, voters, {A, B}, A)
    assert "not a voter" in mq.check_remove(D, voters, {A, B}, A)
    assert "not a voter" in mq.check_remove(None, voters, {A, B}, A)
    # A alone is up: removing C leaves A, B: A is not a majority of 2
    assert "fewer than a majority" in mq.check_remove(C, voters, {A}, A)
    assert "last voter" in mq.check_remove(A, (A,), {A}, B)


def test_endpoints_parse():
    assert mq.parse_endpoint("198.18.0.11:9093") == ("198.18.0.11", 9093)
    assert mq.parse_endpoint("[::1]:9093") == ("::1", 9093)
    for bad in ("host", ":9093", "host:0", "host:70000", "host:x"):
        assert mq.parse_endpoint(bad) is None


def test_a_checkpoint_carries_the_voter_set_and_old_files_still_read():
    old = RaftCheckpoint(2, 1, 1, 1, b"last", b"prev", b"state")
    data = encode_checkpoint(old)
    assert data[:8] == CHECKPOINT_MAGIC_V2 and decode_checkpoint(data) == old  # no voters
    new = dataclasses.replace(old, voters=(A, B, D))
    assert decode_checkpoint(encode_checkpoint(new)).voters == (A, B, D)


def test_the_image_keeps_where_controllers_listen_across_checkpoints():
    record = RegisterControllerRecord(4, "198.18.0.14", 9193, "198.18.0.14", 9093)
    image = replay_checkpoint_records([record], 7)
    assert image.controllers == {4: record}
    again = replay_checkpoint_records(image.to_records(), 7)
    assert again.controllers == image.controllers
    assert MetadataImage().controllers == {}
    with pytest.raises(MetadataReplayError, match="bad endpoint"):
        replay_checkpoint_records([dataclasses.replace(record, raft_port=0)], 7)
