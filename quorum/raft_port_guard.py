"""Bounds on what an unauthenticated peer can make the Raft port hold.

pysyncobj authenticates a connection by its first message: it must decrypt with the cluster's
password (Fernet). Until then it still buffers whatever arrives, up to the length its 4-byte
prefix claims (2 GiB), for as long as bytes keep coming, on as many connections as anyone
opens. Two guards, installed by importing this module (quorum/raft.py does):

* `GuardedTcpConnection` replaces pysyncobj's TcpConnection for accepted sockets: before the
  first message decrypted (pysyncobj then sets `sendRandKey`/`recvRandKey`), a connection that
  has buffered more than MAX_PREAUTH_BUFFER_BYTES is closed.
* `admit_incoming(transport, conn, now)` (the transport's new-connection hook) keeps at most
  MAX_UNIDENTIFIED_CONNECTIONS connections that have not said which node they are, and none
  for longer than PREAUTH_DEADLINE_S: the oldest goes first, so a flood cannot keep a
  restarted peer from getting back in for long (its handshake takes milliseconds).
"""

from __future__ import annotations

import logging
from typing import Any

from pysyncobj import tcp_server as _tcp_server
from pysyncobj.tcp_connection import TcpConnection

logger = logging.getLogger(__name__)

MAX_PREAUTH_BUFFER_BYTES = 1 << 16  # the first message is a 32-byte key, encrypted
MAX_UNIDENTIFIED_CONNECTIONS = 16
PREAUTH_DEADLINE_S = 5.0


def _authenticated(conn: TcpConnection) -> bool:
    return conn.sendRandKey is not None or conn.recvRandKey is not None


class GuardedTcpConnection(TcpConnection):
    """TcpConnection whose read buffer is bounded until the peer proved the password."""

    def _TcpConnection__processRead(self) -> bool:  # noqa: N802 - overrides pysyncobj's private
        more = TcpConnection._TcpConnection__processRead(self)
        if (
            not _authenticated(self)
            and len(self._TcpConnection__readBuffer) > MAX_PREAUTH_BUFFER_BYTES
        ):
            logger.info("raft port: closing an unauthenticated connection that sent more than "
                        "%d bytes", MAX_PREAUTH_BUFFER_BYTES)  # fmt: skip
            self.disconnect()
            return False
        return more


_tcp_server.TcpConnection = GuardedTcpConnection  # accepted sockets use it


def admit_incoming(transport: Any, conn: TcpConnection, now: float) -> None:
    """Record `conn` as unidentified and evict what exceeds the bounds (oldest first)."""
    admitted: dict[TcpConnection, float] = transport.__dict__.setdefault("_guard_admitted", {})
    for old in [c for c in admitted if c not in transport._unknownConnections]:
        del admitted[old]  # identified (or gone) since
    for old, since in sorted(admitted.items(), key=lambda item: item[1]):
        if now - since > PREAUTH_DEADLINE_S or len(admitted) >= MAX_UNIDENTIFIED_CONNECTIONS:
            del admitted[old]
            transport._unknownConnections.discard(old)
            old.disconnect()
    admitted[conn] = now
