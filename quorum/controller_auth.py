"""The controller listener's handshake: both ends prove they hold the cluster's secret.

The CONTROLLER listener carries broker registration and heartbeats, ISR changes, controlled
shutdowns, topic changes and the whole metadata image: anyone who can speak to it can fence
the cluster. So, before any request, each connection runs a mutual challenge-response over
the secret every node already holds (`controller.quorum.password`, which `quorumlog up`
generates and which also keys the Raft transport):

    server -> client   MAGIC | server_nonce                                    (4 + 16 bytes)
    client -> server   client_nonce | HMAC(secret, "client" | server_nonce | client_nonce)
    server -> client   HMAC(secret, "server" | client_nonce | server_nonce)     (32 bytes)

HMAC-SHA256 from the standard library; fresh random nonces on both sides, so a recorded
handshake replays nowhere, and the secret never crosses the wire. A server that gets anything
else closes the connection; so does a client (it would otherwise trust a fake controller's
metadata). This authenticates, it does not encrypt: TLS for the listener is the security
issue's. The server bounds what an unauthenticated peer can cost: exactly 48 bytes read, within
HANDSHAKE_TIMEOUT_S, on one of a few handshake slots (service.py).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

import trio

MAGIC = b"QLC1"
NONCE_BYTES = 16
MAC_BYTES = 32
HELLO_BYTES = len(MAGIC) + NONCE_BYTES
PROOF_BYTES = NONCE_BYTES + MAC_BYTES
HANDSHAKE_TIMEOUT_S = 5.0


class HandshakeError(Exception):
    """The peer does not hold the cluster's secret (or does not speak this protocol)."""


def _mac(secret: str, *parts: bytes) -> bytes:
    return hmac.new(secret.encode("utf-8"), b"".join(parts), hashlib.sha256).digest()


async def _receive_exactly(stream: trio.abc.ReceiveStream, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = await stream.receive_some(count - len(data))
        if not chunk:
            raise HandshakeError("connection closed during the handshake")
        data += chunk
    return data


async def accept(stream: trio.abc.Stream, secret: str) -> None:
    """Server side; raises HandshakeError (or trio's stream errors) when the peer fails."""
    server_nonce = secrets.token_bytes(NONCE_BYTES)
    await stream.send_all(MAGIC + server_nonce)
    proof = await _receive_exactly(stream, PROOF_BYTES)
    client_nonce, mac = proof[:NONCE_BYTES], proof[NONCE_BYTES:]
    if not hmac.compare_digest(mac, _mac(secret, b"client", server_nonce, client_nonce)):
        raise HandshakeError("client proof does not match the cluster secret")
    await stream.send_all(_mac(secret, b"server", client_nonce, server_nonce))


async def connect(stream: trio.abc.Stream, secret: str) -> None:
    """Client side; raises HandshakeError when the server is not a controller of this cluster."""
    hello = await _receive_exactly(stream, HELLO_BYTES)
    if hello[: len(MAGIC)] != MAGIC:
        raise HandshakeError("not a quorumlog controller listener")
    server_nonce = hello[len(MAGIC) :]
    client_nonce = secrets.token_bytes(NONCE_BYTES)
    mac = _mac(secret, b"client", server_nonce, client_nonce)
    await stream.send_all(client_nonce + mac)
    answer = await _receive_exactly(stream, MAC_BYTES)
    if not hmac.compare_digest(answer, _mac(secret, b"server", client_nonce, server_nonce)):
        raise HandshakeError("server proof does not match the cluster secret")
