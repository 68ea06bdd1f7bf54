import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quorum.records import (
    AccessControlEntryRecord,
    ActiveControllerRecord,
    BrokerEndpoint,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecordError,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialsRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialsRecord,
    decode_batch,
    decode_records,
    encode_batch,
    encode_records,
)

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
text = st.text(max_size=20)
uuids = st.uuids()
int_lists = st.lists(i32, max_size=5).map(tuple)

records = st.one_of(
    st.builds(
        RegisterBrokerRecord,
        i32,
        i64,
        uuids,
        st.lists(st.builds(BrokerEndpoint, text, text, st.integers(0, 65535)), max_size=3).map(
            tuple
        ),
        st.none() | text,
        st.booleans(),
    ),
    st.builds(UnregisterBrokerRecord, i32, i64),
    st.builds(FenceBrokerRecord, i32, i64),
    st.builds(UnfenceBrokerRecord, i32, i64),
    st.builds(TopicRecord, text, uuids),
    st.builds(PartitionRecord, uuids, i32, int_lists, int_lists, i32, i32, i32),
    st.builds(
        PartitionRecord, uuids, i32, int_lists, int_lists, i32, i32, i32, int_lists, int_lists
    ),
    st.builds(
        PartitionChangeRecord,
        uuids,
        i32,
        i32,
        i32,
        st.none() | i32,
        st.none() | int_lists,
        st.none() | int_lists,
    ),
    st.builds(
        PartitionChangeRecord,
        uuids,
        i32,
        i32,
        i32,
        st.none() | i32,
        st.none() | int_lists,
        st.none() | int_lists,
        st.none() | int_lists,
        st.none() | int_lists,
    ),
    st.builds(
        PartitionRecord,
        uuids,
        i32,
        int_lists,
        int_lists,
        i32,
        i32,
        i32,
        int_lists,
        int_lists,
        int_lists,
        int_lists,
        st.none() | uuids,
    ),  # fmt: skip
    st.builds(
        PartitionChangeRecord,
        uuids,
        i32,
        i32,
        i32,
        st.none() | i32,
        st.none() | int_lists,
        st.none() | int_lists,
        st.none() | int_lists,
        st.none() | int_lists,
        st.none() | int_lists,
        st.none() | int_lists,
    ),  # fmt: skip
    st.builds(RemoveTopicRecord, uuids),
    st.builds(RemoveTopicRecord, uuids, st.none() | uuids),
    st.builds(ConfigRecord, st.sampled_from([2, 4]), text, text, st.none() | text),
    st.builds(ProducerIdsRecord, i32, i64, i64),
    st.builds(ActiveControllerRecord, i32, i32),
    st.just(NoOpRecord()),
    st.builds(
        UserScramCredentialsRecord,
        text,
        st.integers(-128, 127),
        st.binary(max_size=40),
        st.binary(max_size=64),
        st.binary(max_size=64),
        i32,
    ),  # fmt: skip
    st.builds(RemoveUserScramCredentialsRecord, text, st.integers(-128, 127)),
    st.builds(
        AccessControlEntryRecord,
        st.uuids(),
        st.integers(-128, 127),
        text,
        st.integers(-128, 127),
        text,
        text,
        st.integers(-128, 127),
        st.integers(-128, 127),
    ),  # fmt: skip
    st.builds(RemoveAccessControlEntryRecord, st.uuids()),
    st.builds(RegisterControllerRecord, i32, text, i32, text, i32),
    st.builds(FeatureLevelRecord, text, st.integers(-(2**15), 2**15 - 1)),
)


@settings(max_examples=150)
@given(st.lists(records, max_size=8), i32, i64)
def test_batch_round_trip(batch_records, controller_epoch, proposal_id):
    batch = decode_batch(encode_batch(batch_records, controller_epoch, proposal_id))
    assert batch.records == tuple(batch_records)
    assert (batch.controller_epoch, batch.proposal_id) == (controller_epoch, proposal_id)
    assert decode_records(encode_records(batch_records)) == tuple(batch_records)


@settings(max_examples=200)
@given(st.binary(max_size=200))
def test_garbage_raises_only_typed_error(data):
    for decode in (decode_batch, decode_records):
        try:
            decode(data)
        except MetadataRecordError:
            pass


@settings(max_examples=150)
@given(st.lists(records, min_size=1, max_size=4), st.data())
def test_any_flipped_byte_is_detected(batch_records, data):
    raw = bytearray(encode_batch(batch_records, 1, 1))
    index = data.draw(st.integers(0, len(raw) - 1))
    raw[index] ^= data.draw(st.integers(1, 255))
    with pytest.raises(MetadataRecordError):
        decode_batch(bytes(raw))


@settings(max_examples=100)
@given(st.lists(records, min_size=1, max_size=4), st.binary(max_size=30))
def test_record_list_with_trailing_or_cut_bytes_is_typed_error(batch_records, junk):
    raw = encode_records(batch_records)
    for bad in (raw + junk if junk else raw + b"\0", raw[:-1]):
        try:
            decode_records(bad)
        except MetadataRecordError:
            pass
        else:
            raise AssertionError("accepted a damaged record list")


