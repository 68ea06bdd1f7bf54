"""What every SASL mechanism's server answers: a step (bytes for the client, done or not), or
SaslAuthenticationFailed (answered SASL_AUTHENTICATION_FAILED with its message, then close)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class SaslAuthenticationFailed(Exception):
    """Bad credentials or a malformed exchange; the message goes to the client, as Kafka's."""


@dataclass(frozen=True, slots=True)
class SaslStep:
    challenge: bytes
    complete: bool


class SaslServer(Protocol):
    complete: bool
    authorization_id: str

    def evaluate(self, response: bytes) -> SaslStep: ...
