"""ConnectionQuotas: how many client connections the Kafka listener holds, in all and per IP.

Kafka's ConnectionQuotas with its settings: `max.connections` and `max.connections.per.ip`
(both unlimited by default in Kafka), `max.connections.per.ip.overrides` (`host:count,...`).
Unlimited is not safe for a process with a descriptor limit: running out of descriptors would
fail segment rolls and checkpoint writes, not just accepts. So the effective total is also
capped at half the soft RLIMIT_NOFILE (the other half stays for logs, indexes being
descriptor-free, and the node's own sockets). A connection over a limit is accepted and closed
at once (Kafka parks the acceptor instead; closing keeps the accept queue moving and tells the
client right away). Sans-IO: the listener calls `try_open(ip)` per accepted socket and
`close(ip)` when it ends.
"""

from __future__ import annotations

import resource
from collections import Counter

UNLIMITED = 2**31 - 1  # Kafka's Int.MaxValue default


def descriptor_cap() -> int:
    """Half the soft RLIMIT_NOFILE (UNLIMITED when there is none)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return UNLIMITED if soft == resource.RLIM_INFINITY else max(1, soft // 2)


class ConnectionQuotas:
    def __init__(
        self,
        max_connections: int = UNLIMITED,
        max_connections_per_ip: int = UNLIMITED,
        per_ip_overrides: dict[str, int] | None = None,
        cap: int | None = None,
    ) -> None:
        self.max_connections = min(max_connections, descriptor_cap() if cap is None else cap)
        self.max_connections_per_ip = max_connections_per_ip
        self.per_ip_overrides = dict(per_ip_overrides or {})
        self.total = 0
        self.by_ip: Counter[str] = Counter()

    def limit_for(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.max_connections_per_ip)

    def try_open(self, ip: str) -> str | None:
        """Count a new connection from `ip`; None when allowed, else why it is refused."""
        if self.by_ip[ip] >= self.limit_for(ip):
            return f"max.connections.per.ip {self.limit_for(ip)} reached for {ip}"
        if self.total >= self.max_connections:
            return f"max.connections {self.max_connections} reached"
        self.total += 1
        self.by_ip[ip] += 1
        return None

    def close(self, ip: str) -> None:
        self.total -= 1
        self.by_ip[ip] -= 1
        if not self.by_ip[ip]:
            del self.by_ip[ip]
