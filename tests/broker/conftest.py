"""A single-node stand-in for the node runtime: a real MetadataStateMachine fed by the real
`quorum/controller.py` decisions (no Raft), exposed as MetadataSource + ControllerChannel, and a
real KafkaServer on 127.0.0.1:0 around it. Scaffolding around the broker under test, not a mock
of it."""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import AsyncIterator

import pytest
import trio

from log.common.node_config import NodeConfig
from log.protocol.client_codec import ClientCodec
from log.protocol.fetch import FETCH_REQUEST
from log.protocol.produce import PRODUCE_REQUEST
from log.server.broker import KafkaServer
from log.storage.config import default_log_config
from log.storage.manager import LogManager
from quorum import controller
from quorum.broker_interface import ControllerChannel, MetadataSource
from quorum.broker_lifecycle import MAX_PENDING_IMAGES
from quorum.image import MetadataImage
from quorum.records import ActiveControllerRecord, BrokerEndpoint, encode_batch
from quorum.state_machine import MetadataStateMachine

NODE_ID = 1


class LocalQuorum:
    """MetadataSource and ControllerChannel of one combined node, applied synchronously."""

    def __init__(self) -> None:
        self.sm = MetadataStateMachine()
        self.offset = 0
        self.proposals = itertools.count(1)
        self.controller_epoch = 1
        self._changed = trio.Event()
        self._subscribers: list[trio.MemorySendChannel] = []
        self.broker_epoch = -1
        self.commit([ActiveControllerRecord(NODE_ID, self.controller_epoch)])

    # -- MetadataSource ---------------------------------------------------------------------
    @property
    def image(self) -> MetadataImage:
        return self.sm.image

    async def wait_for_image(self, min_offset: int) -> MetadataImage:
        while self.sm.image.last_offset < min_offset:
            await self._changed.wait()
        return self.sm.image

    def subscribe(self) -> trio.MemoryReceiveChannel[MetadataImage]:
        send, receive = trio.open_memory_channel[MetadataImage](MAX_PENDING_IMAGES)
        self._subscribers.append(send)
        return receive

    # -- committing -------------------------------------------------------------------------
    def commit(self, records: list) -> None:
        if not records:
            return
        self.offset += 1
        payload = encode_batch(records, self.controller_epoch, next(self.proposals))
        result = self.sm.apply(self.offset, payload)
        assert result.accepted, result
        self._changed.set()
        self._changed = trio.Event()
        for send in self._subscribers:
            try:
                send.send_nowait(self.sm.image)
            except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                pass

    def register(self, broker_id: int, host: str, port: int) -> None:
        request = controller.BrokerRegistrationRequest(
            broker_id, uuid.uuid4(), (BrokerEndpoint("PLAINTEXT", host, port),)
        )
        records, response = controller.register_broker(self.image, request)
        self.commit(records)
        self.broker_epoch = response.broker_epoch
        records, _ = controller.heartbeat(
            self.image,
            controller.BrokerHeartbeatRequest(broker_id, response.broker_epoch, self.offset),
        )
        self.commit(records)

    # -- ControllerChannel ------------------------------------------------------------------
    async def create_topics(self, request):
        records, response = controller.create_topics(
            self.image, request, start_index=0,
            topic_ids=[uuid.uuid4() for _ in request.topics],
        )  # fmt: skip
        self.commit(records)
        return response

    async def delete_topics(self, request):
        records, response = controller.delete_topics(self.image, request)
        self.commit(records)
        return response

    async def create_partitions(self, request):
        records, response = controller.create_partitions(self.image, request, start_index=0)
        self.commit(records)
        return response

    async def alter_topic_configs(self, request):
        records, response = controller.alter_topic_configs(self.image, request)
        self.commit(records)
        return response

    async def alter_partitions(self, request):
        records, response = controller.alter_partitions(self.image, request)
        self.commit(records)
        return response

    async def allocate_producer_ids(self, request):
        records, response = controller.allocate_producer_ids(self.image, request)
        self.commit(records)
        return response


