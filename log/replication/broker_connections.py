"""One connection per other broker, for requests a coordinator sends to partition leaders
(WriteTxnMarkers from the transaction coordinator, AddPartitionsToTxn verify requests to it).

Each connection goes to the broker's current endpoint on the inter-broker listener (with its
TLS/SASL: `ReplicaManager.inter_broker_connect`); a broker whose endpoint moved gets a new one.
A request that fails or times out closes that broker's connection, so the next one reconnects.

    connections = BrokerConnections(replica_manager.endpoint_for, connect, "txn-coordinator-1")
    body = await connections.request(broker_id, api_key, version, request_body, timeout_ms)
    # None: the broker has no endpoint in the image; KafkaError / trio.TooSlowError: it failed
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from log.replication.replica_fetcher import LeaderConnection


class BrokerConnections:
    def __init__(
        self,
        endpoint_for: Callable[[int], tuple[str, int] | None],
        connect: Callable[[str, int], Awaitable[Any]],
        client_id: str,
    ) -> None:
        self.endpoint_for, self.connect, self.client_id = endpoint_for, connect, client_id
        self._connections: dict[int, LeaderConnection] = {}

    async def request(
        self, broker_id: int, api_key: int, api_version: int, body: Any, timeout_ms: int
    ) -> Any | None:
        endpoint = self.endpoint_for(broker_id)
        if endpoint is None:
            return None
        conn = self._connections.get(broker_id)
        if conn is None or (conn.host, conn.port) != endpoint:
            if conn is not None:
                await conn.aclose()
            conn = LeaderConnection(*endpoint, client_id=self.client_id, connect=self.connect)
            self._connections[broker_id] = conn
        try:
            with trio.fail_after(timeout_ms / 1000):
                return await conn.request(api_key, api_version, body)
        except BaseException:
            if self._connections.get(broker_id) is conn:
                del self._connections[broker_id]
            await conn.aclose()
            raise

    async def aclose(self) -> None:
        connections, self._connections = self._connections, {}
        for conn in connections.values():
            await conn.aclose()
