"""__consumer_offsets keys and values: Kafka's bytes, round trips, hostile input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from log.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_key,
    encode_offset_value,
)
from log.protocol.errors import CorruptRecordError


def test_offset_commit_key_bytes_are_kafkas():
    # version 1, "g", "t", partition 3
    assert (
        encode_key(OffsetCommitKey("g", "t", 3)).hex() == "0001" + "000167" + "000174" + "00000003"
    )
    assert encode_key(GroupMetadataKey("g")).hex() == "0002" + "000167"


@settings(max_examples=100)
@given(st.text(max_size=20), st.text(max_size=20), st.integers(0, 2**31 - 1),
       st.integers(-1, 2**62), st.integers(-1, 2**31 - 1), st.text(max_size=20))  # fmt: skip
def test_round_trips(group, topic, partition, offset, leader_epoch, metadata):
    key = OffsetCommitKey(group, topic, partition)
    assert decode_key(encode_key(key)) == key
    value = OffsetCommitValue(offset, leader_epoch, metadata, 1234)
    assert decode_offset_value(encode_offset_value(value)) == value
    g = GroupMetadataValue("consumer", partition, metadata or None, None, offset)
    assert decode_group_value(encode_group_value(g)) == g


@settings(max_examples=200)
@given(st.binary(max_size=40))
def test_garbage_is_a_typed_error(data):
    for decode in (decode_key, decode_offset_value, decode_group_value):
        try:
            decode(data)
        except CorruptRecordError:
            pass


def test_unknown_versions_refused():
    with pytest.raises(CorruptRecordError):
        decode_key(b"\x00\x07\x00\x01g")
    with pytest.raises(CorruptRecordError):
        decode_offset_value(b"\x00\x09")