assert isinstance(LocalQuorum(), MetadataSource) and isinstance(LocalQuorum(), ControllerChannel)


def node_config(tmp_path, **props) -> NodeConfig:
    values = {
        "node.id": NODE_ID,
        "cluster.id": "broker-test",
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:1",
        "controller.quorum.voters": f"{NODE_ID}@127.0.0.1:1",
        "controller.quorum.raft.voters": f"{NODE_ID}@127.0.0.1:2",
        "controller.quorum.password": "x",
        "num.partitions": 2,
    }
    values.update(props)
    return NodeConfig.from_properties(tmp_path, values)


class RunningBroker:
    def __init__(self, server: KafkaServer, quorum: LocalQuorum, port: int) -> None:
        self.server = server
        self.quorum = quorum
        self.port = port
        self.bootstrap = f"127.0.0.1:{port}"

    async def create_topic(self, name: str, partitions: int = 1, **configs: str) -> None:
        response = await self.quorum.create_topics(
            controller.CreateTopicsRequest(
                (controller.CreatableTopic(name, partitions, 1, configs),)
            )
        )
        assert response.results[0].error_code == 0, response
        self.server.ctx.replica_manager.sync()


async def start_broker(nursery: trio.Nursery, tmp_path, **props) -> RunningBroker:
    config = node_config(tmp_path, **props)
    quorum = LocalQuorum()
    log_manager = LogManager(config.log_dir, default_log_config(config))
    server = KafkaServer(
        config,
        log_manager,
        quorum,
        quorum,
        broker_epoch_getter=lambda: quorum.broker_epoch,
        listen_port=0,
    )
    port = await nursery.start(server.run)
    quorum.register(NODE_ID, "127.0.0.1", port)
    return RunningBroker(server, quorum, port)


@pytest.fixture
async def broker(nursery, tmp_path) -> AsyncIterator[RunningBroker]:
    yield await start_broker(nursery, tmp_path)


class WireClient:
    """Our own sans-IO ClientCodec over a trio socket: raw requests for protocol tests."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.codec = ClientCodec(client_id="broker-test")

    @classmethod
    async def connect(cls, port: int) -> WireClient:
        return cls(await trio.open_tcp_stream("127.0.0.1", port))

    async def send(self, api_key: int, version: int, body) -> None:
        await self.stream.send_all(self.codec.encode_request(api_key, version, body))

    async def receive(self):
        while True:
            data = await self.stream.receive_some(1 << 20)
            if not data:
                raise EOFError("broker closed the connection")
            responses = self.codec.receive_data(data)
            if responses:
                assert len(responses) == 1
                return responses[0].body

    async def call(self, api_key: int, version: int, body):
        await self.send(api_key, version, body)
        with trio.fail_after(10):
            return await self.receive()

    async def aclose(self) -> None:
        await self.stream.aclose()


def produce_body(topic: str, partition: int, records: bytes | None, acks: int = 1):
    P = PRODUCE_REQUEST.cls
    return P(
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            P.TopicProduceData(
                name=topic,
                partition_data=[P.PartitionProduceData(index=partition, records=records)],
            )
        ],
    )


def fetch_body(topic: str, partition: int, offset: int, max_wait_ms: int = 0, min_bytes: int = 1,
               current_leader_epoch: int = -1):  # fmt: skip
    F = FETCH_REQUEST.cls
    return F(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        topics=[
            F.FetchTopic(
                topic=topic,
                partitions=[
                    F.FetchPartition(
                        partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20,
                        current_leader_epoch=current_leader_epoch,
                    )
                ],
            )
        ],
    )  # fmt: skip


@pytest.fixture(autouse=True)
def no_server_errors(caplog):
    """A handler that raised an untyped exception (answered UNKNOWN_SERVER_ERROR) or a
    connection task that crashed logs at ERROR: no test may cause that."""
    caplog.set_level(logging.INFO, logger="log.server")
    yield
    errors = [
        r for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("log.server")
    ]
    assert not errors, [r.getMessage() for r in errors]
