"""ServerConnection and ClientCodec: version negotiation, refusals, ordering, back-pressure,
and real kafka-python request frames."""

from __future__ import annotations

import dataclasses
import struct

import pytest
from kafka.protocol.admin import DescribeClusterRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from log.common.errors import ErrorCode, InvalidFrameError, InvalidRequestError
from log.protocol.api_versions import API_VERSIONS_REQUEST
from log.protocol.apis import APIS, DEFAULT_ADVERTISED, api_versions_body
from log.protocol.client_codec import ClientCodec
from log.protocol.connection import NEED_DATA, PAUSED, BadRequest, Request, ServerConnection
from log.protocol.fetch import FETCH_REQUEST, FETCH_RESPONSE
from log.protocol.metadata import METADATA_REQUEST, METADATA_RESPONSE
from log.protocol.produce import PRODUCE_REQUEST, PRODUCE_RESPONSE

P = PRODUCE_REQUEST.cls
PR = PRODUCE_RESPONSE.cls


def _produce_body(acks: int = -1) -> object:
    return P(
        acks=acks,
        timeout_ms=1000,
        topic_data=[
            P.TopicProduceData(
                name="t",
                partition_data=[
                    P.PartitionProduceData(index=0, records=b"batch-0"),
                    P.PartitionProduceData(index=1, records=b"batch-1"),
                ],
            )
        ],
    )


def _pair() -> tuple[ClientCodec, ServerConnection]:
    return ClientCodec("test-client"), ServerConnection(max_frame_bytes=1 << 20, max_in_flight=5)


def _one(conn: ServerConnection, data: bytes):
    conn.receive_data(data)
    return conn.next_request()


def test_kafka_python_api_versions_v4_is_answered_and_v5_gets_the_v0_error_body():
    request = ApiVersionsRequest(
        client_software_name="kafka-python", client_software_version="3.0.12", version=4
    )
    request.with_header(correlation_id=7, client_id="kafka-python")
    conn = ServerConnection()
    frame = request.encode(header=True, framed=True)
    event = _one(conn, frame)
    assert isinstance(event, Request) and event.api_version == 4
    # the same request at v5 (a version nobody declares yet): bytes 6-7 are the api_version
    frame = frame[:6] + struct.pack(">h", 5) + frame[8:]
    event = _one(ServerConnection(), frame)
    assert isinstance(event, BadRequest) and not event.close_connection
    assert event.error_code == ErrorCode.UNSUPPORTED_VERSION
    data = event.data_to_send
    assert struct.unpack_from(">i", data)[0] == len(data) - 4
    # header v0 (no tagged fields), then error_code 35 and the v0 api_keys array
    assert data[4:8] == struct.pack(">i", 7) and data[8:10] == struct.pack(">h", 35)
    response = ApiVersionsResponse.decode(data, version=4, header=True, framed=True)
    assert response.error_code == 35
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[18] == (0, 4)


def test_librdkafka_style_v3_request_is_answered_in_one_round_trip():
    """ApiVersions v3 (flexible request, header v2; the response keeps header v0): librdkafka
    asks v3 first, and no longer needs a v0 error and a v2 retry on every connection."""
    client, conn = _pair()
    v3 = API_VERSIONS_REQUEST.cls(
        client_software_name="librdkafka", client_software_version="2.16.0"
    )
    event = _one(conn, client.encode_request(18, 3, v3))
    assert isinstance(event, Request) and event.api_version == 3
    assert event.body.client_software_name == "librdkafka"
    (response,) = client.receive_data(conn.send_response(event, api_versions_body()))
    assert response.api_version == 3 and response.body.error_code == ErrorCode.NONE
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.body.api_keys}
    assert advertised[0] == (0, 13) and advertised[1] == (4, 18) and advertised[3] == (1, 13)
    assert advertised[18] == (0, 4) and advertised[16] == (0, 5)
    assert set(advertised) == DEFAULT_ADVERTISED
    assert 24 not in advertised  # transaction APIs are opt-in


def test_advertised_but_refused_produce_v2_gets_unsupported_version_per_partition():
    client, conn = _pair()
    event = _one(conn, client.encode_request(0, 2, _produce_body()))
    assert isinstance(event, BadRequest) and not event.close_connection
    (response,) = client.receive_data(event.data_to_send)
    partitions = response.body.responses[0].partition_responses
    assert [(p.index, p.error_code, p.base_offset) for p in partitions] == [
        (0, 35, -1),
        (1, 35, -1),
    ]


