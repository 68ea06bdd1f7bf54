"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677): credentials, server and client.

    client-first   n,,n=USER,r=CNONCE                      (gs2 header "n,,": no channel binding)
    server-first   r=CNONCE+SNONCE,s=SALT_B64,i=ITERATIONS
    client-final   c=biws,r=CNONCE+SNONCE,p=PROOF_B64
    server-final   v=SERVER_SIGNATURE_B64

    SaltedPassword = PBKDF2-HMAC-H(password, salt, iterations)
    ClientKey = HMAC(SaltedPassword, "Client Key"); StoredKey = H(ClientKey)
    ServerKey = HMAC(SaltedPassword, "Server Key")
    AuthMessage = client-first-bare "," server-first "," client-final-without-proof
    ClientProof = ClientKey XOR HMAC(StoredKey, AuthMessage)
    ServerSignature = HMAC(ServerKey, AuthMessage)

The server keeps only (salt, iterations, StoredKey, ServerKey): Kafka's ScramCredential, and
what a UserScramCredentialsRecord carries. It checks H(ClientProof XOR ClientSignature) ==
StoredKey. Primitives are hashlib's and hmac's; nonces come from the caller (sans-IO).
Iterations: Kafka accepts 4096..16384.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass

from log.security.sasl_exchange import SaslAuthenticationFailed, SaslStep

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
MAX_MESSAGE_BYTES = 4096


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    mechanism_name: str
    hash_name: str
    mechanism_type: int  # Kafka's ScramMechanism.type(): 1 = SHA-256, 2 = SHA-512

    def h(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", 1)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", 2)
