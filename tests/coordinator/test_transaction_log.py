"""__transaction_state records: Kafka's bytes (hand-computed and checked against an independent
construct definition of Kafka's JSON schemas), round trips, hostile input, placement."""

from __future__ import annotations

import construct as c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from log.common.errors import CorruptRecordError
from log.coordinator.transaction_log import (
    PartitionsSchema,
    TransactionLogKey,
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    java_string_hash_code,
    metadata_from,
    partition_for,
    value_for,
    value_version_for,
)
from log.coordinator.transaction_state import (
    TransactionState,
    TransactionVersion,
    TxnTransitMetadata,
)

ONGOING = TransactionLogValue(
    producer_id=1000,
    producer_epoch=3,
    transaction_timeout_ms=60_000,
    transaction_status=TransactionState.ONGOING,
    transaction_partitions=(PartitionsSchema("t", (0, 1)),),
    transaction_last_update_timestamp_ms=10,
    transaction_start_timestamp_ms=5,
    previous_producer_id=999,
    client_transaction_version=2,
)

# -- Kafka's bytes, by hand ------------------------------------------------------------------


def test_key_bytes():
    # version 0, int16 length 1, "t"
    assert encode_key(TransactionLogKey("t")).hex() == "0000" + "0001" + "74"
    assert decode_key(bytes.fromhex("0000000174")) == TransactionLogKey("t")


def test_value_v0_bytes():
    expected = (
        "0000"  # version 0
        "00000000000003e8"  # producer id 1000
        "0003"  # epoch
        "0000ea60"  # timeout 60000
        "01"  # Ongoing
        "00000001"  # one topic
        "0001" "74"  # "t"
        "00000002" "00000000" "00000001"  # partitions [0, 1]
        "000000000000000a"  # last update 10
        "0000000000000005"  # start 5
    )  # fmt: skip
    assert encode_value(ONGOING, 0).hex() == expected
    # version 0 has no tagged fields: they read back as their defaults
    back = decode_value(bytes.fromhex(expected))
    assert back == TransactionLogValue(**{**ONGOING.__dict__, "previous_producer_id": -1,
                                          "client_transaction_version": 0})  # fmt: skip


def test_value_v1_bytes():
    expected = (
        "0001"  # version 1
        "00000000000003e8" "0003" "0000ea60" "01"
        "02"  # compact array: 1 topic (+1)
        "02" "74"  # compact string "t"
        "03" "00000000" "00000001"  # compact array of 2 int32
        "00"  # PartitionsSchema: no tagged fields
        "000000000000000a" "0000000000000005"
        "02"  # two tagged fields
        "00" "08" "00000000000003e7"  # tag 0 previous producer id 999
        "02" "02" "0002"  # tag 2 client transaction version 2 (tag 1 is at its default)
    )  # fmt: skip
    assert encode_value(ONGOING, 1).hex() == expected
    assert decode_value(bytes.fromhex(expected)) == ONGOING


def test_empty_state_writes_a_null_partition_array():
    value = TransactionLogValue(7, 0, 100, TransactionState.EMPTY, None, 1, -1)
    assert encode_value(value, 0).hex()[34:42] == "ffffffff"  # after 17 header bytes
    v1 = encode_value(value, 1)
    assert v1.hex()[34:36] == "00"  # compact null
    assert v1.hex().endswith("00")  # no tagged fields: all at their defaults
    assert decode_value(v1) == value


def test_unknown_tagged_fields_are_skipped():
    data = encode_value(ONGOING, 1)
    assert data[-15] == 2  # the tag count, then tag 0 (10 bytes) and tag 2 (4 bytes)
    patched = data[:-15] + bytes([3]) + data[-14:] + bytes.fromhex("0901ff")  # + tag 9
    assert decode_value(patched) == ONGOING


@pytest.mark.parametrize(
    "data",
    [
        "0002" + "00" * 40,  # version 2 does not exist
        "0000" + "00000000000003e8" "0003" "0000ea60" "09",  # state 9, and short
        "0001" + "00000000000003e8" "0003" "0000ea60" "01" "00" + "00" * 16 + "01" "00" "04",
        "0000" + "00000000000003e8" "0003" "0000ea60" "00" "ffffffff" + "00" * 16 + "00",
        "",
    ],
)  # fmt: skip
def test_malformed_values_are_typed_errors(data):
    with pytest.raises(CorruptRecordError):
        decode_value(bytes.fromhex(data))