def test_refused_produce_with_acks_0_closes_instead_of_answering():
    client, conn = _pair()
    event = _one(conn, client.encode_request(0, 1, _produce_body(acks=0)))
    assert isinstance(event, BadRequest) and event.close_connection and event.data_to_send == b""


@pytest.mark.parametrize(("api_key", "version"), [(999, 0), (17, 2), (0, 9), (1, 12), (3, -1)])
def test_unknown_api_or_undeclared_version_closes(api_key, version):
    conn = ServerConnection()
    payload = struct.pack(">hhih", api_key, version, 1, -1)
    event = _one(conn, struct.pack(">i", len(payload)) + payload)
    assert isinstance(event, BadRequest) and event.close_connection
    assert conn.next_request() is NEED_DATA


def test_malformed_body_closes():
    payload = struct.pack(">hhih", 0, 8, 1, -1) + b"\x00"
    event = _one(ServerConnection(), struct.pack(">i", len(payload)) + payload)
    assert isinstance(event, BadRequest) and event.close_connection
    assert event.error_code == ErrorCode.INVALID_REQUEST


def test_oversized_frame_raises_invalid_frame():
    conn = ServerConnection(max_frame_bytes=100)
    conn.receive_data(struct.pack(">i", 101))
    with pytest.raises(InvalidFrameError):
        conn.next_request()


def test_kafka_python_produce_v8_decodes_with_zero_copy_records():
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="orders",
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(
                        index=2, records=b"\x01" * 100
                    )
                ],
            )
        ],
        version=8,
    )
    request.with_header(correlation_id=99, client_id="kafka-python-producer")
    event = _one(ServerConnection(), request.encode(header=True, framed=True))
    assert isinstance(event, Request)
    assert (event.api_key, event.api_version, event.correlation_id) == (0, 8, 99)
    assert event.header.client_id == "kafka-python-producer"
    partition = event.body.topic_data[0].partition_data[0]
    assert partition.index == 2 and isinstance(partition.records, memoryview)
    assert bytes(partition.records) == b"\x01" * 100


def test_kafka_python_metadata_and_flexible_describe_cluster():
    conn = ServerConnection()
    metadata = MetadataRequest(topics=None, allow_auto_topic_creation=False, version=8)
    metadata.with_header(correlation_id=1, client_id="c")
    cluster = DescribeClusterRequest(include_cluster_authorized_operations=True, version=0)
    cluster.with_header(correlation_id=2, client_id="c")
    conn.receive_data(
        metadata.encode(header=True, framed=True) + cluster.encode(header=True, framed=True)
    )
    first, second = conn.next_request(), conn.next_request()
    assert first.body.topics is None and first.body.allow_auto_topic_creation is False
    assert second.api_key == 60 and second.body.include_cluster_authorized_operations is True
    assert conn.next_request() is NEED_DATA


def test_responses_are_released_in_request_order():
    client, conn = _pair()
    conn.receive_data(
        client.encode_request(0, 8, _produce_body())
        + client.encode_request(3, 8, METADATA_REQUEST.cls(topics=None))
    )
    produce, metadata = conn.next_request(), conn.next_request()
    assert conn.send_response(metadata, METADATA_RESPONSE.cls(controller_id=1)) == b""
    data = conn.send_response(produce, PR(responses=[]))
    responses = client.receive_data(data)
    assert [r.api_key for r in responses] == [0, 3]
    assert responses[1].body.controller_id == 1
    assert conn.in_flight_count == 0


def test_acks_0_produce_gets_no_response_and_does_not_block_later_ones():
    client, conn = _pair()
    conn.receive_data(
        client.encode_request(0, 8, _produce_body(acks=0))
        + client.encode_request(3, 8, METADATA_REQUEST.cls(topics=[]))
    )
    produce, metadata = conn.next_request(), conn.next_request()
    assert not produce.expects_response and metadata.expects_response
    assert client.in_flight_count == 1
    assert conn.send_response(metadata, METADATA_RESPONSE.cls()) == b""
    data = conn.no_response(produce)
    (response,) = client.receive_data(data)
    assert response.api_key == 3


