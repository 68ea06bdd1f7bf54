"""One request to the first reachable bootstrap server: creating a topic for the pipeline and
the benchmark (CreateTopics, Kafka API 19, forwarded to the controller; an existing topic is
fine, TOPIC_ALREADY_EXISTS is not an error here), and listing the topics a `subscribePattern`
read matches (Metadata, Kafka API 3, for all topics)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ADMIN_TIMEOUT_S = 60
RETRY_BACKOFF_S = 0.2
METADATA_KEY = 3


def create_topic(
    bootstrap_servers: str,
    topic: str,
    partitions: int,
    replication_factor: int = 1,
    configs: Mapping[str, str] | None = None,
) -> bool:
    """Create `topic`; True if created, False if it existed. Raises the broker's error."""
    import trio

    from log.common.errors import ErrorCode, error_for
    from producer.admin_requests import CREATE_TOPICS_KEY, create_topics_request

    body = create_topics_request(
        topic, partitions, replication_factor, configs, timeout_ms=ADMIN_TIMEOUT_S * 1000
    )
    response = trio.run(request_first_reachable, bootstrap_servers, CREATE_TOPICS_KEY, body)
    (result,) = response.topics
    if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
        return False
    if result.error_code != ErrorCode.NONE:
        raise error_for(result.error_code, f"CreateTopics {topic}: {result.error_message}")
    return True


async def list_topics(bootstrap_servers: str) -> list[str]:
    """The names of every non-internal topic, sorted (what Kafka's pattern subscription
    matches against: internal topics are excluded, as with exclude.internal.topics)."""
    from log.protocol.metadata import METADATA_REQUEST

    request: Any = METADATA_REQUEST.cls  # generated at import: attributes are dynamic
    body = request(topics=None, allow_auto_topic_creation=False)
    response = await request_first_reachable(bootstrap_servers, METADATA_KEY, body)
    return sorted(t.name for t in response.topics if t.error_code == 0 and not t.is_internal)


async def broker_count(bootstrap_servers: str) -> int:
    """How many brokers the cluster's metadata lists."""
    from log.protocol.metadata import METADATA_REQUEST

    request: Any = METADATA_REQUEST.cls  # generated at import: attributes are dynamic
    body = request(topics=[], allow_auto_topic_creation=False)
    response = await request_first_reachable(bootstrap_servers, METADATA_KEY, body)
    return len(response.brokers)


async def request_first_reachable(bootstrap_servers: str, api_key: int, body: Any) -> Any:
    """Send one request to the first bootstrap server that accepts a connection (trying them
    in turn, a refused one fails at once, until ADMIN_TIMEOUT_S) and return the answer."""
    import trio

    from producer.connection import (
        BrokerConnection,
        BrokerConnections,
        ConnectionFailedError,
        parse_bootstrap_servers,
    )

    async def first_reachable(connections: BrokerConnections) -> BrokerConnection:
        servers = parse_bootstrap_servers(bootstrap_servers)
        while True:
            for index, (host, port) in enumerate(servers):
                try:
                    return await connections.connected(-1 - index, host, port)
                except ConnectionFailedError:
                    continue
            await trio.sleep(RETRY_BACKOFF_S)

    with trio.fail_after(ADMIN_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            connections = BrokerConnections(
                nursery, client_id="quorumlog-spark-admin", max_in_flight=1,
                request_timeout_ms=ADMIN_TIMEOUT_S * 1000,
            )  # fmt: skip
            try:
                connection = await first_reachable(connections)
                return await connection.request(api_key, body)
            finally:
                connections.close()
                nursery.cancel_scope.cancel()
