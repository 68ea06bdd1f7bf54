"""SASL PLAIN (RFC 4616), server side: one client message, no challenge.

    message = [authzid] NUL authcid NUL passwd        (UTF-8)

The authorization id must be empty or the authentication id (Kafka's PlainSaslServer). The
password is compared in constant time against the configured user's.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from log.security.sasl_exchange import SaslAuthenticationFailed, SaslStep

MECHANISM = "PLAIN"
MAX_MESSAGE_BYTES = 4096  # three short strings; anything longer is not PLAIN


class PlainServer:
    """`evaluate(client_bytes)` once: a final SaslStep, or SaslAuthenticationFailed."""

    def __init__(self, password_of: Callable[[str], str | None]) -> None:
        self._password_of = password_of
        self.complete = False
        self.authorization_id = ""

    def evaluate(self, response: bytes) -> SaslStep:
        if self.complete:
            raise SaslAuthenticationFailed("PLAIN takes one message")
        if len(response) > MAX_MESSAGE_BYTES:
            raise SaslAuthenticationFailed("PLAIN message too long")
        parts = bytes(response).split(b"\x00")
        if len(parts) != 3:
            raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, username, password = (part.decode("utf-8") for part in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not username or not password:
            raise SaslAuthenticationFailed("Authentication failed: username or password empty")
        if authzid and authzid != username:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        expected = self._password_of(username)
        # Compare against something even for an unknown user: the same time either way.
        valid = hmac.compare_digest(password.encode(), (expected or "\x00" + password).encode())
        if expected is None or not valid:
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        self.complete = True
        self.authorization_id = username
        return SaslStep(b"", complete=True)


def plain_client_message(username: str, password: str) -> bytes:
    return b"\x00" + username.encode() + b"\x00" + password.encode()
