"""The producer's own tasks must not die of a broker connection ending or of a caller
cancelling a Future; and when the SyncProducer's thread ends anyway, every pending and later
call fails at once with the cause.

Found through `make test` (issue 14): the demo's Spark write hung in `SyncProducer.flush()`
after the `quorumlog-producer` thread had ended. The sender checks each ready node's
connection, drains batches for all of them, then writes one request per node; the write to
the first node awaits, and if the next node's connection died meanwhile (its leader was just
killed), `_send_produce` found no connection and its `assert` ended the sender task, which
took the producer's nursery (and the SyncProducer's trio loop) with it. The flush that was
running then, and the commands taken off the queue with it, were never completed: only the
commands still queued were failed, and only when trio.run raised.

Real brokers: KafkaServers in this trio process over the broker tests' local quorum
(tests/broker/conftest.py). The SyncProducer runs its own thread; where a test needs its
requests to stay unanswered, it blocks this test's trio loop (which serves the broker) in plain
synchronous calls.
"""

from __future__ import annotations

import threading
import time

import pytest
import trio

from log.server.broker import KafkaServer
from log.storage.config import default_log_config
from log.storage.manager import LogManager
from producer.cluster_view import TopicPartition
from producer.errors import ProducerClosedError, ProducerThreadEndedError
from producer.producer import Producer, wait_all
from producer.sync_producer import SyncProducer
from quorum import controller
from tests.broker.conftest import (  # noqa: F401 (no_server_errors: autouse)
    LocalQuorum,
    no_server_errors,
    node_config,
    start_broker,
)

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
        server.ctx.replica_manager.sync()
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


# -- the SyncProducer's thread --------------------------------------------------------------


def _wait_for(predicate) -> None:
    """Poll from a plain thread (this test's trio loop is blocked on purpose)."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not predicate():
        assert time.monotonic() < deadline, "hang guard"
        time.sleep(0.001)


def _start_flush(producer: SyncProducer) -> tuple[threading.Thread, list]:
    """flush() on a thread of its own; its outcome (None or the exception) lands in the list.
    Returns once the producer's loop took the flush off the queue (it is running)."""
    outcome: list = []

    def flush() -> None:
        try:
            producer.flush()
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=flush, daemon=True)
    thread.start()
    _wait_for(lambda: not producer._commands)
    return thread, outcome


def _producer_nursery() -> trio.Nursery:
    """Called inside the SyncProducer's loop: the nursery of its `async with Producer`
    (trio's task tree: root task -> SyncProducer._main -> that one nursery)."""
    for system_nursery in trio.lowlevel.current_root_task().child_nurseries:
        for task in system_nursery.child_tasks:
            if task.name.endswith("SyncProducer._main"):
                (nursery,) = task.child_nurseries
                return nursery
    raise AssertionError("no SyncProducer._main task")


async def _warm_producer(broker) -> SyncProducer:
    await broker.create_topic(TOPIC, partitions=1)
    producer = await trio.to_thread.run_sync(lambda: SyncProducer(broker.bootstrap, linger_ms=0))
    warm_up = producer.send(TOPIC, b"warm-up")
    await trio.to_thread.run_sync(warm_up.result, HANG_GUARD_S)
    return producer


async def test_a_cancelled_send_future_does_not_end_the_producer_thread(nursery, tmp_path):
    """The second thing that ended the thread: setting the result of a Future its caller had
    cancelled raises InvalidStateError, in the delivery callback, inside the trio loop."""
    broker = await start_broker(nursery, tmp_path)
    producer = await _warm_producer(broker)
    # Blocked loop from here to the await: the broker answers nothing yet.
    cancelled = producer.send(TOPIC, b"cancelled by its caller")
    assert cancelled.cancel()
    flushing, outcome = _start_flush(producer)
    await trio.to_thread.run_sync(flushing.join, HANG_GUARD_S)  # the broker answers now
    assert not flushing.is_alive(), "flush() hung: the producer's thread ended"
    assert outcome == [None]
    after = producer.send(TOPIC, b"after")
    assert (await trio.to_thread.run_sync(after.result, HANG_GUARD_S)).offset == 2
    await trio.to_thread.run_sync(producer.close)


@pytest.mark.parametrize("end", ["task_fails", "loop_returns"])
async def test_any_end_of_the_thread_fails_pending_and_later_calls(nursery, tmp_path, end):
    """task_fails: a task in the producer's nursery raises, as the sender's assert did (the
    real trigger is fixed: this injects the same failure). loop_returns: the nursery is
    cancelled, swallows the Cancelled of the serving loop and trio.run returns normally:
    before, nothing at all was failed then."""
    broker = await start_broker(nursery, tmp_path)
    producer = await _warm_producer(broker)
    # This test's loop stays blocked to the end: nothing sent from here is answered.
    sends = [producer.send(TOPIC, b"v%d" % i) for i in range(100)]
    bulk = producer.send_many(TOPIC, [b"b%d" % i for i in range(100)])
    flushing, outcome = _start_flush(producer)
    queued_behind = producer.send(TOPIC, b"queued behind the flush")
    injected = AssertionError("a producer task failed")

    async def fail() -> None:
        raise injected

    def end_the_loop() -> None:
        if end == "task_fails":
            _producer_nursery().start_soon(fail)
        else:
            _producer_nursery().cancel_scope.cancel()

    assert producer._token is not None
    producer._token.run_sync_soon(end_the_loop)
    flushing.join(HANG_GUARD_S)
    assert not flushing.is_alive(), "flush() hung after the producer's thread ended"

    def check_cause(error: BaseException) -> None:
        if end == "task_fails":
            assert error.__cause__ is injected, repr(error.__cause__)
        else:
            assert isinstance(error.__cause__, trio.Cancelled), repr(error.__cause__)

    (flush_error,) = outcome
    assert isinstance(flush_error, ProducerThreadEndedError), repr(flush_error)
    check_cause(flush_error)
    delivery = bulk.result(HANG_GUARD_S)  # a BulkDelivery, complete; its error says why
    errors = [future.exception(HANG_GUARD_S) for future in [*sends, queued_behind]]
    for error in [*errors, delivery.error]:
        assert isinstance(error, ProducerClosedError), repr(error)
        check_cause(error)
    for call in (
        lambda: producer.send(TOPIC, b"later"),
        lambda: producer.send_many(TOPIC, [b"later"]),
        producer.flush,
        producer.close,
    ):
        with pytest.raises(ProducerThreadEndedError) as raised:
            call()
        check_cause(raised.value)
    assert not producer._thread.is_alive()