SCRAM_MECHANISMS = {m.mechanism_name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def salted_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> bytes:
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def make_credential(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> ScramCredential:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be in [{MIN_ITERATIONS}, {MAX_ITERATIONS}]")
    salted = salted_password(mechanism, password, salt, iterations)
    client_key = mechanism.hmac(salted, b"Client Key")
    return ScramCredential(
        salt, mechanism.h(client_key), mechanism.hmac(salted, b"Server Key"), iterations
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(value: str) -> bytes:
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise SaslAuthenticationFailed("Invalid SCRAM message: bad base64") from None


def _attributes(message: str, what: str) -> list[tuple[str, str]]:
    pairs = []
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise SaslAuthenticationFailed(f"Invalid SCRAM {what}: {part[:20]!r}")
        pairs.append((key, value))
    return pairs


def _sasl_name(value: str) -> str:
    """RFC 5802 saslname: `=2C` is `,`, `=3D` is `=`; any other `=` is malformed."""
    if value.replace("=2C", "").replace("=3D", "").count("="):
        raise SaslAuthenticationFailed("Invalid SCRAM user name")
    return value.replace("=2C", ",").replace("=3D", "=")


def _escape_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _decode(message: bytes) -> str:
    if len(message) > MAX_MESSAGE_BYTES:
        raise SaslAuthenticationFailed("SCRAM message too long")
    try:
        return bytes(message).decode("utf-8")
    except UnicodeDecodeError:
        raise SaslAuthenticationFailed("Invalid SCRAM message: not UTF-8") from None


class ScramServer:
    """Two steps: client-first -> server-first, client-final -> server-final (complete)."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        credential_of: Callable[[str], ScramCredential | None],
        server_nonce: str,
    ) -> None:
        assert server_nonce and "," not in server_nonce
        self.mechanism = mechanism
        self._credential_of = credential_of
        self._server_nonce = server_nonce
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2_header = ""
        self._nonce = ""
        self._step = 0
        self.complete = False
        self.authorization_id = ""

    def evaluate(self, response: bytes) -> SaslStep:
        message = _decode(response)
        if self._step == 0:
            self._step = 1
            return self._client_first(message)
        if self._step == 1:
            self._step = 2
            return self._client_final(message)
        raise SaslAuthenticationFailed("SCRAM exchange already finished")

    def _client_first(self, message: str) -> SaslStep:
        # gs2-header: "n," or "y," (no channel binding), then "[a=authzid],"
        cbind, sep1, rest = message.partition(",")
        authzid_part, sep2, bare = rest.partition(",")
        if not (sep1 and sep2) or cbind not in ("n", "y"):
            raise SaslAuthenticationFailed("Invalid SCRAM client-first message (gs2 header)")
        if authzid_part and not authzid_part.startswith("a="):
            raise SaslAuthenticationFailed("Invalid SCRAM client-first message (authzid)")
        attributes = _attributes(bare, "client-first message")
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r":
            raise SaslAuthenticationFailed("Invalid SCRAM client-first message")
        username = _sasl_name(attributes[0][1])
        client_nonce = attributes[1][1]
        authzid = _sasl_name(authzid_part[2:]) if authzid_part else ""
        if not username or not client_nonce:
            raise SaslAuthenticationFailed("Invalid SCRAM client-first message")
        if authzid and authzid != username:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        credential = self._credential_of(username)
        if credential is None:
            raise SaslAuthenticationFailed("Authentication failed: Invalid user credentials")
        self._credential = credential
        self.authorization_id = username
        self._gs2_header = f"{cbind},{authzid_part},"
        self._client_first_bare = bare
        self._nonce = client_nonce + self._server_nonce
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        return SaslStep(self._server_first.encode(), complete=False)

    def _client_final(self, message: str) -> SaslStep:
        credential = self._credential
        assert credential is not None
        without_proof, sep, proof_part = message.rpartition(",p=")
        if not sep:
            raise SaslAuthenticationFailed("Invalid SCRAM client-final message: no proof")
        attributes = dict(_attributes(without_proof, "client-final message"))
        if attributes.get("c") != _b64(self._gs2_header.encode()):
            raise SaslAuthenticationFailed("Invalid SCRAM client-final message: channel binding")
        # Kafka's ScramSaslServer accepts a nonce that *ends* with ours (old librdkafka, e.g.
        # kcat's, sends the client nonce twice); the nonce is signed in AuthMessage either way.
        if not attributes.get("r", "").endswith(self._nonce):
            raise SaslAuthenticationFailed("Invalid SCRAM client-final message: nonce mismatch")
        proof = _unb64(proof_part)
        m = self.mechanism
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = m.hmac(credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise SaslAuthenticationFailed("Authentication failed: Invalid client proof")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(m.h(client_key), credential.stored_key):
            raise SaslAuthenticationFailed("Authentication failed: Invalid user credentials")
        self.complete = True
        server_signature = m.hmac(credential.server_key, auth_message)
        return SaslStep(f"v={_b64(server_signature)}".encode(), complete=True)


class ScramClient:
    """The client side (replica fetchers, tools): first() -> bytes; final(server_first) ->
    bytes; verify(server_final) raises SaslAuthenticationFailed on a forged server."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str, nonce: str):
        self.mechanism = mechanism
        self._password = password
        self._first_bare = f"n={_escape_name(username)},r={nonce}"
        self._nonce = nonce
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        message = _decode(server_first)
        attributes = dict(_attributes(message, "server-first message"))
        nonce, salt, iterations = attributes.get("r", ""), attributes.get("s"), attributes.get("i")
        if not nonce.startswith(self._nonce) or salt is None or not (iterations or "").isdigit():
            raise SaslAuthenticationFailed("Invalid SCRAM server-first message")
        if not MIN_ITERATIONS <= int(iterations or 0) <= MAX_ITERATIONS:
            raise SaslAuthenticationFailed("SCRAM iterations out of range")
        m = self.mechanism
        salted = salted_password(m, self._password, _unb64(salt), int(iterations or 0))
        client_key = m.hmac(salted, b"Client Key")
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        auth_message = f"{self._first_bare},{message},{without_proof}".encode()
        signature = m.hmac(m.h(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = m.hmac(m.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        message = _decode(server_final)
        if not message.startswith("v=") or not hmac.compare_digest(
            _unb64(message[2:]), self._server_signature
        ):
            raise SaslAuthenticationFailed(f"SCRAM server signature invalid: {message[:40]!r}")
