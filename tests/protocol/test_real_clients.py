"""kafka-python, aiokafka and confluent-kafka (librdkafka) against our protocol layer.

A deliberately tiny in-memory broker (one thread per socket, records kept as the raw batches
the producers sent, offsets patched into the batch header) drives `ServerConnection`, so every
byte the real clients read was encoded by log/protocol and every byte they sent was decoded
by it. It records the (client, api, version) each client negotiated.
"""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from log.protocol.admin import CREATE_TOPICS_RESPONSE, DELETE_TOPICS_RESPONSE
from log.protocol.apis import api_versions_body
from log.protocol.connection import NEED_DATA, PAUSED, BadRequest, ServerConnection
from log.protocol.coordinator import FIND_COORDINATOR_RESPONSE
from log.protocol.errors import ErrorCode
from log.protocol.fetch import FETCH_RESPONSE
from log.protocol.metadata import METADATA_RESPONSE
from log.protocol.offsets import LIST_OFFSETS_RESPONSE
from log.protocol.produce import PRODUCE_RESPONSE
from log.protocol.producer_id import INIT_PRODUCER_ID_RESPONSE
from log.records.batch_header import iter_batches, set_base_offset

pytestmark = pytest.mark.interop

MAX_FRAME_BYTES = 1 << 22