def test_paused_at_max_in_flight():
    client = ClientCodec()
    conn = ServerConnection(max_in_flight=2)
    conn.receive_data(
        b"".join(client.encode_request(3, 8, METADATA_REQUEST.cls()) for _ in range(3))
    )
    first, second = conn.next_request(), conn.next_request()
    assert conn.reading_paused
    assert conn.next_request() is PAUSED
    conn.send_response(first, METADATA_RESPONSE.cls())
    assert isinstance(conn.next_request(), Request)
    assert conn.next_request() is PAUSED
    conn.send_response(second, METADATA_RESPONSE.cls())


def test_fetch_response_parts_keep_record_buffers():
    client, conn = _pair()
    fetch = FETCH_REQUEST.cls(
        max_wait_ms=500,
        min_bytes=1,
        topics=[
            FETCH_REQUEST.cls.FetchTopic(
                topic="t",
                partitions=[
                    FETCH_REQUEST.cls.FetchPartition(partition=0, partition_max_bytes=1 << 20)
                ],
            )
        ],
    )
    request = _one(conn, client.encode_request(1, 11, fetch))
    stored = memoryview(bytearray(b"stored-batch-bytes"))
    R = FETCH_RESPONSE.cls
    body = R(
        responses=[
            R.FetchableTopicResponse(
                topic="t",
                partitions=[R.PartitionData(partition_index=0, high_watermark=10, records=stored)],
            )
        ]
    )
    parts = conn.send_response_parts(request, body)
    assert any(part is stored for part in parts)
    (response,) = client.receive_data(b"".join(parts))
    assert bytes(response.body.responses[0].partitions[0].records) == b"stored-batch-bytes"


def test_client_rejects_out_of_order_or_unexpected_responses():
    client = ClientCodec()
    with pytest.raises(InvalidRequestError):
        client.receive_data(struct.pack(">ii", 4, 0))
    client.encode_request(3, 1, METADATA_REQUEST.cls())
    wrong = METADATA_RESPONSE.encode(METADATA_RESPONSE.cls(), 1)
    with pytest.raises(InvalidRequestError, match="correlation"):
        client.receive_data(struct.pack(">ii", len(wrong) + 4, 55) + wrong)


def test_every_api_is_declared_for_its_advertised_versions_or_refused_by_closing():
    for api in APIS.values():
        assert api.implemented[0] >= api.request.versions[0]
        assert api.advertised[1] <= api.implemented[1]


def test_server_side_records_are_writable_views_into_the_frame():
    from log.records.batch_header import read_header, set_base_offset, validate_batch
    from log.records.builder import Record, build_batch

    batch = build_batch([Record(b"v1"), Record(b"v2")])
    body = P(
        acks=1,
        timeout_ms=1000,
        topic_data=[
            P.TopicProduceData(
                name="t", partition_data=[P.PartitionProduceData(index=0, records=batch)]
            )
        ],
    )
    client, conn = _pair()
    request = _one(conn, client.encode_request(0, 8, body))
    records = request.body.topic_data[0].partition_data[0].records
    assert not records.readonly
    set_base_offset(records, 0, 41)  # in place, as the broker assigns offsets
    assert read_header(records).base_offset == 41
    validate_batch(records)  # baseOffset is outside the CRC


def _one_of_each(struct_type, version):
    """A request body with one element in every array (defaults elsewhere)."""
    from log.protocol.schema import ArrayType, StructType, in_range

    values = {}
    for field in struct_type.fields:
        if not in_range(version, field.versions):
            continue
        element = field.type.element if isinstance(field.type, ArrayType) else None
        if isinstance(element, StructType):
            values[field.name] = [_one_of_each(element, version)]
        elif element is not None:
            values[field.name] = [7] if element.fmt else ["x"]
        elif field.type.name == "string":
            values[field.name] = "topic"
    return struct_type.cls(**values)


def _error_codes(value, struct_type, version):
    """Every error_code in a body, in the fields that exist at `version`."""
    from log.protocol.schema import ArrayType, StructType, in_range

    codes = []
    for field in struct_type.fields:
        if not in_range(version, field.versions):
            continue
        element = field.type.element if isinstance(field.type, ArrayType) else field.type
        if field.name == "error_code" or field.name.endswith("_error_code"):
            codes.append(getattr(value, field.name))
        elif isinstance(element, StructType):
            items = getattr(value, field.name)
            for item in items if isinstance(items, list) else [items] if items is not None else []:
                codes.extend(_error_codes(item, element, version))
    return codes


