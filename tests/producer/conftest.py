"""Fixtures for the producer driver tests: real Kafka-protocol peers.

`mock_cluster` is librdkafka's built-in mock cluster (confluent-kafka, `test.mock.num.brokers`):
real brokers on 127.0.0.1 speaking the Kafka protocol (ApiVersions, Metadata with topic
auto-creation (4 partitions), Produce with idempotence checks, Fetch, ListOffsets,
InitProducerId). It lives as long as the confluent-kafka client that created it; `stop()`
destroys it, which is how tests take the brokers down. Once the `broker` branch provides an
in-process KafkaServer fixture, the same tests can run against it too.
"""

from __future__ import annotations

import confluent_kafka
import pytest


class MockCluster:
    def __init__(self, broker_count: int = 1) -> None:
        self._client = confluent_kafka.Producer(
            {
                "test.mock.num.brokers": broker_count,
                "bootstrap.servers": "",
                "log_level": 0,
                "partitioner": "murmur2_random",
            }
        )
        brokers = self._client.list_topics(timeout=10).brokers
        self.addresses = [f"{b.host}:{b.port}" for b in brokers.values()]
        self.bootstrap = ",".join(self.addresses)

    @property
    def client(self) -> confluent_kafka.Producer:
        """A confluent-kafka producer (murmur2_random partitioner) attached to the cluster."""
        return self._client

    def stop(self) -> None:
        if self._client is not None:
            self._client.flush(0)
            self._client = None  # destroying the client destroys its mock brokers
            import gc

            gc.collect()


@pytest.fixture
def mock_cluster():
    cluster = MockCluster(1)
    yield cluster
    cluster.stop()


@pytest.fixture
def mock_cluster3():
    cluster = MockCluster(3)
    yield cluster
    cluster.stop()


@pytest.fixture
async def kafka_peer(nursery):
    """A KafkaPeer (tests/producer/kafka_peer.py) serving on 127.0.0.1 for the test."""
    from tests.producer.kafka_peer import KafkaPeer

    peer = await nursery.start(KafkaPeer().serve)
    yield peer
    peer.stop()
