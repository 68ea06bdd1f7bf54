"""KIP-951 leader hints: a partition's current leader, and where it listens, in the answer that
tells a client NOT_LEADER_OR_FOLLOWER (Produce v10+, Fetch v16+), so it retries there at once
instead of after a metadata request.

    hints = LeaderHints(image, R.PartitionData.LeaderIdAndEpoch, R.NodeEndpoint)
    partition.current_leader = hints.current_leader(topic, partition)
    response.node_endpoints = hints.node_endpoints()

The leader and leader epoch come from this broker's image (-1 when unknown or leaderless: the
tagged field is then not written); node_endpoints lists the hinted leaders that are live.
"""

from __future__ import annotations

import functools
from typing import Any

from log.server.handlers.metadata import LISTENER, live_brokers
from quorum.image import MetadataImage


@functools.cache
def _no_hint(leader_cls: Any) -> Any:
    """One shared "no leader known" struct per response class (built once, not per request:
    every Fetch and Produce makes a LeaderHints)."""
    return leader_cls()


class LeaderHints:
    def __init__(self, image: MetadataImage, leader_cls: Any, endpoint_cls: Any) -> None:
        self.image = image
        self.leader_cls = leader_cls  # the response's LeaderIdAndEpoch struct
        self.endpoint_cls = endpoint_cls  # the response's NodeEndpoint struct
        self.no_hint = _no_hint(leader_cls)  # leader -1, epoch -1: not written
        self.hinted: set[int] = set()  # leaders named so far
        self.listener = LISTENER  # whose endpoints to name: the request's listener

    def current_leader(self, topic: str, partition: int) -> Any:
        known = self.image.topic(topic)
        state = known.partitions.get(partition) if known is not None else None
        if state is None or state.leader < 0:
            return self.no_hint
        self.hinted.add(state.leader)
        return self.leader_cls(leader_id=state.leader, leader_epoch=state.leader_epoch)

    def node_endpoints(self) -> list:
        if not self.hinted:
            return []
        return [
            self.endpoint_cls(node_id=b, host=host, port=port, rack=rack)
            for b, host, port, rack in live_brokers(self.image, self.listener)
            if b in self.hinted
        ]