_REFUSED = [
    pytest.param(api.api_key, version, id=f"{api.name}-v{version}")
    for api in APIS.values()
    for version in range(api.advertised[0], api.implemented[0])
]


@pytest.mark.parametrize(("api_key", "version"), _REFUSED)
def test_advertised_but_refused_versions_answer_unsupported_version_in_their_layout(
    api_key, version
):
    api = APIS[api_key]
    client, conn = _pair()
    body = _one_of_each(api.request.struct, version)
    if api_key == 0:
        body = dataclasses.replace(body, acks=1)  # acks=0 would close instead (no response due)
    event = _one(conn, client.encode_request(api_key, version, body, expect_response=True))
    assert isinstance(event, BadRequest) and not event.close_connection
    (response,) = client.receive_data(event.data_to_send)
    codes = _error_codes(response.body, api.response.struct, version)
    assert codes and set(codes) == {ErrorCode.UNSUPPORTED_VERSION}


def test_api_outside_the_accepted_set_closes():
    client = ClientCodec()
    conn = ServerConnection(accepted_api_keys=frozenset({0, 1, 3}))
    event = _one(conn, client.encode_request(22, 1, APIS[22].request.cls()))
    assert isinstance(event, BadRequest) and event.close_connection
    conn = ServerConnection(accepted_api_keys=frozenset({0, 1, 3}))
    assert isinstance(_one(conn, client.encode_request(18, 2, API_VERSIONS_REQUEST.cls())), Request)


def test_stateless_response_frame_matches_the_connection():
    from log.protocol.connection import encode_response_frame

    client, conn = _pair()
    request = _one(conn, client.encode_request(3, 8, METADATA_REQUEST.cls()))
    body = METADATA_RESPONSE.cls(controller_id=3)
    assert conn.send_response(request, body) == encode_response_frame(
        request.correlation_id, 3, 8, body
    )


def test_choose_versions_against_our_own_advertisement():
    from log.protocol.apis import supported_api_versions
    from log.protocol.client_codec import choose_versions

    chosen = choose_versions(supported_api_versions())
    assert chosen[0] == 11 and chosen[1] == 18 and chosen[3] == 13 and chosen[22] == 6
    assert (chosen[8], chosen[15]) == (9, 5)  # our clients: topics by name, v5 Dead groups
    entry = APIS[18].response.cls.ApiVersion
    # AddPartitionsToTxn v4+ is what partition leaders send (KIP-890): a client stays at v3
    assert choose_versions([entry(api_key=24, min_version=0, max_version=5)]) == {24: 3}
    assert choose_versions([entry(api_key=0, min_version=12, max_version=13)]) == {}
    assert choose_versions(
        [entry(api_key=1, min_version=4, max_version=19), entry(api_key=999)]
    ) == {1: 18}


_ALL_VERSIONS = [
    pytest.param(api, version, id=f"{api.name}-v{version}")
    for api in APIS.values()
    for version in range(api.request.versions[0], api.implemented[1] + 1)
]


@pytest.mark.parametrize(("api", "version"), _ALL_VERSIONS)
def test_error_response_body_answers_every_item_with_the_code(api, version):
    from log.protocol.apis import error_response_body

    request = _one_of_each(api.request.struct, version)
    body = error_response_body(api, version, request, ErrorCode.NOT_CONTROLLER)
    decoded, _ = api.response.decode(api.response.encode(body, version), version)
    codes = _error_codes(decoded, api.response.struct, version)
    assert codes and set(codes) == {ErrorCode.NOT_CONTROLLER}


@pytest.mark.parametrize("seed", range(20))
def test_any_completion_order_releases_responses_in_request_order(seed):
    import random

    rng = random.Random(seed)
    client = ClientCodec()
    conn = ServerConnection(max_in_flight=8)
    count = rng.randrange(1, 8)
    conn.receive_data(
        b"".join(client.encode_request(3, 8, METADATA_REQUEST.cls()) for _ in range(count))
    )
    requests = [conn.next_request() for _ in range(count)]
    order = list(range(count))
    rng.shuffle(order)
    received = []
    for index in order:
        received.extend(
            client.receive_data(
                conn.send_response(requests[index], METADATA_RESPONSE.cls(controller_id=index))
            )
        )
    assert [r.body.controller_id for r in received] == list(range(count)), f"seed {seed}"
    assert conn.in_flight_count == 0
