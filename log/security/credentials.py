"""The users a broker's SASL listeners accept.

PLAIN checks `sasl.jaas.config`'s `user_NAME="password"` entries (Kafka's PlainLoginModule
server options). SCRAM needs (salt, iterations, StoredKey, ServerKey) per user and mechanism:
Kafka keeps them in the metadata log (UserScramCredentialsRecord); until quorumlog does (not
built yet), the same jaas users are given SCRAM credentials at start-up, derived once with a
fresh random salt (`salt_of` is injected) at MIN_ITERATIONS, so the password never leaves the
configuration. `scram_source`, when given, is asked first (the metadata image's view).
"""

from __future__ import annotations

from collections.abc import Callable

from log.security.jaas import JaasConfig
from log.security.scram import (
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramCredential,
    ScramMechanism,
    make_credential,
)

ScramSource = Callable[[str, str], ScramCredential | None]  # (mechanism name, user)


class CredentialStore:
    def __init__(
        self,
        jaas: JaasConfig,
        salt_of: Callable[[], bytes],
        scram_source: ScramSource | None = None,
        scram_mechanisms: tuple[str, ...] = tuple(SCRAM_MECHANISMS),
    ) -> None:
        self._plain_users = dict(jaas.users)
        self._scram_source = scram_source
        self._scram: dict[tuple[str, str], ScramCredential] = {}
        for name in scram_mechanisms:
            mechanism: ScramMechanism = SCRAM_MECHANISMS[name]
            for user, password in jaas.users.items():
                self._scram[(name, user)] = make_credential(
                    mechanism, password, salt_of(), MIN_ITERATIONS
                )

    def plain_password(self, user: str) -> str | None:
        return self._plain_users.get(user)

    def scram_credential(self, mechanism_name: str, user: str) -> ScramCredential | None:
        if self._scram_source is not None:
            credential = self._scram_source(mechanism_name, user)
            if credential is not None:
                return credential
        return self._scram.get((mechanism_name, user))
