"""BrokerHeartbeatTracker: which brokers the active controller still hears from (sans-IO).

Kafka's BrokerHeartbeatManager keeps each broker's last contact and fences a broker once
`broker.session.timeout.ms` (9 s) passes without a heartbeat. That bound is right for a broker
that is slow or cut off, but when a broker's process dies its kernel closes its sockets at
once, and waiting 9 s for the timer is most of a fail-over. So the tracker also knows the
connection each broker last heartbeated on: when the controller sees that connection close
and no heartbeat arrives on another one within `broker.disconnect.fence.ms` (our setting; 0
turns it off), the broker is fenced then. A live broker whose connection broke heartbeats
again at once (its heartbeat loop watches the connection), and one that gives up waiting on a
slow controller keeps the old connection open until it has been heard on a new one
(quorum/controller_client.py, make before break), so only a broker that is really gone misses
that grace.

A controller that becomes active has no connections yet: every registered broker starts its
session (last contact = activation time, Kafka's grace), so a live broker that is slow to find
the new controller (just resumed from a pause, starved of CPU) is fenced only by the session
timeout, as in Kafka. The one exception is the previous active controller's own broker when
its Raft connection is closed (the service checks): that node's process is gone, most likely
with its broker, so it gets only the disconnect grace. A previous controller that was merely
paused keeps its connections open and its broker keeps the session timeout. Brokers learn of
the change at once: a controller that loses leadership closes the connections brokers
heartbeat on, and their retries find the new one within a few hundred milliseconds. A broker that lost its connection has no
valid session either, so a restarted incarnation registers at once.

A controller that could not run for a while (its event loop blocked by a large change, its
process starved of CPU or paused) heard nobody meanwhile, but its brokers kept heartbeating:
their heartbeats wait unread in its sockets. Judged by the clock alone, every session would
have expired at once when it runs again (a 3,000-partition topic fenced every broker of a
3-node cluster that way, in the same second). So the service reports such a stall
(`on_stall`) and the time it lasted counts against no session and no grace: the controller
fences only on time it could have heard the broker in. (Kafka's controller has threads of its
own; ours shares the node's event loop with its broker.)

Nothing here reads a clock; the controller service passes `now_ms` and connection ids.
"""

from __future__ import annotations

from quorum.controller import NODE_DEFAULTS, fence_expired_brokers
from quorum.image import MetadataImage
from quorum.partition_change import ElectionPolicy
from quorum.records import MetadataRecord

SESSION_EXPIRED = "session_expired"
CONNECTION_LOST = "controller_connection_lost"


class BrokerHeartbeatTracker:
    """Last contact and heartbeat connection per broker, kept by the active controller only
    (never replicated: a new controller starts every session at its activation)."""

    def __init__(
        self,
        session_timeout_ms: int,
        disconnect_grace_ms: int = 0,
        election_defaults: ElectionPolicy = NODE_DEFAULTS,
    ) -> None:
        assert session_timeout_ms > 0 and disconnect_grace_ms >= 0
        self.session_timeout_ms = session_timeout_ms
        self.election_defaults = election_defaults
        self.disconnect_grace_ms = disconnect_grace_ms
        self.last_heartbeat_ms_by_broker: dict[int, int] = {}
        self._connection_by_broker: dict[int, int] = {}
        # Brokers with no open heartbeat connection, since when (only with a grace set).
        self._disconnected_since_ms: dict[int, int] = {}

    def on_activate(
        self,
        image: MetadataImage,
        now_ms: int,
        previous_controller_id: int = -1,
        previous_lost_ms: int | None = None,
    ) -> None:
        """A new active controller has no heartbeat connections: every broker's session
        starts now, except the previous (dead) controller's broker, whose disconnect grace
        started when that controller's connection was lost (`previous_lost_ms`, if known)."""
        self.last_heartbeat_ms_by_broker = {b: now_ms for b in image.brokers}
        self._connection_by_broker = {}
        self._disconnected_since_ms = {}
        if self.disconnect_grace_ms and image.is_live(previous_controller_id):
            since_ms = now_ms if previous_lost_ms is None else min(now_ms, previous_lost_ms)
            self._disconnected_since_ms[previous_controller_id] = since_ms

    def touch(self, broker_id: int, now_ms: int, connection_id: int | None = None) -> None:
        """Call on every heartbeat and registration that passed the broker-epoch check, with
        the id of the connection it came on."""
        self.last_heartbeat_ms_by_broker[broker_id] = now_ms
        self._disconnected_since_ms.pop(broker_id, None)
        if connection_id is not None:
            self._connection_by_broker[broker_id] = connection_id

    def on_stall(self, stall_ms: int, now_ms: int) -> None:
        """The controller could not run for the last `stall_ms`: move every last contact and
        every grace's start that long later (never past `now_ms`)."""
        for table in (self.last_heartbeat_ms_by_broker, self._disconnected_since_ms):
            for broker_id, since_ms in table.items():
                table[broker_id] = min(now_ms, since_ms + stall_ms)

    def connection_closed(self, connection_id: int, now_ms: int) -> list[int]:
        """The brokers whose heartbeat connection this was; their grace starts now."""
        lost = [b for b, c in self._connection_by_broker.items() if c == connection_id]
        for broker_id in lost:
            del self._connection_by_broker[broker_id]
            if self.disconnect_grace_ms:
                self._disconnected_since_ms[broker_id] = now_ms
        return lost

    def next_deadline_ms(self) -> int | None:
        """When the earliest disconnected broker's grace runs out (None: nobody is waited on)."""
        if not self._disconnected_since_ms:
            return None
        return min(self._disconnected_since_ms.values()) + self.disconnect_grace_ms

    def has_valid_session(self, image: MetadataImage, broker_id: int, now_ms: int) -> bool:
        """Kafka's hasValidSession, the `previous_session_alive` of register_broker: the broker
        is registered and unfenced, was heard from within session_timeout_ms, and has not
        lost its heartbeat connection. A completed controlled shutdown fenced it, so its
        session is over at once; so is one whose process died and closed its connection."""
        last_ms = self.last_heartbeat_ms_by_broker.get(broker_id)
        return (
            image.is_live(broker_id)
            and last_ms is not None
            and now_ms - last_ms <= self.session_timeout_ms
            and broker_id not in self._disconnected_since_ms
        )

    def fence_expired(
        self, image: MetadataImage, now_ms: int
    ) -> tuple[list[MetadataRecord], list[int]]:
        """Records fencing every live broker whose session expired or whose grace after a lost
        connection ran out, and those brokers."""
        for table in (self.last_heartbeat_ms_by_broker, self._connection_by_broker):
            for broker_id in [b for b in table if b not in image.brokers]:
                del table[broker_id]
        for broker_id in [b for b in self._disconnected_since_ms if not image.is_live(b)]:
            del self._disconnected_since_ms[broker_id]  # fenced (or gone): nothing to wait for
        contact = dict(self.last_heartbeat_ms_by_broker)
        for broker_id, since_ms in self._disconnected_since_ms.items():
            if now_ms - since_ms > self.disconnect_grace_ms:
                contact[broker_id] = now_ms - self.session_timeout_ms - 1  # as good as expired
        return fence_expired_brokers(
            image, contact, now_ms, self.session_timeout_ms, self.election_defaults
        )

    def reason(self, broker_id: int, now_ms: int) -> str:
        """Why fence_expired fenced this broker (for the log line)."""
        since_ms = self._disconnected_since_ms.get(broker_id)
        if since_ms is not None and now_ms - since_ms > self.disconnect_grace_ms:
            return CONNECTION_LOST
        return SESSION_EXPIRED
