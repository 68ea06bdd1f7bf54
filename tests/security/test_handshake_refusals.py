"""What a broker's TLS and SASL listeners do with clients that do not play by the rules: a
plaintext Kafka client on a TLS port, seeded garbage into the TLS handshake, requests before
SASL authentication, an unknown mechanism, out-of-order and garbage SASL tokens. Each connection
is refused (closed, or answered with Kafka's error code and then closed); the broker keeps
serving -- the last step of each test authenticates for real and gets an answer -- and logs no
ERROR (conftest's no_server_errors). Every randomised case names its seed."""

from __future__ import annotations

import random
import ssl

import pytest
import trio

from log.common.errors import ErrorCode
from log.protocol.api_versions import API_VERSIONS_REQUEST
from log.protocol.client_codec import ClientCodec
from log.protocol.metadata import METADATA_REQUEST
from log.protocol.sasl import SASL_AUTHENTICATE_REQUEST, SASL_HANDSHAKE_REQUEST
from log.security.plain import plain_client_message
from log.security.scram import SCRAM_MECHANISMS, ScramClient
from tests.security.conftest import USERS

API_VERSIONS = 18
METADATA = 3
SEEDS = range(12)


class Client:
    """Our sans-IO ClientCodec over a plain or TLS trio stream."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.codec = ClientCodec(client_id="security-test")

    @classmethod
    async def connect(cls, port: int, context: ssl.SSLContext | None = None) -> Client:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        if context is not None:
            stream = trio.SSLStream(stream, context, server_hostname="127.0.0.1")
            await stream.do_handshake()
        return cls(stream)

    async def call(self, api_key: int, version: int, body):
        await self.stream.send_all(self.codec.encode_request(api_key, version, body))
        with trio.fail_after(10):
            while True:
                data = await self.stream.receive_some(1 << 16)
                if not data:
                    raise EOFError("broker closed the connection")
                responses = self.codec.receive_data(data)
                if responses:
                    return responses[0].body

    async def closed_by_broker(self) -> bool:
        with trio.fail_after(15):
            try:
                while await self.stream.receive_some(1 << 16):
                    pass
            except trio.BrokenResourceError:
                pass
        return True

    async def aclose(self) -> None:
        await self.stream.aclose()


def client_tls(pki) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca))
    context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    return context


async def scram_login(client: Client, mechanism: str, user: str = "alice") -> None:
    handshake = await client.call(17, 1, SASL_HANDSHAKE_REQUEST.cls(mechanism=mechanism))
    assert handshake.error_code == 0 and mechanism in handshake.mechanisms
    scram = ScramClient(SCRAM_MECHANISMS[mechanism], user, USERS[user], "client-nonce-1")
    A = SASL_AUTHENTICATE_REQUEST.cls
    first = await client.call(36, 2, A(auth_bytes=scram.first()))
    assert first.error_code == 0, first
    final = await client.call(36, 2, A(auth_bytes=scram.final(first.auth_bytes)))
    assert final.error_code == 0, final
    scram.verify(final.auth_bytes)


async def assert_still_serving(secure_broker) -> None:
    """A real SCRAM login over SASL_SSL, then Metadata naming the SASL_SSL endpoint."""
    client = await Client.connect(secure_broker.ports["SASL_SSL"], client_tls(secure_broker.pki))
    await scram_login(client, "SCRAM-SHA-512")
    metadata = await client.call(METADATA, 12, METADATA_REQUEST.cls(topics=[]))
    assert [(b.host, b.port) for b in metadata.brokers] == [
        ("127.0.0.1", secure_broker.ports["SASL_SSL"])
    ]
    await client.aclose()


@pytest.mark.parametrize("listener", ["SSL", "SASL_SSL"])
async def test_plaintext_kafka_client_on_a_tls_port_is_closed(secure_broker, listener):
    client = await Client.connect(secure_broker.ports[listener])
    with pytest.raises((EOFError, trio.BrokenResourceError)):
        await client.call(API_VERSIONS, 3, API_VERSIONS_REQUEST.cls())
    assert secure_broker.server.failed_authentication_count == 1
    await assert_still_serving(secure_broker)


async def test_client_without_certificate_refused_when_client_auth_required(secure_broker):
    context = ssl.create_default_context(cafile=str(secure_broker.pki.ca))
    with pytest.raises((trio.BrokenResourceError, EOFError)):
        client = await Client.connect(secure_broker.ports["SSL"], context)
        await client.call(
            API_VERSIONS, 3, API_VERSIONS_REQUEST.cls()
        )  # TLS 1.3: the refusal comes after the handshake
    await assert_still_serving(secure_broker)


@pytest.mark.parametrize("seed", SEEDS)
async def test_garbage_into_the_tls_handshake(secure_broker, seed):
    rng = random.Random(seed)
    listener = rng.choice(["SSL", "SASL_SSL"])
    stream = await trio.open_tcp_stream("127.0.0.1", secure_broker.ports[listener])
    garbage = rng.randbytes(rng.randrange(1, 4096))
    if rng.random() < 0.5:  # a TLS record header in front makes the parser read further
        garbage = b"\x16\x03\x01" + rng.randbytes(2) + garbage
    try:
        await stream.send_all(garbage)
        await stream.send_eof()
        await Client(stream).closed_by_broker()
    except trio.BrokenResourceError:
        pass  # the broker closed first (a reset): what we wanted, seed {seed}
    await stream.aclose()
    await assert_still_serving(secure_broker)


async def test_requests_before_sasl_authentication_close_the_connection(secure_broker):
    client = await Client.connect(secure_broker.ports["SASL_PLAINTEXT"])
    versions = await client.call(
        API_VERSIONS, 3, API_VERSIONS_REQUEST.cls()
    )  # allowed before authentication
    advertised = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert advertised[17] == (0, 1) and advertised[36] == (0, 2)
    with pytest.raises(EOFError):
        await client.call(METADATA, 12, METADATA_REQUEST.cls(topics=[]))
    await assert_still_serving(secure_broker)


async def test_sasl_refusals_answer_kafka_error_codes_then_close(secure_broker):
    port = secure_broker.ports["SASL_PLAINTEXT"]
    A, H = SASL_AUTHENTICATE_REQUEST.cls, SASL_HANDSHAKE_REQUEST.cls
    client = await Client.connect(port)
    response = await client.call(36, 2, A(auth_bytes=b"x"))
    assert response.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert await client.closed_by_broker()

    client = await Client.connect(port)
    response = await client.call(17, 1, H(mechanism="GSSAPI"))
    assert response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert set(response.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert await client.closed_by_broker()

    client = await Client.connect(port)
    assert (await client.call(17, 1, H(mechanism="PLAIN"))).error_code == 0
    response = await client.call(36, 1, A(auth_bytes=plain_client_message("alice", "nope")))
    assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert response.error_message == "Authentication failed: Invalid username or password"
    assert await client.closed_by_broker()

    client = await Client.connect(port)  # a second handshake after authentication
    assert (await client.call(17, 1, H(mechanism="PLAIN"))).error_code == 0
    ok = await client.call(36, 0, A(auth_bytes=plain_client_message("bob", USERS["bob"])))
    assert ok.error_code == 0
    response = await client.call(17, 1, H(mechanism="SCRAM-SHA-256"))
    assert response.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert await client.closed_by_broker()
    assert secure_broker.server.failed_authentication_count == 4
    await assert_still_serving(secure_broker)


@pytest.mark.parametrize("seed", SEEDS)
async def test_garbage_sasl_tokens(secure_broker, seed):
    rng = random.Random(seed)
    mechanism = rng.choice(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    client = await Client.connect(secure_broker.ports["SASL_PLAINTEXT"])
    A = SASL_AUTHENTICATE_REQUEST.cls
    assert (
        await client.call(17, 1, SASL_HANDSHAKE_REQUEST.cls(mechanism=mechanism))
    ).error_code == 0
    for _round in range(4):
        kind = rng.randrange(3)
        if kind == 0:
            token = rng.randbytes(rng.randrange(0, 600))
        elif kind == 1:  # SCRAM-shaped text with random fields
            token = ",".join(
                f"{rng.choice('nrcpsiaev=,')}={rng.randbytes(rng.randrange(0, 30)).hex()}"
                for _ in range(rng.randrange(1, 5))
            ).encode()
            token = rng.choice([b"n,,", b"y,,", b"p=x,,", b""]) + token
        else:
            token = b"\x00".join(
                rng.randbytes(rng.randrange(0, 20)) for _ in range(rng.randrange(1, 5))
            )
        try:
            response = await client.call(36, rng.randrange(3), A(auth_bytes=token))
        except (EOFError, trio.BrokenResourceError):
            break  # closed after a refusal
        assert response.error_code in (0, ErrorCode.SASL_AUTHENTICATION_FAILED), (seed, response)
        if response.error_code:
            assert await client.closed_by_broker()
            break
    await client.aclose()
    await assert_still_serving(secure_broker)


async def test_reauthentication_kip_368(nursery, tmp_path, pki):
    """connections.max.reauth.ms: SaslAuthenticate v1+ tells the session lifetime; the client
    re-authenticates on the same connection (same principal) and goes on; a request after the
    session expired closes the connection. The broker's clock is ours to move."""
    from tests.security.conftest import start_secure_broker

    now_ms = [1_000_000]
    broker = await start_secure_broker(nursery, tmp_path, pki, clock_ms=lambda: now_ms[0],
                                       **{"connections.max.reauth.ms": 60_000})  # fmt: skip
    client = await Client.connect(broker.ports["SASL_PLAINTEXT"])
    H, A = SASL_HANDSHAKE_REQUEST.cls, SASL_AUTHENTICATE_REQUEST.cls
    assert (await client.call(17, 1, H(mechanism="PLAIN"))).error_code == 0
    first = await client.call(36, 1, A(auth_bytes=plain_client_message("alice", USERS["alice"])))
    assert first.error_code == 0 and first.session_lifetime_ms == 60_000
    metadata = METADATA_REQUEST.cls(topics=[])
    assert (await client.call(METADATA, 12, metadata)).brokers

    now_ms[0] += 59_000  # re-authenticate before expiry, as clients do
    assert (await client.call(17, 1, H(mechanism="PLAIN"))).error_code == 0
    again = await client.call(36, 2, A(auth_bytes=plain_client_message("alice", USERS["alice"])))
    assert again.error_code == 0 and again.session_lifetime_ms == 60_000
    now_ms[0] += 59_000  # within the new session
    assert (await client.call(METADATA, 12, metadata)).brokers

    other = await Client.connect(broker.ports["SASL_PLAINTEXT"])  # another principal: refused
    assert (await other.call(17, 1, H(mechanism="PLAIN"))).error_code == 0
    assert (
        await other.call(36, 1, A(auth_bytes=plain_client_message("alice", USERS["alice"])))
    ).error_code == 0
    assert (await other.call(17, 1, H(mechanism="PLAIN"))).error_code == 0
    changed = await other.call(36, 1, A(auth_bytes=plain_client_message("bob", USERS["bob"])))
    assert changed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert await other.closed_by_broker()

    now_ms[0] += 2_000  # the session expired
    with pytest.raises(EOFError):
        await client.call(METADATA, 12, metadata)


async def test_large_frame_before_sasl_authentication_is_refused(secure_broker):
    """sasl.server.max.receive.size (512 KiB): an unauthenticated client cannot make the broker
    buffer a large request; after authentication the usual socket.request.max.bytes applies."""
    stream = await trio.open_tcp_stream("127.0.0.1", secure_broker.ports["SASL_PLAINTEXT"])
    await stream.send_all((600_000).to_bytes(4, "big") + b"\x00" * 1000)
    assert await Client(stream).closed_by_broker()

    client = await Client.connect(secure_broker.ports["SASL_PLAINTEXT"])
    await scram_login(client, "SCRAM-SHA-256")
    topics = [METADATA_REQUEST.cls.MetadataRequestTopic(name=f"t{i:06d}" * 10)
              for i in range(10_000)]  # fmt: skip
    body = METADATA_REQUEST.cls(topics=topics, allow_auto_topic_creation=False)
    assert len(ClientCodec(client_id="size").encode_request(METADATA, 12, body)) > 600_000
    response = await client.call(METADATA, 12, body)
    assert len(response.topics) == 10_000
    await assert_still_serving(secure_broker)
