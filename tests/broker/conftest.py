"""A single-node stand-in for the node runtime: bench/local_quorum.py's LocalQuorum (a real
MetadataStateMachine fed by the real `quorum/controller.py` decisions, no Raft) as
MetadataSource + ControllerChannel, and a real KafkaServer on 127.0.0.1:0 around it. Scaffolding
around the broker under test, not a mock of it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
import trio

from bench.local_quorum import NODE_ID, LocalQuorum, node_config
from log.protocol.client_codec import ClientCodec
from log.protocol.fetch import FETCH_REQUEST
from log.protocol.produce import PRODUCE_REQUEST
from log.records.batch_header import iter_batches
from log.records.control import ControlRecordType, read_end_txn_marker
from log.server.broker import KafkaServer
from log.storage.config import default_log_config
from log.storage.manager import LogManager
from quorum import controller
from quorum.broker_interface import ControllerChannel, MetadataSource
from quorum.features import bootstrap_levels

assert isinstance(LocalQuorum(), MetadataSource) and isinstance(LocalQuorum(), ControllerChannel)


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
    quorum = LocalQuorum(bootstrap_levels(config.props["quorumlog.bootstrap.features"]))
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


def markers(broker: RunningBroker, topic: str, partition: int) -> list[tuple[int, int, bool]]:
    """(producer id, producer epoch, committed) of every transaction marker in a partition's log,
    over every segment (a marker, timestamped now, rolls the segment of test batches
    timestamped 0: segment.ms)."""
    log = broker.server.ctx.replica_manager.get(topic, partition).log
    found, offset = [], 0
    while offset < log.log_end_offset:
        data = bytes(log.read(offset, 1 << 20).records)
        for position, header in iter_batches(data):
            offset = header.next_offset
            if header.is_control:
                marker = read_end_txn_marker(data, position)
                assert marker is not None
                committed = marker.control_type == ControlRecordType.COMMIT
                found.append((header.producer_id, header.producer_epoch, committed))
    return found
