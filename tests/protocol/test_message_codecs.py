"""Every declared API message, every version: the fast codec, the construct reference and
kafka-python's own protocol classes agree on the bytes of hypothesis-generated bodies."""

from __future__ import annotations

import uuid

import kafka.protocol.admin
import kafka.protocol.consumer
import kafka.protocol.metadata
import kafka.protocol.producer  # noqa: F401  (registers kafka-python's message classes)
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.api_message import ApiMessage

from log.common.errors import InvalidRequestError
from log.protocol.apis import APIS
from log.protocol.schema import (
    BOOL,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UINT16,
    UINT32,
    UUID,
    ArrayType,
    Message,
    StructType,
    in_range,
)
from log.protocol.wire_construct import construct_for

_INT_BITS = {INT8: 8, INT16: 16, INT32: 32, INT64: 64}
_UINT_BITS = {UINT16: 16, UINT32: 32}


def _value_strategy(field, type_, version: int, nullable: bool) -> st.SearchStrategy:
    if isinstance(type_, ArrayType):
        inner = _value_strategy(field, type_.element, version, False)
        values = st.lists(inner, max_size=3)
    elif isinstance(type_, StructType):
        values = body_strategy(type_, version)
    elif type_ in _INT_BITS:
        bits = _INT_BITS[type_]
        values = st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    elif type_ in _UINT_BITS:
        values = st.integers(0, (1 << _UINT_BITS[type_]) - 1)
    elif type_ is BOOL:
        values = st.booleans()
    elif type_ is FLOAT64:
        values = st.floats(allow_nan=False)
    elif type_ is UUID:
        values = st.uuids()
    elif type_ is STRING:
        values = st.text(max_size=6)
    else:
        values = st.binary(max_size=12)
    return st.none() | values if nullable else values


def body_strategy(struct_type: StructType, version: int) -> st.SearchStrategy:
    present = {
        field.name: _value_strategy(field, field.type, version, in_range(version, field.nullable))
        for field in struct_type.fields
        if in_range(version, field.versions)
    }
    return st.builds(struct_type.cls, **present)


def _combos() -> list:
    combos = []
    for api in APIS.values():
        for version in range(api.request.versions[0], api.request.versions[1] + 1):
            for message in (api.request, api.response):
                combos.append(pytest.param(message, version, id=f"{message.name}-v{version}"))
    return combos


def _kafka_python_classes() -> dict:
    found = {}
    pending = [ApiMessage]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if getattr(cls, "_class_version", None) is None and cls.__dict__.get("_json") is not None:
            found[(cls.API_KEY, cls.type)] = cls
    return found


KAFKA_PYTHON = _kafka_python_classes()


def _plain(value, type_, version: int):
    """Our value as kafka-python's to_dict(json=False) shows it (fields of `version` only)."""
    if value is None:
        return None
    if isinstance(type_, ArrayType):
        return [_plain(item, type_.element, version) for item in value]
    if isinstance(type_, StructType):
        return {
            field.name: _plain(getattr(value, field.name), field.type, version)
            for field in type_.fields
            if in_range(version, field.versions)
        }
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _normalise_kp(value):
    # kafka-python turns authorized-operations bit fields into sets; the bytes are checked.
    if isinstance(value, dict):
        return {k: _normalise_kp(v) for k, v in value.items() if "authorized_operations" not in k}
    if isinstance(value, list | tuple):
        return [_normalise_kp(v) for v in value]
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return value


@pytest.mark.parametrize(("message", "version"), _combos())
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fast_codec_matches_construct_and_kafka_python(message: Message, version: int, data):
    body = data.draw(body_strategy(message.struct, version))
    encoded = message.encode(body, version)

    decoded, end = message.decode(encoded, version)
    assert end == len(encoded)
    assert decoded == body

    reference = construct_for(message, version)
    assert reference.build(body) == encoded
    assert reference.parse(encoded) == body

    kp_class = KAFKA_PYTHON.get(
        (message.api_key, "request" if message.name.endswith("Request") else "response")
    )
    if kp_class is None:
        return
    if message.api_key == 18 and message.name.endswith("Response") and body.error_code != 0:
        return  # kafka-python (like us) reads an ApiVersions error body as v0, whatever version
    kp_body = kp_class.decode(encoded, version=version)
    kp_body._header = None  # kafka-python's decode leaves it unset; encode reads it
    assert kp_body.encode(version=version) == encoded
    ours = _normalise_kp(_plain(body, message.struct, version))
    assert _only_keys_of(_normalise_kp(kp_body.to_dict(json=False)), ours) == ours


