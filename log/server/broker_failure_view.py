"""How Metadata answers while a broker has just died (sans-IO): hold the answer for the new
leader, list the dead broker once more on each connection, and never list no broker. Produce
and a consumer's Fetch hold the same way.

When a partition leader's process dies, the controller fences it `broker.disconnect.fence.ms`
after its heartbeat connection closed and moves its leaderships in the same metadata change.
Two things made unmodified clients take 1.7-2.0 s to produce again where ours took 0.17 s
(confluent-kafka 2.16, traced with debug=metadata,topic,broker):

* The client asks for metadata as soon as its connection to the leader resets, before the
  fence: the answer names the dead leader, and librdkafka asks again only on its 1 s topic
  scan. A follower of that leader knows better at once: its fetch connection to the leader
  failed at the same moment. So while a partition in the answer is led by a broker this
  node's fetchers cannot reach, and that began less than `hold_ms` ago, the answer waits for
  a newer image (the handler waits; this decides). A broker that is alive but cut off from
  this node only holds answers until `hold_ms` after the failure began, then the image is
  answered as it is; one that registered again since (restarted before a fence, when no
  controller could fence it) holds nothing.
  Produce and a consumer's Fetch wait the same way for the partitions they name: the node that
  becomes the new leader may apply the change a little after the node that answered the
  client's Metadata, and answering NOT_LEADER_OR_FOLLOWER then named the dead broker as the
  current leader (KIP-951), which sent both clients back to it and its retry back-off: first
  acks 420-510 ms after a leader kill instead of ~160 ms, in 3 of 9 kills of one bench run.
* The answer that shows the new leader no longer lists the fenced broker (Kafka lists
  unfenced brokers only), and librdkafka (2.10+) decommissions a broker missing from an
  answer: its broker thread takes the termination before the partition's migration and
  hands the partition to its internal broker, which waits for the next 1 s scan. So the
  first answer on each connection after this node saw a broker fenced (within `linger_ms`,
  the broker session timeout: as long as Kafka lists a dead broker before its session
  expires) still lists it, and the client moves the partition to its new leader first.
  Later answers on that connection leave it out, so the client does drop its handle for the
  dead broker once it asks again: a handle kept through the outage keeps its reconnect
  back-off (librdkafka's grows to seconds while the broker refused it), and a partition
  that moves to the restarted broker later would wait that out.

And an answer never lists no broker at all: when every broker is fenced (a controller that
heard no heartbeats for a session, the whole cluster cut off), every registered broker is
listed. librdkafka (2.13+) drops every broker it knows on an answer with none and then has
nobody left to ask, for good (confluentinc/librdkafka#5301): a nemesis producer stalled that
way, with no connection left, after such a window.

    view = BrokerFailureView.from_props(config.props)  # 9000 ms lingering, 2100 ms holding
    until_ms = view.hold_until_ms(image, names, unreachable, now_ms)  # None: answer now
    brokers = view.listed_brokers(image, listener, now_ms, request.connection_state)
    view.observe(image, now_ms)  # every image the node applies, as it comes
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from quorum.image import BrokerRegistration, MetadataImage

# How much longer than broker.disconnect.fence.ms an answer may wait for the new leader: the
# fence commits within a few ms of it, but when the dead broker was also the active
# controller a Raft election comes first (0.8-1.1 s of pysyncobj's here). Every answer after
# a held one on that connection waits too (Kafka answers in order); that costs little, since
# an acks=all write to any partition the dead broker replicated waits for the same fence (it
# is in their ISR until then). A shorter margin would answer the old leader before such an
# election ends, and librdkafka would learn the new one only from a later query (its fast
# leader query backs off to a second).
HOLD_MARGIN_MS = 2000


class BrokerFailureView:
    def __init__(self, linger_ms: int, hold_ms: int) -> None:
        self.linger_ms, self.hold_ms = linger_ms, hold_ms
        self._seen: MetadataImage | None = None
        self._live: frozenset[int] = frozenset()
        self._fenced_at: dict[int, int] = {}  # broker id -> when this node saw it fenced (ms)
        # listener -> the listing of `_seen` while no fenced broker lingers (callers must not
        # change it: every request's answer shares it)
        self._listings: dict[str, list[tuple[int, str, int, str | None]]] = {}

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> BrokerFailureView:
        """Lingering for broker.session.timeout.ms; holding only where a dead broker is fenced
        on its closed connection (broker.disconnect.fence.ms > 0), not by the session alone."""
        fence_ms = props["broker.disconnect.fence.ms"]
        return cls(
            linger_ms=props["broker.session.timeout.ms"],
            hold_ms=fence_ms + HOLD_MARGIN_MS if fence_ms > 0 else 0,
        )

    def hold_until_ms(
        self,
        image: MetadataImage,
        names: Iterable[str] | None,
        unreachable: Mapping[int, tuple[int, int]],
        now_ms: int,
        partitions: Iterable[tuple[str, int]] | None = None,
    ) -> int | None:
        """Until when an answer about topics `names` (None: all), or only about `partitions`
        when given, should wait for a new leader: the latest `since + hold_ms` of the brokers
        leading one of those partitions that this node's fetchers have not reached since
        `since` (`unreachable`: broker id -> (since, its broker epoch then)), still live and
        not registered again since; None when there is none left."""
        suspects = {
            broker_id: since + self.hold_ms
            for broker_id, (since, epoch) in unreachable.items()
            if since + self.hold_ms > now_ms
            and image.is_live(broker_id)
            and image.brokers[broker_id].broker_epoch == epoch
        }
        if not suspects:
            return None
        if partitions is None:
            named = image.topic_ids_by_name if names is None else names
            topics = (image.topic(name) for name in named)
            states = [s for t in topics if t is not None for s in t.partitions.values()]
        else:
            found = ((image.topic(name), index) for name, index in partitions)
            states = [
                s for t, i in found if t is not None and (s := t.partitions.get(i)) is not None
            ]
        return max((suspects[s.leader] for s in states if s.leader in suspects), default=None)

    def listed_brokers(
        self,
        image: MetadataImage,
        listener: str,
        now_ms: int,
        connection_state: dict[str, Any] | None = None,
    ) -> list[tuple[int, str, int, str | None]]:
        """(broker_id, host, port, rack) of the live brokers with an endpoint on `listener`,
        and of those this node saw fenced less than `linger_ms` ago that this connection
        (`connection_state`, kept per connection) has not been shown since, in broker id
        order; every registered one when that leaves none."""
        self.observe(image, now_ms)
        if not self._fenced_at and image is self._seen:  # usually: one list for every request
            cached = self._listings.get(listener)
            if cached is None:
                cached = self._listings[listener] = self._listing(image, listener, {})
            return cached
        return self._listing(image, listener, connection_state)

    def _listing(
        self, image: MetadataImage, listener: str, connection_state: dict[str, Any] | None
    ) -> list[tuple[int, str, int, str | None]]:
        shown: set[tuple[int, int]] = set()
        if connection_state is not None:
            shown = connection_state.setdefault("fenced_brokers_shown", set())
        listed = []
        for broker_id in sorted(self._live.union(self._fenced_at)):
            registration = image.brokers.get(broker_id)
            if registration is None:
                continue
            fenced_at = self._fenced_at.get(broker_id)
            if fenced_at is not None:
                if (broker_id, fenced_at) in shown:
                    continue
                shown.add((broker_id, fenced_at))
            listed.extend(listener_endpoints(broker_id, registration, listener))
        if not listed:  # every broker fenced: never none (see the module's docstring)
            for broker_id, registration in sorted(image.brokers.items()):
                listed.extend(listener_endpoints(broker_id, registration, listener))
        return listed

    def observe(self, image: MetadataImage, now_ms: int) -> None:
        """Note which brokers `image` fences (called with every image the node applies: a
        node that answered no Metadata before a broker died must still know it was live); an
        image older than one seen already changes nothing."""
        seen = self._seen
        if image is not seen and (seen is None or image.last_offset > seen.last_offset):
            live = frozenset(image.live_broker_ids())
            for broker_id in self._live - live:
                if broker_id in image.brokers:  # fenced (an unregistered one is gone)
                    self._fenced_at[broker_id] = now_ms
            for broker_id in live:
                self._fenced_at.pop(broker_id, None)
            self._seen, self._live = image, live
            self._listings.clear()
        if self._fenced_at:
            newest = self._seen.brokers if self._seen is not None else {}
            for broker_id, fenced_at in list(self._fenced_at.items()):
                if now_ms - fenced_at >= self.linger_ms or broker_id not in newest:
                    del self._fenced_at[broker_id]


def listener_endpoints(
    broker_id: int, registration: BrokerRegistration, listener: str
) -> list[tuple[int, str, int, str | None]]:
    """(broker_id, host, port, rack) of each of the broker's endpoints on `listener`."""
    return [
        (broker_id, endpoint.host, endpoint.port, registration.rack)
        for endpoint in registration.endpoints
        if endpoint.name == listener
    ]
