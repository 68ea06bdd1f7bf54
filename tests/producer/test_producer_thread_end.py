"""The producer's own tasks must not die of a broker connection ending.

Found through `make test` (issue 14): the demo's Spark write hung in `SyncProducer.flush()`
after the `quorumlog-producer` thread had ended. The sender checks each ready node's
connection, drains batches for all of them, then writes one request per node; the write to
the first node awaits, and if the next node's connection died meanwhile (its leader was just
killed), `_send_produce` found no connection and its `assert` ended the sender task, which
took the producer's nursery (and the SyncProducer's trio loop) with it.

Real brokers: KafkaServers in this trio process over the broker tests' local quorum
(tests/broker/conftest.py).
"""

from __future__ import annotations

import trio

from log.server.broker import KafkaServer
from log.server.partitions import default_log_config
from log.storage.manager import LogManager
from producer.cluster_view import TopicPartition
from producer.producer import Producer, wait_all
from quorum import controller
from tests.broker.conftest import LocalQuorum, no_server_errors, node_config  # noqa: F401 (autouse)

TOPIC = "t"
HANG_GUARD_S = 60  # only ever reached when a call hangs


async def _start_broker(nursery: trio.Nursery, quorum: LocalQuorum, tmp_path, broker_id: int):
    config = node_config(
        tmp_path / f"b{broker_id}",
        **{"node.id": broker_id, "process.roles": "broker"},
    )
    server = KafkaServer(
        config,
        LogManager(config.log_dir, default_log_config(config)),
        quorum,
        quorum,
        broker_epoch_getter=lambda: quorum.broker_epoch,
        listen_port=0,
    )
    port = await nursery.start(server.run)
    quorum.register(broker_id, "127.0.0.1", port)
    return server, port


def _batches_held_by_the_sender(producer: Producer, tp: TopicPartition) -> int:
    """Batches of `tp` that the sender drained but has not written yet: it holds them while
    it awaits the write of an earlier node's request in the same turn."""
    incomplete = [b for b in producer.accumulator.incomplete_batches() if b.topic_partition == tp]
    assert producer.sender is not None
    in_flight = [b for b in producer.sender._in_flight.values() if b.topic_partition == tp]
    return len(incomplete) - len(in_flight) - producer.accumulator.queue_length(tp)


async def test_connection_lost_while_the_sender_writes_to_another_node(nursery, tmp_path):
    quorum = LocalQuorum()
    brokers = {i: await _start_broker(nursery, quorum, tmp_path, i) for i in (1, 2)}
    response = await quorum.create_topics(
        controller.CreateTopicsRequest((controller.CreatableTopic(TOPIC, 2, 1, {}),))
    )
    assert response.results[0].error_code == 0, response
    for server, _port in brokers.values():
        server.ctx.sync_partitions()
    leaders = {p: quorum.image.topic(TOPIC).partitions[p].leader for p in (0, 1)}
    assert sorted(leaders.values()) == [1, 2], leaders
    # The sender writes to nodes in id order: node 1's write is the one that awaits.
    first = next(p for p, leader in leaders.items() if leader == 1)
    second = next(p for p, leader in leaders.items() if leader == 2)
    tp_second = TopicPartition(TOPIC, second)

    async with Producer(
        f"127.0.0.1:{brokers[1][1]}", linger_ms=0, retry_backoff_ms=5, seed=4
    ) as producer:
        handles = []
        cuts = 0
        with trio.fail_after(HANG_GUARD_S):
            while cuts < 3:
                assert len(handles) < 200_000, "never caught the sender between two writes"
                handles.append(await producer.send(TOPIC, b"a", partition=first))
                handles.append(await producer.send(TOPIC, b"b", partition=second))
                await trio.lowlevel.checkpoint()
                if _batches_held_by_the_sender(producer, tp_second) > 0:
                    connection = producer.connections.get(2)
                    if connection is not None:
                        # what node 2's connection does when its broker dies: closed, every
                        # request on it failed, gone from the pool at once
                        connection.close()
                        cuts += 1
            results = await wait_all(handles)
    assert [r.partition for r in results] == [first, second] * (len(handles) // 2)
    for partition in (first, second):
        offsets = [r.offset for r in results if r.partition == partition]
        assert sorted(offsets) == list(range(len(handles) // 2))
