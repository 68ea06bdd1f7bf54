"""How this broker connects to another broker's inter-broker listener (replica fetching):
TCP, then TLS and/or SASL as `listener.security.protocol.map` says for
`inter.broker.listener.name` -- Kafka's rule that replication uses the inter-broker listener's
security.

    connect = inter_broker_connector(config)         # once per node
    stream = await connect(host, port)               # ready for Kafka requests

TLS uses tls.client_context (ssl.ca.location trusted, this node's certificate presented when
it has one: the peer may require it). SASL logs in as `sasl.jaas.config`'s username/password
with `sasl.mechanism.inter.broker.protocol` (SaslHandshake v1 + SaslAuthenticate v1) and
verifies a SCRAM server's signature. A refused login is an InterBrokerAuthenticationError (the
fetcher backs off and retries, like any lost connection).
"""

from __future__ import annotations

import secrets
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from log.common.errors import ErrorCode, KafkaError
from log.common.node_config import ConfigError, NodeConfig
from log.protocol.client_codec import ClientCodec
from log.protocol.sasl import SASL_AUTHENTICATE_REQUEST, SASL_HANDSHAKE_REQUEST
from log.security import tls
from log.security.jaas import parse_jaas_config
from log.security.plain import MECHANISM as PLAIN
from log.security.plain import plain_client_message
from log.security.sasl_exchange import SaslAuthenticationFailed
from log.security.scram import SCRAM_MECHANISMS, ScramClient

Connector = Callable[[str, int], Awaitable[Any]]  # (host, port) -> a trio Stream
MAX_READ_BYTES = 1 << 16
HANDSHAKE_VERSION = 1
AUTHENTICATE_VERSION = 1


class InterBrokerAuthenticationError(KafkaError):
    error_code = ErrorCode.SASL_AUTHENTICATION_FAILED


async def _call(stream: Any, codec: ClientCodec, api_key: int, version: int, body: Any) -> Any:
    await stream.send_all(codec.encode_request(api_key, version, body))
    while True:
        data = await stream.receive_some(MAX_READ_BYTES)
        if not data:
            raise InterBrokerAuthenticationError("the broker closed the connection during SASL")
        responses = codec.receive_data(data)
        if responses:
            return responses[0].body


async def sasl_login(stream: Any, mechanism: str, username: str, password: str) -> None:
    """Authenticate `stream` as `username`; InterBrokerAuthenticationError when refused."""
    codec = ClientCodec(client_id="inter-broker-sasl", max_in_flight=1)
    handshake = await _call(stream, codec, 17, HANDSHAKE_VERSION,
                            SASL_HANDSHAKE_REQUEST.cls(mechanism=mechanism))  # fmt: skip
    if handshake.error_code:
        raise InterBrokerAuthenticationError(
            f"SaslHandshake {mechanism}: {ErrorCode(handshake.error_code).name} "
            f"(the broker offers {handshake.mechanisms})"
        )
    A = SASL_AUTHENTICATE_REQUEST.cls

    async def step(token: bytes) -> bytes:
        response = await _call(stream, codec, 36, AUTHENTICATE_VERSION, A(auth_bytes=token))
        if response.error_code:
            raise InterBrokerAuthenticationError(
                f"SaslAuthenticate as {username}: {ErrorCode(response.error_code).name}: "
                f"{response.error_message}"
            )
        return bytes(response.auth_bytes)

    if mechanism == PLAIN:
        await step(plain_client_message(username, password))
        return
    client = ScramClient(SCRAM_MECHANISMS[mechanism], username, password, secrets.token_urlsafe(24))
    server_first = await step(client.first())
    try:
        client.verify(await step(client.final(server_first)))
    except SaslAuthenticationFailed as exc:
        raise InterBrokerAuthenticationError(str(exc)) from None


def inter_broker_connector(config: NodeConfig) -> Connector:
    """The connect function for `config`'s inter-broker listener (ConfigError if incomplete)."""
    protocol = config.security_protocol(config.inter_broker_listener_name)
    context = tls.client_context(config.props) if protocol.endswith("SSL") else None
    mechanism = ""
    username = password = ""
    if protocol.startswith("SASL_"):
        mechanism = config.props["sasl.mechanism.inter.broker.protocol"].strip().upper()
        if mechanism != PLAIN and mechanism not in SCRAM_MECHANISMS:
            raise ConfigError(f"sasl.mechanism.inter.broker.protocol: {mechanism!r}")
        jaas = parse_jaas_config(config.props["sasl.jaas.config"])
        if not jaas.username:
            raise ConfigError(
                f"sasl.jaas.config needs username/password: inter-broker listener is {protocol}"
            )
        username, password = jaas.username, jaas.password

    return secure_connector(context, mechanism, username, password)


def secure_connector(
    context: ssl.SSLContext | None, mechanism: str, username: str, password: str
) -> Connector:
    """TCP, then TLS with `context` (unless None), then a SASL login with `mechanism` (unless
    empty) as `username`: the inter-broker connector's steps, also the CLI's
    (tools/client_security.py)."""

    async def connect(host: str, port: int) -> Any:
        stream: Any = await trio.open_tcp_stream(host, port)
        try:
            if context is not None:
                stream = trio.SSLStream(stream, context, server_hostname=host)
                await stream.do_handshake()
            if mechanism:
                await sasl_login(stream, mechanism, username, password)
        except BaseException:
            with trio.CancelScope(shield=True):
                await stream.aclose()
            raise
        return stream

    return connect
