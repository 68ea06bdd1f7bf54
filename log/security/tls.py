"""TLS contexts from a node's `ssl.*` settings (PEM files), Python's `ssl` module.

    ssl.certificate.location   PEM: this node's certificate (chain, leaf first)
    ssl.key.location           PEM: its private key (may be the same file as the certificate)
    ssl.key.password           the key's password, when it is encrypted
    ssl.ca.location            PEM: the CA certificates trusted for peers (client certificates
                               on our listeners; other brokers' certificates for replica fetchers)
    ssl.client.auth            required | requested | none (Kafka's names; mTLS)

The controller listener (`CONTROLLER:SSL` in listener.security.protocol.map) uses the same
settings: controller_contexts gives a controller node its server context and every node the
client context it reaches the controllers with (None, None when the listener is PLAINTEXT);
with ssl.client.auth=required and an authorizer, controller_peer_check admits only brokers
whose certificate's principal is a super user.

TLS 1.2 is the minimum on both sides. A listener's principal comes from the client
certificate's subject when one was verified (principal.py).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from typing import Any

from log.common.node_config import ConfigError, NodeConfig
from log.security.authorizer import AuthorizerConfig
from log.security.principal import principal_from_certificate

_VERIFY_MODES = {
    "required": ssl.CERT_REQUIRED,
    "requested": ssl.CERT_OPTIONAL,
    "none": ssl.CERT_NONE,
}


def server_context(props: Mapping[str, Any]) -> ssl.SSLContext:
    """The context of an SSL / SASL_SSL listener; ConfigError names what is missing or bad."""
    cert, key = props["ssl.certificate.location"], props["ssl.key.location"]
    if not cert:
        raise ConfigError("ssl.certificate.location is required for an SSL or SASL_SSL listener")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(context, props, cert, key)
    client_auth = props["ssl.client.auth"]
    if client_auth != "none":
        if not props["ssl.ca.location"]:
            raise ConfigError(f"ssl.client.auth={client_auth} needs ssl.ca.location")
        _load_ca(context, props["ssl.ca.location"])
    context.verify_mode = _VERIFY_MODES[client_auth]
    return context


def client_context(props: Mapping[str, Any]) -> ssl.SSLContext:
    """The context a broker connects to another broker's SSL / SASL_SSL listener with: trusts
    ssl.ca.location (else the system's CAs), presents this node's certificate when it has one
    (the peer may require it), checks the host name when ssl.endpoint.identification.algorithm
    is https (Kafka's default)."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if props["ssl.ca.location"]:
        _load_ca(context, props["ssl.ca.location"])
    if props["ssl.certificate.location"]:
        _load_chain(context, props, props["ssl.certificate.location"], props["ssl.key.location"])
    context.check_hostname = props["ssl.endpoint.identification.algorithm"].lower() == "https"
    return context


def controller_contexts(config: NodeConfig) -> tuple[ssl.SSLContext | None, ssl.SSLContext | None]:
    """(server context of this controller's listener or None, client context for reaching
    the controllers or None): both None unless the controller listener is SSL."""
    if config.controller_security_protocol != "SSL":
        return None, None
    server = server_context(config.props) if "controller" in config.roles else None
    return server, client_context(config.props)


def controller_peer_check(config: NodeConfig) -> Callable[[bytes | None], str] | None:
    """With a CONTROLLER:SSL listener, ssl.client.auth=required and an authorizer configured:
    a check of each broker's verified certificate, its principal (principal.py) must be one
    of `super.users` (the reason it is refused, else ""). None when any of the three is off:
    the cluster secret alone then authenticates brokers."""
    if (
        config.controller_security_protocol != "SSL"
        or config.props["ssl.client.auth"] != "required"
    ):
        return None
    authorizer = AuthorizerConfig.from_props(config.props)
    if not authorizer.enabled:
        return None

    def check(certificate_der: bytes | None) -> str:
        principal = str(principal_from_certificate(certificate_der))
        if principal in authorizer.super_users:
            return ""
        return f"{principal} is not in super.users: not allowed to act as a broker"

    return check


def _load_chain(context: ssl.SSLContext, props: Mapping[str, Any], cert: str, key: str) -> None:
    try:
        context.load_cert_chain(cert, key or None, password=props["ssl.key.password"] or None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"ssl.certificate.location / ssl.key.location: {exc}") from None


def _load_ca(context: ssl.SSLContext, path: str) -> None:
    try:
        context.load_verify_locations(cafile=path)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"ssl.ca.location: {exc}") from None
