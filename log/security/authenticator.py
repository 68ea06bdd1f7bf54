"""One connection's SASL state on a SASL_PLAINTEXT / SASL_SSL listener (Kafka's
SaslServerAuthenticator), sans-IO: the broker's connection loop asks it about every request.

    HANDSHAKE --SaslHandshake(enabled mechanism)--> AUTHENTICATE --SaslAuthenticate...--> COMPLETE
    COMPLETE --SaslHandshake(same mechanism), KIP-368 re-authentication--> AUTHENTICATE
    any state --a failure--> FAILED (answer, then close)

Before COMPLETE only ApiVersions, SaslHandshake and SaslAuthenticate pass: any other request
closes the connection unanswered, as Kafka does ("Unexpected Kafka request during SASL
handshake"). A mechanism not enabled answers UNSUPPORTED_SASL_MECHANISM; SaslAuthenticate out
of order ILLEGAL_SASL_STATE; bad credentials SASL_AUTHENTICATION_FAILED with the mechanism's
message; each then closes. With `connections.max.reauth.ms` > 0 the session lasts that long
(SaslAuthenticate v1+ tells the client, which re-authenticates in time); a request after expiry
closes the connection. Re-authentication must keep the principal.

SaslHandshake v0 (clients pinned to a pre-1.0 protocol, e.g. kafka-python with
api_version=(0, 11)): the tokens then come raw, without SaslAuthenticate around them
(`expects_raw_token`); the driver feeds them to `authenticate` all the same, and a failure just
closes the connection (v0 has no way to say why), as Kafka does. Re-authentication needs v1+.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from log.common.errors import ErrorCode
from log.security.credentials import CredentialStore
from log.security.plain import MECHANISM as PLAIN
from log.security.plain import PlainServer
from log.security.principal import USER_TYPE, KafkaPrincipal
from log.security.sasl_exchange import SaslAuthenticationFailed, SaslServer
from log.security.scram import SCRAM_MECHANISMS, ScramServer

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
API_VERSIONS_KEY = 18
SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
MAX_AUTHENTICATE_ROUNDS = 4  # SCRAM takes two, PLAIN one


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class HandshakeResult:
    error_code: ErrorCode
    mechanisms: list[str]
    close: bool


@dataclass(frozen=True, slots=True)
class AuthenticateResult:
    error_code: ErrorCode
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int
    close: bool


class SaslServerAuthenticator:
    def __init__(
        self,
        enabled_mechanisms: tuple[str, ...],
        credentials: CredentialStore,
        nonce_factory: Callable[[], str],
        reauth_ms: int = 0,
    ) -> None:
        assert set(enabled_mechanisms) <= set(SUPPORTED_MECHANISMS)
        self.enabled_mechanisms = list(enabled_mechanisms)
        self._credentials = credentials
        self._nonce_factory = nonce_factory
        self._reauth_ms = reauth_ms
        self.state = SaslState.HANDSHAKE
        self.mechanism = ""
        self.principal: KafkaPrincipal | None = None
        self.session_expiry_ms: int | None = None
        self._server: SaslServer | None = None
        self._rounds = 0
        self._raw_tokens = False  # SaslHandshake v0: tokens arrive without SaslAuthenticate

    def admits(self, api_key: int, now_ms: int) -> bool:
        """May a request of `api_key` be handled now? False: close the connection."""
        if api_key in (API_VERSIONS_KEY, SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY):
            return self.state is not SaslState.FAILED
        if self.state is not SaslState.COMPLETE:
            return False
        return self.session_expiry_ms is None or now_ms < self.session_expiry_ms

    @property
    def expects_raw_token(self) -> bool:
        """After a SaslHandshake v0, until the login ends: the next frame is a raw token."""
        return self._raw_tokens and self.state is SaslState.AUTHENTICATE

    def handshake(self, mechanism: str, version: int = 1) -> HandshakeResult:
        reauthenticating = self.state is SaslState.COMPLETE
        if self.state is not SaslState.HANDSHAKE and not reauthenticating:
            return self._fail_handshake(ErrorCode.ILLEGAL_SASL_STATE)
        if reauthenticating and version == 0:  # KIP-368 re-authentication is v1+ only
            return self._fail_handshake(ErrorCode.ILLEGAL_SASL_STATE)
        if mechanism not in self.enabled_mechanisms:
            return self._fail_handshake(ErrorCode.UNSUPPORTED_SASL_MECHANISM)
        if reauthenticating and mechanism != self.mechanism:
            return self._fail_handshake(ErrorCode.ILLEGAL_SASL_STATE)
        self.mechanism = mechanism
        self._server = self._new_server(mechanism)
        self._rounds = 0
        self._raw_tokens = version == 0
        self.state = SaslState.AUTHENTICATE
        return HandshakeResult(ErrorCode.NONE, self.enabled_mechanisms, close=False)

    def authenticate(self, auth_bytes: bytes, now_ms: int) -> AuthenticateResult:
        server = self._server
        if self.state is not SaslState.AUTHENTICATE or server is None:
            self.state = SaslState.FAILED
            return AuthenticateResult(ErrorCode.ILLEGAL_SASL_STATE,
                                      "SaslAuthenticate before SaslHandshake", b"", 0, True)  # fmt: skip
        self._rounds += 1
        try:
            if self._rounds > MAX_AUTHENTICATE_ROUNDS:
                raise SaslAuthenticationFailed("too many SASL rounds")
            step = server.evaluate(auth_bytes)
        except SaslAuthenticationFailed as exc:
            self.state = SaslState.FAILED
            return AuthenticateResult(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc), b"", 0, True)
        if not step.complete:
            return AuthenticateResult(ErrorCode.NONE, None, step.challenge, 0, False)
        principal = KafkaPrincipal(USER_TYPE, server.authorization_id)
        if self.principal is not None and principal != self.principal:
            self.state = SaslState.FAILED
            return AuthenticateResult(ErrorCode.SASL_AUTHENTICATION_FAILED,
                                      "Cannot change principals during re-authentication",
                                      b"", 0, True)  # fmt: skip
        self.principal = principal
        self.state = SaslState.COMPLETE
        self._server = None
        lifetime_ms = self._reauth_ms
        self.session_expiry_ms = now_ms + lifetime_ms if lifetime_ms > 0 else None
        return AuthenticateResult(ErrorCode.NONE, None, step.challenge, lifetime_ms, False)

    def _fail_handshake(self, code: ErrorCode) -> HandshakeResult:
        self.state = SaslState.FAILED
        return HandshakeResult(code, self.enabled_mechanisms, close=True)

    def _new_server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainServer(self._credentials.plain_password)
        credentials = self._credentials
        return ScramServer(
            SCRAM_MECHANISMS[mechanism],
            lambda user: credentials.scram_credential(mechanism, user),
            self._nonce_factory(),
        )
