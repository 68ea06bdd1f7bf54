"""Creating a topic for the pipeline and the benchmark: one CreateTopics request (Kafka API 19)
to the first reachable bootstrap server, which forwards it to the controller. An existing
topic is fine (TOPIC_ALREADY_EXISTS is not an error here)."""

from __future__ import annotations

from collections.abc import Mapping

ADMIN_TIMEOUT_S = 60
RETRY_BACKOFF_S = 0.2


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
    from producer.connection import (
        BrokerConnection,
        BrokerConnections,
        ConnectionFailedError,
        parse_bootstrap_servers,
    )

    body = create_topics_request(
        topic, partitions, replication_factor, configs, timeout_ms=ADMIN_TIMEOUT_S * 1000
    )

    async def first_reachable(connections: BrokerConnections) -> BrokerConnection:
        """The first bootstrap server that accepts a connection, trying them in turn (a
        refused one fails at once) until create()'s deadline."""
        servers = parse_bootstrap_servers(bootstrap_servers)
        while True:
            for index, (host, port) in enumerate(servers):
                try:
                    return await connections.connected(-1 - index, host, port)
                except ConnectionFailedError:
                    continue
            await trio.sleep(RETRY_BACKOFF_S)

    async def create() -> bool:
        with trio.fail_after(ADMIN_TIMEOUT_S):
            async with trio.open_nursery() as nursery:
                connections = BrokerConnections(
                    nursery, client_id="quorumlog-spark-admin", max_in_flight=1,
                    request_timeout_ms=ADMIN_TIMEOUT_S * 1000,
                )  # fmt: skip
                try:
                    connection = await first_reachable(connections)
                    response = await connection.request(CREATE_TOPICS_KEY, body)
                finally:
                    connections.close()
                    nursery.cancel_scope.cancel()
        (result,) = response.topics
        if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
            return False
        if result.error_code != ErrorCode.NONE:
            raise error_for(result.error_code, f"CreateTopics {topic}: {result.error_message}")
        return True

    return trio.run(create)
