"""What a listener's security protocol asks of each connection: the trio side of log/security.

    security = ListenerSecurity.build(config, "SASL_SSL")      # once per listener, at start
    stream = await security.secure(stream, peer)               # TLS handshake (SSL, SASL_SSL)
    authenticator = security.new_authenticator()               # SASL state (SASL_*), else None

`secure` wraps the socket in trio's SSLStream and runs the handshake within
TLS_HANDSHAKE_TIMEOUT_S; a peer that speaks no TLS (a plaintext Kafka client, garbage, a
certificate we do not trust) gets a debug/info line naming it and the connection closes
(TlsHandshakeFailed): it is the peer's doing, never an error of ours. Credential stores and
TLS contexts are built once per node and shared by its listeners.
"""

from __future__ import annotations

import logging
import secrets
import ssl
from dataclasses import dataclass
from typing import Any

import trio

from log.common.node_config import ConfigError, NodeConfig
from log.security import tls
from log.security.authenticator import SUPPORTED_MECHANISMS, SaslServerAuthenticator
from log.security.credentials import CredentialStore, ScramSource
from log.security.jaas import parse_jaas_config
from log.security.principal import ANONYMOUS, KafkaPrincipal, principal_from_certificate
from log.security.scram import SCRAM_MECHANISMS

logger = logging.getLogger(__name__)

TLS_HANDSHAKE_TIMEOUT_S = 10.0
SALT_BYTES = 16
NONCE_BYTES = 24


class TlsHandshakeFailed(Exception):
    """The peer did not complete a TLS handshake (its reason is the message)."""


def enabled_mechanisms(config: NodeConfig) -> tuple[str, ...]:
    names = tuple(
        n.strip().upper() for n in config.props["sasl.enabled.mechanisms"].split(",") if n.strip()
    )
    unknown = set(names) - set(SUPPORTED_MECHANISMS)
    if unknown or not names:
        raise ConfigError(
            f"sasl.enabled.mechanisms: {sorted(unknown) or 'none'} (supported: "
            f"{', '.join(SUPPORTED_MECHANISMS)})"
        )
    return names


@dataclass
class ListenerSecurity:
    security_protocol: str
    ssl_context: ssl.SSLContext | None
    mechanisms: tuple[str, ...]
    credentials: CredentialStore | None
    reauth_ms: int

    @classmethod
    def build_all(
        cls, config: NodeConfig, scram_source: ScramSource | None = None
    ) -> dict[str, ListenerSecurity]:
        """Every client listener's security, by listener name (ConfigError when incomplete).
        `scram_source`: SCRAM credentials from the metadata image, asked first."""
        protocols = {e.listener: config.security_protocol(e.listener)
                     for e in config.broker_listeners}  # fmt: skip
        context = None
        if any(p in ("SSL", "SASL_SSL") for p in protocols.values()):
            context = tls.server_context(config.props)
        mechanisms: tuple[str, ...] = ()
        credentials = None
        if any(p.startswith("SASL_") for p in protocols.values()):
            mechanisms = enabled_mechanisms(config)
            jaas = parse_jaas_config(config.props["sasl.jaas.config"])
            scram = tuple(m for m in mechanisms if m in SCRAM_MECHANISMS)
            credentials = CredentialStore(
                jaas,
                lambda: secrets.token_bytes(SALT_BYTES),
                scram_source=scram_source,
                scram_mechanisms=scram,
            )
        reauth_ms = config.props["connections.max.reauth.ms"]
        return {
            name: cls(
                protocol,
                context if protocol.endswith("SSL") else None,
                mechanisms,
                credentials,
                reauth_ms,
            )  # fmt: skip
            for name, protocol in protocols.items()
        }

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    async def secure(self, stream: trio.SocketStream) -> tuple[Any, KafkaPrincipal]:
        """The stream to speak Kafka on and the connection's principal so far."""
        if self.ssl_context is None:
            return stream, ANONYMOUS
        ssl_stream = trio.SSLStream(stream, self.ssl_context, server_side=True)
        try:
            with trio.fail_after(TLS_HANDSHAKE_TIMEOUT_S):
                await ssl_stream.do_handshake()
        except trio.TooSlowError:
            raise TlsHandshakeFailed("TLS handshake timed out") from None
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise TlsHandshakeFailed(f"TLS handshake failed: {exc.__cause__ or exc}") from None
        return ssl_stream, principal_from_certificate(ssl_stream.getpeercert(binary_form=True))

    def new_authenticator(self) -> SaslServerAuthenticator | None:
        if not self.uses_sasl:
            return None
        assert self.credentials is not None
        return SaslServerAuthenticator(
            self.mechanisms,
            self.credentials,
            lambda: secrets.token_urlsafe(NONCE_BYTES),
            self.reauth_ms,
        )
