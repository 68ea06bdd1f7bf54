"""A new topic's logs are opened in a worker thread before its image is published, while the node
keeps serving (in process: one combined node on loopback sockets, a real confluent-kafka admin
client).

Opening a partition's log (directory, segment, indexes, checkpoints) costs ~0.5 ms; applying an
image opened them on the event loop, so a topic of 2,000 partitions stopped every node for ~3 s
(every request, the controller's heartbeats and sessions; 2026-11-28). Now the broker's replica
manager opens them as an image preparer (BrokerLifecycle publishes the image after it), with
the first leader epoch of those it leads, and applying the image finds them."""

from __future__ import annotations

import threading

import pytest
import trio
from cluster_harness import free_base_port, one_node_config
from confluent_kafka.admin import AdminClient, NewTopic

from log.server.node import Node
from log.storage.leader_epoch_cache import LeaderEpochFileCache

pytestmark = pytest.mark.timeout(90)

PARTITIONS = 40


async def test_a_new_topics_logs_open_in_a_worker_thread_before_its_image_shows_it(
    tmp_path, monkeypatch
):
    base = free_base_port(1)
    node = Node(one_node_config(tmp_path, base))
    async with trio.open_nursery() as nursery:
        with trio.fail_after(30):
            await nursery.start(node.run, lambda: None)
        manager, lifecycle = node.log_manager, node.lifecycle
        assert manager is not None and lifecycle is not None
        trio_thread = threading.current_thread()

        # Every log opened, with the thread it was opened on and whether the published image
        # showed its topic then.
        opened: list[tuple[str, bool, bool]] = []
        opening = threading.Event()  # open_logs was called
        loop_ran = threading.Event()  # a trio task ran after that, before the logs were opened
        open_log, open_logs = manager._open_log, manager.open_logs

        def recording_open_log(topic, partition, config, now_ms):
            on_worker = threading.current_thread() is not trio_thread
            opened.append((topic, on_worker, lifecycle.image.topic(topic) is not None))
            return open_log(topic, partition, config, now_ms)

        def open_logs_once_the_loop_ran(wanted, now_ms):
            # The event loop is free while this runs: a trio task gets to run meanwhile (were
            # the logs opened on the loop, nothing would set the event and this would time out).
            opening.set()
            loop_ran.wait(timeout=20)
            return open_logs(wanted, now_ms)

        # Where the leader epoch checkpoints of the new logs were written (make_leader's
        # first epoch is started ahead, in the worker, for the partitions this node leads).
        epoch_writes: list[bool] = []
        flush = LeaderEpochFileCache._flush

        def recording_flush(cache):
            if "wide-" in str(getattr(cache._checkpoint, "path", "")):
                epoch_writes.append(threading.current_thread() is not trio_thread)
            flush(cache)

        monkeypatch.setattr(LeaderEpochFileCache, "_flush", recording_flush)
        manager._open_log = recording_open_log  # type: ignore[method-assign]
        manager.open_logs = open_logs_once_the_loop_ran  # type: ignore[method-assign]

        async def tick() -> None:
            while not opening.is_set():
                await trio.sleep(0.001)
            loop_ran.set()

        def create() -> None:
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{node.kafka_port}"})
            futures = admin.create_topics([NewTopic("wide", PARTITIONS, 1)], request_timeout=60)
            futures["wide"].result(timeout=60)

        nursery.start_soon(tick)
        with trio.fail_after(60):
            await trio.to_thread.run_sync(create)

        assert loop_ran.is_set(), "the event loop did not run while the logs were opened"
        wide = [(on_worker, shown) for topic, on_worker, shown in opened if topic == "wide"]
        assert len(wide) == PARTITIONS, f"logs opened: {opened}"
        assert all(on_worker for on_worker, _ in wide), "a log was opened on the event loop"
        assert not any(shown for _, shown in wide), "the image showed the topic before its logs"
        assert lifecycle.image.topic("wide") is not None
        assert all(manager.get_log("wide", p) is not None for p in range(PARTITIONS))
        assert len(epoch_writes) == PARTITIONS and all(epoch_writes), epoch_writes
        nursery.cancel_scope.cancel()


async def test_an_image_is_published_even_when_a_preparer_fails(tmp_path, caplog):
    """Preparing is work ahead of time: a preparer that raises is logged and the image is
    published anyway (the logs it did not open are opened while the image is applied)."""
    node = Node(one_node_config(tmp_path, free_base_port(1)))
    async with trio.open_nursery() as nursery:
        with trio.fail_after(30):
            await nursery.start(node.run, lambda: None)
        lifecycle = node.lifecycle
        assert lifecycle is not None

        async def failing(published, image):
            raise OSError("no space left on device")

        lifecycle._preparers.insert(0, failing)

        def create() -> None:
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{node.kafka_port}"})
            admin.create_topics([NewTopic("after", 3, 1)])["after"].result(timeout=60)

        with trio.fail_after(60):
            await trio.to_thread.run_sync(create)
        assert lifecycle.image.topic("after") is not None
        assert node.log_manager is not None
        assert all(node.log_manager.get_log("after", p) is not None for p in range(3))
        assert any("preparing metadata image" in r.getMessage() for r in caplog.records)
        nursery.cancel_scope.cancel()
