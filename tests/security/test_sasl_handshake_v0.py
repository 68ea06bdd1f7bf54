"""SaslHandshake v0: the SASL tokens then travel as bare size-prefixed frames, without
SaslAuthenticate around them. A real client still does this: kafka-python pinned to a pre-1.0
protocol (`api_version=(0, 11)`) logs in that way over SASL_PLAINTEXT, then produces and reads
back; a wrong password closes the connection (v0 cannot carry an error) and the client reports
the failed login. The raw exchange is also checked byte by byte, with garbage tokens."""

from __future__ import annotations

import struct

import pytest
import trio

from log.protocol.client_codec import ClientCodec
from log.protocol.sasl import SASL_HANDSHAKE_REQUEST
from log.security.plain import plain_client_message
from tests.security.conftest import USERS

pytestmark = pytest.mark.interop

N = 5
API_VERSION = (0, 11)  # Kafka 0.11: SaslHandshake v0 only, record batches v2


def _kafka_python(bootstrap: str, mechanism: str, password: str) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    conf = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                sasl_plain_username="alice", sasl_plain_password=password,
                api_version=API_VERSION)  # fmt: skip
    producer = KafkaProducer(bootstrap_servers=bootstrap, **conf)
    for i in range(N):
        producer.send("v0", b"v0-%d" % i)
    producer.flush(20)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=30_000, **conf)  # fmt: skip
    consumer.assign([TopicPartition("v0", 0)])
    consumer.seek_to_beginning()
    values = []
    for msg in consumer:  # until N records, or 30 s without one
        values.append(msg.value)
        if len(values) == N:
            break
    consumer.close()
    return values


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
async def test_kafka_python_pinned_to_0_11_logs_in_with_raw_tokens(secure_broker, mechanism):
    await secure_broker.create_topic("v0")
    values = await trio.to_thread.run_sync(
        _kafka_python, secure_broker.bootstrap("SASL_PLAINTEXT"), mechanism, USERS["alice"]
    )
    assert values == [b"v0-%d" % i for i in range(N)]


async def test_kafka_python_with_a_wrong_password_is_refused(secure_broker):
    from kafka.errors import KafkaError as KafkaPythonError

    await secure_broker.create_topic("v0")
    bootstrap = secure_broker.bootstrap("SASL_PLAINTEXT")

    def attempt() -> None:
        from kafka import KafkaProducer

        KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice",
                      sasl_plain_password="wrong", api_version=API_VERSION,
                      max_block_ms=5000).send("v0", b"x").get(10)  # fmt: skip

    with pytest.raises(KafkaPythonError):
        await trio.to_thread.run_sync(attempt)
    assert secure_broker.server.failed_authentication_count >= 1


async def _handshake_v0(port: int, mechanism: str) -> trio.SocketStream:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    codec = ClientCodec(client_id="v0")
    await stream.send_all(
        codec.encode_request(17, 0, SASL_HANDSHAKE_REQUEST.cls(mechanism=mechanism))
    )
    while not (responses := codec.receive_data(await stream.receive_some(1 << 16))):
        pass
    assert responses[0].body.error_code == 0
    return stream


async def _receive_frame(stream: trio.SocketStream) -> bytes | None:
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = await stream.receive_some(1 << 16)
        if not chunk:
            return None
        data += chunk
    return data[4:]


@pytest.mark.parametrize(
    "token, accepted",
    [
        (plain_client_message("alice", USERS["alice"]), True),
        (plain_client_message("alice", "wrong"), False),
        (b"\x00\x00garbage", False),
        (b"", False),
    ],
)
async def test_raw_plain_tokens(secure_broker, token, accepted):
    with trio.fail_after(20):
        stream = await _handshake_v0(secure_broker.ports["SASL_PLAINTEXT"], "PLAIN")
        await stream.send_all(struct.pack(">i", len(token)) + token)
        answer = await _receive_frame(stream)
        if accepted:  # PLAIN's empty challenge, then Kafka requests as usual
            assert answer == b""
            codec = ClientCodec(client_id="v0")
            await stream.send_all(codec.encode_request(18, 0, _api_versions()))
            while not (responses := codec.receive_data(await stream.receive_some(1 << 16))):
                pass
            assert responses[0].body.error_code == 0
        else:
            assert answer is None  # closed, nothing said
        await stream.aclose()


def _api_versions():
    from log.protocol.api_versions import API_VERSIONS_REQUEST

    return API_VERSIONS_REQUEST.cls()
