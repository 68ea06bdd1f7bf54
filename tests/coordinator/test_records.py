"""__consumer_offsets keys and values: Kafka's bytes, round trips, hostile input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from log.common.errors import CorruptRecordError
from log.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_key,
    encode_offset_value,
)


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


def _string(s: str) -> str:
    return len(s).to_bytes(2, "big").hex() + s.encode().hex()


def _bytes(b: bytes) -> str:
    return len(b).to_bytes(4, "big").hex() + b.hex()


def _i32(n: int) -> str:
    return n.to_bytes(4, "big", signed=True).hex()


def _i64(n: int) -> str:
    return n.to_bytes(8, "big", signed=True).hex()


MEMBER = MemberMetadataValue("m-1", "inst", "cid", "/h", 30000, 10000, b"sub", b"asg")


def test_group_value_v3_bytes_are_kafkas():
    value = GroupMetadataValue("consumer", 7, "range", "m-1", 99, (MEMBER,))
    expected = (
        "0003" + _string("consumer") + _i32(7) + _string("range") + _string("m-1") + _i64(99)
        + _i32(1) + _string("m-1") + _string("inst") + _string("cid") + _string("/h")
        + _i32(30000) + _i32(10000) + _bytes(b"sub") + _bytes(b"asg")
    )  # fmt: skip
    assert encode_group_value(value).hex() == expected
    empty = GroupMetadataValue("consumer", 8, None, None, 100, ())
    assert encode_group_value(empty).hex() == (
        "0003" + _string("consumer") + _i32(8) + "ffff" + "ffff" + _i64(100) + _i32(0)
    )


def test_older_group_value_versions_decode():
    member_v0 = _string("m-1") + _string("cid") + _string("/h") + _i32(10000)
    member_v0 += _bytes(b"sub") + _bytes(b"asg")
    head = _string("consumer") + _i32(7) + _string("range") + _string("m-1")
    v0 = bytes.fromhex("0000" + head + _i32(1) + member_v0)
    assert decode_group_value(v0) == GroupMetadataValue(
        "consumer", 7, "range", "m-1", -1,
        (MemberMetadataValue("m-1", None, "cid", "/h", -1, 10000, b"sub", b"asg"),),
    )  # fmt: skip
    member_v1 = _string("m-1") + _string("cid") + _string("/h") + _i32(30000) + _i32(10000)
    member_v1 += _bytes(b"sub") + _bytes(b"asg")
    v1 = bytes.fromhex("0001" + head + _i32(1) + member_v1)
    assert decode_group_value(v1).members[0].rebalance_timeout_ms == 30000
    v2 = bytes.fromhex("0002" + head + _i64(55) + _i32(1) + member_v1)
    decoded = decode_group_value(v2)
    assert decoded.current_state_timestamp_ms == 55 and decoded.members[0].group_instance_id is None


def test_offset_value_versions():
    # version 1 carries the expire timestamp and no leader epoch; we write it for explicit expiry
    v1 = OffsetCommitValue(5, -1, "m", 10, 20)
    assert encode_offset_value(v1).hex() == "0001" + _i64(5) + _string("m") + _i64(10) + _i64(20)
    assert decode_offset_value(encode_offset_value(v1)) == v1
    v3 = OffsetCommitValue(5, 4, "m", 10)
    assert encode_offset_value(v3).hex() == "0003" + _i64(5) + _i32(4) + _string("m") + _i64(10)
    for version in ("0000", "0002"):
        old = bytes.fromhex(version + _i64(5) + _string("m") + _i64(10))
        assert decode_offset_value(old) == OffsetCommitValue(5, -1, "m", 10, -1)


@settings(max_examples=100)
@given(
    st.lists(
        st.builds(
            MemberMetadataValue, st.text(max_size=8), st.none() | st.text(max_size=8),
            st.text(max_size=8), st.text(max_size=8), st.integers(-1, 2**31 - 1),
            st.integers(0, 2**31 - 1), st.binary(max_size=16), st.binary(max_size=16),
        ),
        max_size=4,
    ).map(tuple)
)  # fmt: skip
def test_group_value_with_members_round_trips(members):
    value = GroupMetadataValue("consumer", 3, "range" if members else None, None, 5, members)
    assert decode_group_value(encode_group_value(value)) == value