def test_unknown_key_versions_are_skipped_not_guessed():
    assert decode_key(bytes.fromhex("0001000174")) is None
    with pytest.raises(CorruptRecordError):
        decode_key(bytes.fromhex("00000005"))


@settings(max_examples=300)
@given(st.binary(max_size=80))
def test_garbage_is_a_typed_error(data):
    for decode in (decode_key, decode_value):
        try:
            decode(data)
        except CorruptRecordError:
            pass


# -- an independent reference: Kafka's JSON schemas written in construct ------------------------

_UVarInt = c.VarInt  # unsigned LEB128: Kafka's unsigned varint
_V0_PARTITIONS = c.Struct(
    "topic" / c.PascalString(c.Int16sb, "utf8"),
    "partition_ids" / c.PrefixedArray(c.Int32sb, c.Int32sb),
)
_V1_PARTITIONS = c.Struct(
    "topic"
    / c.PascalString(c.ExprAdapter(_UVarInt, lambda o, _: o - 1, lambda o, _: o + 1), "utf8"),
    "partition_ids"
    / c.PrefixedArray(c.ExprAdapter(_UVarInt, lambda o, _: o - 1, lambda o, _: o + 1), c.Int32sb),
    "tags" / c.Const(b"\x00"),
)
_TAG = c.Struct("tag" / _UVarInt, "data" / c.Prefixed(_UVarInt, c.GreedyBytes))
_COMMON = (
    "producer_id" / c.Int64sb,
    "producer_epoch" / c.Int16sb,
    "timeout" / c.Int32sb,
    "status" / c.Int8sb,
)
REFERENCE = {
    0: c.Struct(
        "version" / c.Const(0, c.Int16sb),
        *_COMMON,
        "count" / c.Int32sb,
        "partitions" / c.Array(lambda ctx: max(ctx.count, 0), _V0_PARTITIONS),
        "last_update" / c.Int64sb,
        "start" / c.Int64sb,
        c.Terminated,
    ),
    1: c.Struct(
        "version" / c.Const(1, c.Int16sb),
        *_COMMON,
        "count" / c.ExprAdapter(_UVarInt, lambda o, _: o - 1, lambda o, _: o + 1),
        "partitions" / c.Array(lambda ctx: max(ctx.count, 0), _V1_PARTITIONS),
        "last_update" / c.Int64sb,
        "start" / c.Int64sb,
        "tags" / c.PrefixedArray(_UVarInt, _TAG),
        c.Terminated,
    ),
}


def _reference_build(value: TransactionLogValue, version: int) -> bytes:
    parts = value.transaction_partitions
    tags = []
    if version == 1:
        for tag, default, fmt in ((0, -1, c.Int64sb), (1, -1, c.Int64sb), (2, 0, c.Int16sb)):
            field = (value.previous_producer_id, value.next_producer_id,
                     value.client_transaction_version)[tag]  # fmt: skip
            if field != default:
                tags.append({"tag": tag, "data": fmt.build(field)})
    return REFERENCE[version].build(
        {
            "producer_id": value.producer_id,
            "producer_epoch": value.producer_epoch,
            "timeout": value.transaction_timeout_ms,
            "status": int(value.transaction_status),
            "count": -1 if parts is None else len(parts),
            "partitions": [
                {"topic": p.topic, "partition_ids": list(p.partition_ids)} for p in parts or ()
            ],  # fmt: skip
            "last_update": value.transaction_last_update_timestamp_ms,
            "start": value.transaction_start_timestamp_ms,
            "tags": tags,
        }
    )


_INT64 = st.integers(-(2**63), 2**63 - 1)
_PARTITIONS = st.lists(
    st.builds(
        PartitionsSchema,
        st.text(max_size=12),
        st.lists(st.integers(-(2**31), 2**31 - 1), max_size=5).map(tuple),
    ),
    max_size=4,
).map(tuple)
VALUES = st.builds(
    TransactionLogValue,
    producer_id=_INT64,
    producer_epoch=st.integers(-1, 32767),
    transaction_timeout_ms=st.integers(-(2**31), 2**31 - 1),
    transaction_status=st.sampled_from(TransactionState),
    transaction_partitions=st.none() | _PARTITIONS,
    transaction_last_update_timestamp_ms=_INT64,
    transaction_start_timestamp_ms=_INT64,
    previous_producer_id=_INT64,
    next_producer_id=_INT64,
    client_transaction_version=st.integers(0, 2),
)