def test_unknown_version_and_type_are_typed_errors():
    raw = encode_batch([NoOpRecord()], 1, 1)
    with pytest.raises(MetadataRecordError, match="version"):
        decode_batch(b"\x07" + raw[1:])
    body = bytearray(encode_records([NoOpRecord()]))
    body[4] = 200  # record_type of the first frame
    with pytest.raises(MetadataRecordError, match="unknown record type"):
        decode_records(bytes(body))
    body[4], body[5] = 12, 9  # NoOpRecord with record_version 9
    with pytest.raises(MetadataRecordError, match="version"):
        decode_records(bytes(body))


def test_unencodable_values_are_typed_errors():
    with pytest.raises(MetadataRecordError):
        encode_batch([FenceBrokerRecord(2**40, 1)], 1, 1)
    with pytest.raises(MetadataRecordError):
        encode_batch([TopicRecord("x" * 70000, uuid.uuid4())], 1, 1)
    with pytest.raises(MetadataRecordError):
        encode_batch(["not a record"], 1, 1)  # type: ignore[list-item]


@settings(max_examples=200)
@given(st.lists(records, max_size=8))
def test_codec_matches_the_construct_reference_byte_for_byte(batch_records):
    from tests.quorum_core.records_reference import (
        reference_decode_records,
        reference_encode_record,
    )

    encoded = encode_records(batch_records)
    assert encoded == len(batch_records).to_bytes(4, "big") + b"".join(
        reference_encode_record(r) for r in batch_records
    )
    assert reference_decode_records(encoded) == decode_records(encoded) == tuple(batch_records)


# Version-0 frames as the codec wrote them before KIP-966's fields (recorded bytes): a journal
# or checkpoint written then still loads, the new fields at their defaults.
_TOPIC_ID = uuid.UUID(int=7)
_V0_PARTITION_RECORD = (
    "06" "00" "00000034" + _TOPIC_ID.hex + "00000001" "00000002" "0000000100000002"
    "00000001" "00000001" "00000001" "00000003" "00000004"
)  # fmt: skip
_V0_PARTITION_CHANGE_RECORD = (
    "07" "00" "00000027" + _TOPIC_ID.hex + "00000001" "00000005" "00000006" "01" "ffffffff"
    "01" "00000000" "00"
)  # fmt: skip


def test_version_0_partition_records_still_decode_and_re_encode_identically():
    raw = bytes.fromhex("00000002" + _V0_PARTITION_RECORD + _V0_PARTITION_CHANGE_RECORD)
    records = decode_records(raw)
    assert records == (
        PartitionRecord(_TOPIC_ID, 1, (1, 2), (1,), 1, 3, 4),
        PartitionChangeRecord(_TOPIC_ID, 1, 5, 6, leader=-1, isr=()),
    )
    assert records[0].elr == records[0].last_known_elr == ()
    assert records[1].elr is None and records[1].last_known_elr is None
    assert encode_records(records) == raw


def test_reassignment_fields_are_written_as_version_2():
    record = PartitionChangeRecord(_TOPIC_ID, 1, 5, 6, replicas=(1, 2, 3), adding_replicas=(3,))
    frame = encode_records([record])[4:]
    assert frame[1] == 2  # record_version
    assert decode_records(encode_records([record])) == (record,)
    # finishing a reassignment clears both lists: () is "set to empty", not None ("unchanged")
    done = PartitionChangeRecord(_TOPIC_ID, 1, 5, 7, adding_replicas=(), removing_replicas=())
    assert encode_records([done])[5] == 2
    assert decode_records(encode_records([done])) == (done,)


def test_elr_fields_are_written_as_version_1():
    record = PartitionChangeRecord(_TOPIC_ID, 1, 5, 6, isr=(), elr=(2, 3), last_known_elr=(1,))
    frame = encode_records([record])[4:]
    assert frame[1] == 1  # record_version
    assert decode_records(encode_records([record])) == (record,)
    cut = bytearray(encode_records([record]))
    cut[5] = 0  # claim version 0: its payload then has trailing bytes
    with pytest.raises(MetadataRecordError, match="trailing"):
        decode_records(bytes(cut))


def test_request_ids_are_written_as_new_versions_and_old_frames_still_decode():
    """PartitionRecord version 3 and RemoveTopicRecord version 1 carry the forwarded request's
    id; without one they are written as before, and a version-0 RemoveTopicRecord (recorded
    bytes) decodes with none."""
    request_id = uuid.UUID(int=9)
    grown = PartitionRecord(_TOPIC_ID, 1, (1, 2), (1,), 1, request_id=request_id)
    removed = RemoveTopicRecord(_TOPIC_ID, request_id)
    assert encode_records([grown])[5] == 3 and encode_records([removed])[5] == 1
    assert decode_records(encode_records([grown, removed])) == (grown, removed)
    raw = bytes.fromhex("00000001" "08" "00" "00000010" + _TOPIC_ID.hex)  # fmt: skip
    assert decode_records(raw) == (RemoveTopicRecord(_TOPIC_ID),)
    assert encode_records([RemoveTopicRecord(_TOPIC_ID)]) == raw