class TinyBroker:
    """One broker (node 1) holding every partition; auto-creates topics with 2 partitions."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.lock = threading.Lock()
        self.partitions: dict[tuple[str, int], list[bytes]] = {}
        self.next_offset: dict[tuple[str, int], int] = {}
        self.topics: dict[str, int] = {}
        self.negotiated: set[tuple[str | None, str, int]] = set()
        self.refused: list[tuple[int, int, str]] = []
        self.next_producer_id = 1000
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.server.close()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        conn = ServerConnection(MAX_FRAME_BYTES, max_in_flight=5)
        with sock:
            while data := sock.recv(1 << 16):
                conn.receive_data(data)
                while (event := conn.next_request()) not in (NEED_DATA, PAUSED):
                    if isinstance(event, BadRequest):
                        self.refused.append(
                            (event.header.api_key, event.header.api_version, event.reason)
                        )
                        sock.sendall(event.data_to_send)
                        if event.close_connection:
                            return
                        continue
                    self.negotiated.add((event.header.client_id, event.api.name, event.api_version))
                    with self.lock:
                        body = getattr(self, f"handle_{event.api.name}")(event.body)
                    if event.api_key == 0 and event.body.acks == 0:
                        sock.sendall(conn.no_response(event))
                    else:
                        sock.sendall(b"".join(conn.send_response_parts(event, body)))

    # --- handlers (one per API; bodies built from our dataclasses) ---

    def handle_ApiVersions(self, body):
        return api_versions_body()

    def handle_Metadata(self, body):
        names = list(self.topics) if body.topics is None else [t.name for t in body.topics]
        for name in names:
            self.topics.setdefault(name, 2)
        M = METADATA_RESPONSE.cls
        return M(
            brokers=[M.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=self.port)],
            cluster_id="quorumlog-test",
            controller_id=1,
            topics=[
                M.MetadataResponseTopic(
                    name=name,
                    partitions=[
                        M.MetadataResponsePartition(
                            partition_index=p,
                            leader_id=1,
                            leader_epoch=0,
                            replica_nodes=[1],
                            isr_nodes=[1],
                        )
                        for p in range(self.topics[name])
                    ],
                )
                for name in names
            ],
        )

    def handle_CreateTopics(self, body):
        R = CREATE_TOPICS_RESPONSE.cls
        for topic in body.topics:
            self.topics[topic.name] = max(topic.num_partitions, 1)
        return R(topics=[R.CreatableTopicResult(name=t.name) for t in body.topics])

    def handle_DeleteTopics(self, body):
        R = DELETE_TOPICS_RESPONSE.cls
        for name in body.topic_names:
            self.topics.pop(name, None)
        return R(responses=[R.DeletableTopicResult(name=n) for n in body.topic_names])

    def handle_InitProducerId(self, body):
        self.next_producer_id += 1
        return INIT_PRODUCER_ID_RESPONSE.cls(producer_id=self.next_producer_id, producer_epoch=0)

    def handle_FindCoordinator(self, body):
        return FIND_COORDINATOR_RESPONSE.cls(
            error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, node_id=-1, host="", port=-1
        )

    def handle_Produce(self, body):
        R = PRODUCE_RESPONSE.cls
        topics = []
        for topic in body.topic_data:
            partitions = []
            for partition in topic.partition_data:
                key = (topic.name, partition.index)
                records = partition.records  # a writable view into the request frame
                base_offset = self.next_offset.get(key, 0)
                next_offset = base_offset
                for position, header in iter_batches(records):
                    set_base_offset(records, position, next_offset)
                    next_offset += header.last_offset_delta + 1
                self.partitions.setdefault(key, []).append(bytes(records))
                self.next_offset[key] = next_offset
                partitions.append(
                    R.PartitionProduceResponse(
                        index=partition.index, base_offset=base_offset, log_start_offset=0
                    )
                )
            topics.append(R.TopicProduceResponse(name=topic.name, partition_responses=partitions))
        return R(responses=topics)

    def handle_ListOffsets(self, body):
        R = LIST_OFFSETS_RESPONSE.cls
        return R(
            topics=[
                R.ListOffsetsTopicResponse(
                    name=t.name,
                    partitions=[
                        R.ListOffsetsPartitionResponse(
                            partition_index=p.partition_index,
                            timestamp=-1,
                            offset=0
                            if p.timestamp == -2
                            else self.next_offset.get((t.name, p.partition_index), 0),
                            leader_epoch=0,
                        )
                        for p in t.partitions
                    ],
                )
                for t in body.topics
            ]
        )

    def handle_Fetch(self, body):
        R = FETCH_RESPONSE.cls
        topics = []
        for topic in body.topics:
            partitions = []
            for p in topic.partitions:
                key = (topic.topic, p.partition)
                high_watermark = self.next_offset.get(key, 0)
                records = b"".join(
                    batch
                    for batch in self.partitions.get(key, [])
                    if _last_offset(batch) >= p.fetch_offset
                )
                partitions.append(
                    R.PartitionData(
                        partition_index=p.partition,
                        high_watermark=high_watermark,
                        last_stable_offset=high_watermark,
                        log_start_offset=0,
                        records=records,
                    )
                )
            topics.append(R.FetchableTopicResponse(topic=topic.topic, partitions=partitions))
        return R(responses=topics)


def _last_offset(batch: bytes) -> int:
    for _, header in iter_batches(batch):
        return header.last_offset
    raise AssertionError("empty batch")


@pytest.fixture
def broker():
    broker = TinyBroker()
    yield broker
    broker.close()


def _only_api_versions_refused(broker: TinyBroker) -> None:
    assert all(api_key == 18 and version >= 3 for api_key, version, _ in broker.refused), (
        broker.refused
    )


def test_confluent_kafka_admin_produce_consume(broker):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = f"127.0.0.1:{broker.port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("orders", 3, 1)]).values():
        assert future.result(10) is None
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "compression.type": "gzip",
            "linger.ms": 1,
        }
    )
    delivered = []
    for i in range(20):
        producer.produce(
            "orders",
            f"v{i}".encode(),
            partition=i % 3,
            on_delivery=lambda e, m: delivered.append(e),
        )
    assert producer.flush(10) == 0 and delivered == [None] * 20
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition("orders", p, 0) for p in range(3)])
    values = []
    for _ in range(50):
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            values.append(message.value())
        if len(values) == 20:
            break
    consumer.close()
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(20))
    for future in admin.delete_topics(["orders"]).values():
        assert future.result(10) is None
    negotiated = {
        (api, version) for client, api, version in broker.negotiated if client == "rdkafka"
    }
    assert {
        ("Produce", 8),
        ("Metadata", 8),
        ("InitProducerId", 1),
        ("CreateTopics", 4),
        ("Fetch", 11),
    } <= negotiated
    _only_api_versions_refused(broker)


def test_kafka_python_admin_produce_consume(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    bootstrap = f"127.0.0.1:{broker.port}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("events", 2, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=1)
    for i in range(10):
        producer.send("events", f"e{i}".encode(), partition=i % 2)
    producer.flush(10)
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000
    )
    consumer.assign([TopicPartition("events", 0), TopicPartition("events", 1)])
    consumer.seek_to_beginning()
    values = []
    for message in consumer:
        values.append(message.value)
        if len(values) == 10:
            break
    consumer.close()
    assert sorted(values) == sorted(f"e{i}".encode() for i in range(10))
    negotiated = {(api, version) for _, api, version in broker.negotiated}
    assert {
        ("ApiVersions", 2),
        ("Produce", 8),
        ("Metadata", 8),
        ("Fetch", 11),
        ("CreateTopics", 4),
    } <= negotiated
    _only_api_versions_refused(broker)


def test_aiokafka_produce_consume(broker):
    aiokafka = pytest.importorskip("aiokafka")
    bootstrap = f"127.0.0.1:{broker.port}"

    async def run() -> list[bytes]:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait("logs", f"l{i}".encode(), partition=0)
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            partition = aiokafka.TopicPartition("logs", 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            batches = await consumer.getmany(partition, timeout_ms=3000, max_records=5)
            return [m.value for m in batches.get(partition, [])]
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [f"l{i}".encode() for i in range(5)]
    negotiated = {(api, version) for _, api, version in broker.negotiated}
    assert {
        ("ApiVersions", 0),
        ("Produce", 7),
        ("Metadata", 5),
        ("InitProducerId", 0),
    } <= negotiated
    _only_api_versions_refused(broker)