@settings(max_examples=300)
@given(VALUES, st.sampled_from([0, 1]))
def test_bytes_match_the_construct_reference(value, version):
    data = encode_value(value, version)
    assert data == _reference_build(value, version)
    REFERENCE[version].parse(data)
    back = decode_value(data)
    if version == 0:  # the tagged fields are not stored
        value = TransactionLogValue(**{**value.__dict__, "previous_producer_id": -1,
                                       "next_producer_id": -1, "client_transaction_version": 0})  # fmt: skip
    assert back == value


@settings(max_examples=100)
@given(st.text(max_size=40))
def test_key_round_trip_matches_reference(transactional_id):
    data = encode_key(TransactionLogKey(transactional_id))
    reference = c.Struct(
        "version" / c.Const(0, c.Int16sb), "id" / c.PascalString(c.Int16sb, "utf8")
    )
    assert reference.parse(data).id == transactional_id
    assert decode_key(data) == TransactionLogKey(transactional_id)


# -- state <-> record ------------------------------------------------------------------------


def _transit(state, partitions=frozenset(), **changes) -> TxnTransitMetadata:
    fields = dict(
        producer_id=5, prev_producer_id=4, next_producer_id=-1, producer_epoch=2,
        last_producer_epoch=1, txn_timeout_ms=1000, txn_state=state,
        topic_partitions=frozenset(partitions), txn_start_timestamp_ms=100,
        txn_last_update_timestamp_ms=200, client_transaction_version=TransactionVersion.TV_2,
    )  # fmt: skip
    fields.update(changes)
    return TxnTransitMetadata(**fields)


def test_value_for_groups_partitions_by_topic():
    transit = _transit(TransactionState.ONGOING, {("b", 2), ("a", 1), ("b", 0)})
    value = value_for(transit)
    assert value.transaction_partitions == (
        PartitionsSchema("a", (1,)),
        PartitionsSchema("b", (0, 2)),
    )
    assert (value.previous_producer_id, value.client_transaction_version) == (4, 2)


def test_empty_transit_has_null_partitions_and_refuses_any():
    assert value_for(_transit(TransactionState.EMPTY)).transaction_partitions is None
    with pytest.raises(ValueError):
        value_for(_transit(TransactionState.EMPTY, {("a", 0)}))


def test_metadata_from_a_record_forgets_the_last_epoch():
    transit = _transit(TransactionState.PREPARE_COMMIT, {("a", 0), ("a", 1)})
    md = metadata_from("tid", decode_value(encode_value(value_for(transit), 1)))
    assert md.state == TransactionState.PREPARE_COMMIT
    assert md.topic_partitions == {("a", 0), ("a", 1)}
    assert (md.producer_id, md.prev_producer_id, md.producer_epoch) == (5, 4, 2)
    assert md.last_producer_epoch == -1  # not in Kafka's record
    assert md.client_transaction_version == TransactionVersion.TV_2
    assert md.pending_state is None


def test_value_version_follows_the_cluster_transaction_version():
    assert value_version_for(TransactionVersion.TV_0) == 0
    assert value_version_for(TransactionVersion.TV_1) == 1
    assert value_version_for(TransactionVersion.TV_2) == 1


# -- placement -------------------------------------------------------------------------------


def test_java_hash_codes():
    assert java_string_hash_code("hello") == 99162322
    assert java_string_hash_code("Aa") == java_string_hash_code("BB") == 2112
    assert java_string_hash_code("") == 0
    # a character outside the BMP hashes as its two UTF-16 surrogates
    assert java_string_hash_code("\U0001f600") == 0xD83D * 31 + 0xDE00


def test_partition_for_is_kafkas_utils_abs():
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE, which Utils.abs maps to 0
    assert java_string_hash_code("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0
    negative = next(s for s in (f"txn-{i}" for i in range(100)) if java_string_hash_code(s) < 0)
    h = java_string_hash_code(negative)
    assert partition_for(negative, 50) == (-h) % 50  # Math.abs, not h & 0x7fffffff
    assert partition_for("hello", 50) == 99162322 % 50
    with pytest.raises(ValueError):
        partition_for("x", 0)
