"""BrokerConnection against scripted Kafka-protocol servers; ProducerMetadata's schedule."""

from __future__ import annotations

import functools

import pytest
import trio

from log.common.errors import ErrorCode, RequestTimedOutError
from log.protocol.apis import api_versions_body
from log.protocol.connection import NEED_DATA, PAUSED, ServerConnection
from log.protocol.metadata import METADATA_REQUEST, METADATA_RESPONSE
from producer.cluster_view import TopicPartition
from producer.connection import BrokerConnection, ConnectionFailedError, parse_bootstrap_servers
from producer.metadata import ProducerMetadata

METADATA_KEY = 3


async def scripted_server(nursery, answer_metadata: bool):
    """A server that answers ApiVersions and, if asked to, Metadata; it swallows the rest."""
    received: list[int] = []

    async def handle(stream):
        connection = ServerConnection(max_in_flight=100)
        async with stream:
            while data := await stream.receive_some(1 << 16):
                connection.receive_data(data)
                while (request := connection.next_request()) not in (NEED_DATA, PAUSED):
                    received.append(request.api_key)
                    if request.api_key == 18:
                        await stream.send_all(
                            connection.send_response(request, api_versions_body())
                        )
                    elif request.api_key == METADATA_KEY and answer_metadata:
                        body = METADATA_RESPONSE.cls(brokers=[], topics=[])
                        await stream.send_all(connection.send_response(request, body))

    listeners = await nursery.start(functools.partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
    return listeners[0].socket.getsockname()[1], received


async def test_handshake_chooses_versions_and_answers_in_order(nursery):
    port, received = await scripted_server(nursery, answer_metadata=True)
    connection = BrokerConnection("127.0.0.1", port, max_in_flight=3, request_timeout_ms=5000)
    await nursery.start(connection.run)
    assert connection.versions[0] == 11 and connection.versions[METADATA_KEY] == 13
    bodies = []
    async with trio.open_nursery() as requests:
        for _ in range(6):  # more than max_in_flight: request() waits for room

            async def one():
                bodies.append(await connection.request(METADATA_KEY, METADATA_REQUEST.cls()))

            requests.start_soon(one)
    assert len(bodies) == 6 and received == [18] + [METADATA_KEY] * 6
    connection.close()


async def test_request_timeout_fails_every_outstanding_request(nursery):
    port, _ = await scripted_server(nursery, answer_metadata=False)
    connection = BrokerConnection("127.0.0.1", port, max_in_flight=5, request_timeout_ms=150)
    outcomes = []

    async def run():
        with pytest.raises(RequestTimedOutError):
            await connection.run(task_status=status)

    class Status:
        def started(self, value=None):
            started.set()

    started = trio.Event()
    status = Status()
    nursery.start_soon(run)
    await started.wait()
    all_failed = trio.Event()

    def on_response(outcome):
        outcomes.append(outcome)
        if len(outcomes) == 3:
            all_failed.set()

    for _ in range(3):
        await connection.send(METADATA_KEY, METADATA_REQUEST.cls(), on_response)
    with trio.fail_after(5):
        await all_failed.wait()
    assert all(isinstance(o, RequestTimedOutError) for o in outcomes)
    assert not connection.can_send


async def test_connection_refused_is_a_typed_error():
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nobody listens there now
    connection = BrokerConnection("127.0.0.1", port, request_timeout_ms=1000)
    with pytest.raises(ConnectionFailedError) as info:
        await connection.run()
    assert info.value.error_code == ErrorCode.NETWORK_EXCEPTION


def test_parse_bootstrap_servers():
    assert parse_bootstrap_servers("a:1, b:2,c") == [("a", 1), ("b", 2), ("c", 9092)]
    assert parse_bootstrap_servers(["[::1]:9093"]) == [("::1", 9093)]
    with pytest.raises(ValueError):
        parse_bootstrap_servers("a:notaport")
    with pytest.raises(ValueError):
        parse_bootstrap_servers(" , ")


def metadata_body(leaders: dict[int, int], topic_error: int = 0):
    cls = METADATA_RESPONSE.cls
    partition = cls.MetadataResponseTopic.MetadataResponsePartition
    return cls(
        brokers=[
            cls.MetadataResponseBroker(node_id=n, host=f"h{n}", port=9000 + n) for n in (1, 2)
        ],
        cluster_id="c",
        topics=[
            cls.MetadataResponseTopic(
                error_code=topic_error,
                name="t",
                partitions=[
                    partition(error_code=0, partition_index=p, leader_id=leader)
                    for p, leader in leaders.items()
                ],
            )
        ],
    )


def test_metadata_update_leaders_and_refresh_schedule():
    metadata = ProducerMetadata([("boot", 9092)], metadata_max_age_ms=1000, retry_backoff_ms=100)
    assert metadata.time_to_next_update_ms(0) == 0  # nothing known yet
    metadata.add_topics(["t"])
    metadata.update(metadata_body({0: 1, 1: 2, 2: 1}), now=10_000)
    assert metadata.partition_count("t") == 3
    assert metadata.leader_for(TopicPartition("t", 1)) == 2
    assert list(metadata.partitions_for_node(1)) == [TopicPartition("t", 0), TopicPartition("t", 2)]
    assert metadata.address(2).port == 9002 and metadata.address(-1).host == "boot"
    assert metadata.time_to_next_update_ms(10_500) == 500  # metadata.max.age.ms
    metadata.request_update()
    assert metadata.time_to_next_update_ms(10_050) == 50  # retry.backoff.ms after the last one
    assert metadata.time_to_next_update_ms(10_200) == 0
    # an unknown leader (-1) leaves the partition unavailable and asks for a refresh
    metadata.update(metadata_body({0: -1, 1: 2, 2: 1}), now=20_000)
    assert metadata.leader_for(TopicPartition("t", 0)) is None
    assert list(metadata.available_partitions("t")) == [1, 2]
    assert metadata.time_to_next_update_ms(20_100) == 0
    metadata.failed_update(30_000)
    assert metadata.time_to_next_update_ms(30_010) == 90


def test_metadata_topic_being_created_is_retried():
    metadata = ProducerMetadata([("boot", 9092)], retry_backoff_ms=100)
    metadata.add_topics(["t"])
    metadata.update(metadata_body({}, topic_error=ErrorCode.LEADER_NOT_AVAILABLE), now=0)
    assert metadata.partition_count("t") is None
    assert metadata.topic_errors["t"] == ErrorCode.LEADER_NOT_AVAILABLE
    assert metadata.time_to_next_update_ms(100) == 0


async def test_a_refused_node_fails_connected_at_once_and_is_reported(nursery):
    """BrokerConnections.connected() to a node that refuses raises ConnectionFailedError after
    one attempt (a metadata refresh going through candidate nodes moves on instead of
    retrying a dead node until request.timeout.ms), and on_disconnect names the node, which
    the producer turns into a metadata update request (Kafka's NetworkClient does the same)."""
    from producer.connection import BrokerConnections

    with trio.socket.socket() as probe:  # a port nobody listens on
        await probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    lost: list[int] = []
    pool = BrokerConnections(nursery, client_id="t", max_in_flight=5,
                             request_timeout_ms=30_000, on_disconnect=lost.append)  # fmt: skip
    with trio.fail_after(5):  # far below request_timeout_ms
        with pytest.raises(ConnectionFailedError):
            await pool.connected(7, "127.0.0.1", port)
    assert lost == [7]
    pool.close()


def test_a_retry_to_a_new_leader_skips_its_backoff():
    """KIP-951: a batch in retry waits its backoff only while the partition's leader is the
    one it was last sent to; once metadata names another leader it may go at once."""
    from producer.producer_batch import ProducerBatch

    batch = ProducerBatch.__new__(ProducerBatch)
    batch.attempts, batch.last_attempt_ms, batch.retry_backoff_ms = 1, 1000, 400
    batch.sent_to_node = 2
    assert batch.is_backing_off(1100, leader=2)
    assert batch.is_backing_off(1100, leader=None)  # no leader known yet: keep waiting
    assert not batch.is_backing_off(1100, leader=3)
    assert not batch.is_backing_off(1400, leader=2)  # backoff over
    batch.attempts = 0
    assert not batch.is_backing_off(1100, leader=2)  # never tried: no backoff