def _only_keys_of(theirs, ours):
    """Drop what we do not declare (tagged fields kafka-python fills with defaults)."""
    if isinstance(theirs, dict) and isinstance(ours, dict):
        return {k: _only_keys_of(v, ours[k]) for k, v in theirs.items() if k in ours}
    if isinstance(theirs, list) and isinstance(ours, list) and len(theirs) == len(ours):
        return [_only_keys_of(t, o) for t, o in zip(theirs, ours, strict=True)]
    return theirs


def test_every_client_facing_api_has_a_kafka_python_cross_check():
    controller_apis = {62, 63, 67}  # KRaft-internal: kafka-python has no classes for them
    # KIP-848's ConsumerGroupHeartbeat/Describe: kafka-python 3.0 has no classes either; librdkafka
    # speaks them in tests/node/test_consumer_group_protocol.py
    no_kafka_python = {68, 69}
    missing = [
        api.name
        for api in APIS.values()
        if (api.api_key, "request") not in KAFKA_PYTHON
        and api.api_key not in controller_apis | no_kafka_python
    ]
    assert missing == []


def test_uuid_default_and_records_are_zero_copy():
    from log.protocol.produce import PRODUCE_REQUEST

    cls = PRODUCE_REQUEST.cls
    body = cls(
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            cls.TopicProduceData(
                name="t", partition_data=[cls.PartitionProduceData(index=0, records=b"batch")]
            )
        ],
    )
    frame = PRODUCE_REQUEST.encode(body, 8)
    decoded, _ = PRODUCE_REQUEST.decode(frame, 8)
    records = decoded.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is frame
    assert bytes(records) == b"batch"
    assert uuid.UUID(int=0) == UUID.default


def test_encoding_a_bad_body_names_the_message():
    from log.protocol.produce import PRODUCE_RESPONSE

    cls = PRODUCE_RESPONSE.cls
    body = cls(
        responses=[
            cls.TopicProduceResponse(
                name="t", partition_responses=[cls.PartitionProduceResponse(error_code=70000)]
            )
        ]
    )
    with pytest.raises(ValueError, match="ProduceResponse v8"):
        PRODUCE_RESPONSE.encode(body, 8)
    with pytest.raises(ValueError, match="not nullable"):
        PRODUCE_RESPONSE.encode(cls(responses=[cls.TopicProduceResponse(name=None)]), 8)


def test_array_defaults_are_fresh_lists():
    from log.protocol.metadata import METADATA_RESPONSE

    first, second = METADATA_RESPONSE.cls(), METADATA_RESPONSE.cls()
    first.topics.append("x")
    assert second.topics == []


def test_tagged_fields_are_written_only_when_set_and_read_strictly():
    """Produce v10's tagged current_leader (partition) and node_endpoints (response): absent
    from the bytes at their defaults; a known tag whose size disagrees with its content is an
    error; an unknown tag is skipped."""
    from log.protocol.produce import PRODUCE_RESPONSE

    cls = PRODUCE_RESPONSE.cls
    part = cls.PartitionProduceResponse
    plain = cls(responses=[cls.TopicProduceResponse(name="t", partition_responses=[part()])])
    hinted = cls(
        responses=[
            cls.TopicProduceResponse(
                name="t",
                partition_responses=[
                    part(
                        error_code=6,
                        current_leader=part.LeaderIdAndEpoch(leader_id=2, leader_epoch=7),
                    )
                ],
            )
        ],
        node_endpoints=[cls.NodeEndpoint(node_id=2, host="h", port=9092)],
    )
    assert PRODUCE_RESPONSE.encode(plain, 10) == PRODUCE_RESPONSE.encode(plain, 9)
    encoded = PRODUCE_RESPONSE.encode(hinted, 10)
    assert PRODUCE_RESPONSE.decode(encoded, 10)[0] == hinted
    assert PRODUCE_RESPONSE.decode(encoded, 9)[0].node_endpoints == []  # v9: skipped as unknown
    # The partition's tagged section: 1 field, tag 0, 9 bytes (two int32s and the struct's own
    # empty tagged section). Claim 10 bytes.
    section = bytes([1, 0, 9]) + (2).to_bytes(4, "big") + (7).to_bytes(4, "big") + b"\x00"
    assert section in encoded
    bad = encoded.replace(section, bytes([1, 0, 10]) + section[3:] + b"\x00")
    with pytest.raises(InvalidRequestError):
        PRODUCE_RESPONSE.decode(bad, 10)
