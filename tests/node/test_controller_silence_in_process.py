"""A controller that stops answering (its host cut off: the connection stays open, nothing comes
back) or answers slowly must not cost brokers their sessions (in process, one-voter quorum on
real loopback sockets).

The netns nemesis found both: every broker kept waiting a whole session on a controller cut off
from the network, so the new active controller fenced all of them at once when the session it
granted at its activation ran out; and a heartbeat queued behind a slow decision counted only
once its turn came."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid

import pytest
import trio
from cluster_harness import free_base_port, one_node_config

from log.common.errors import ErrorCode
from log.common.node_config import Voter
from quorum import controller as c
from quorum import controller_auth
from quorum.broker_lifecycle import BrokerLifecycle
from quorum.controller_client import ControllerClient
from quorum.service import ControllerService

pytestmark = pytest.mark.timeout(60)


async def _silent_controller(secret: str, nursery: trio.Nursery, *, handshake: bool) -> int:
    """A listener that reads and never answers: after passing the controller handshake, or
    from the start (the handshake never completes)."""

    async def serve(stream: trio.SocketStream) -> None:
        async with stream:
            if handshake:
                await controller_auth.accept(stream, secret)
            while await stream.receive_some(1 << 16):
                pass

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    nursery.start_soon(trio.serve_listeners, serve, listeners)
    return listeners[0].socket.getsockname()[1]


async def test_brokers_leave_a_silent_controller_and_are_heard_while_decisions_wait(tmp_path):
    config = one_node_config(tmp_path, free_base_port(1))
    secret = config.props["controller.quorum.password"]
    service = ControllerService(config, seed=1)
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        mute_port = await _silent_controller(secret, nursery, handshake=False)
        silent_port = await _silent_controller(secret, nursery, handshake=True)
        # The silent ones are the voters tried first (nodes 2 and 3: the image never names
        # them, so the broker keeps them in its list), the real controller last.
        voters = [
            Voter(2, "127.0.0.1", mute_port),
            Voter(3, "127.0.0.1", silent_port),
            *config.controller_voters,
        ]
        lifecycle = BrokerLifecycle(
            config, ControllerClient(voters, secret=secret), ControllerClient(voters, secret=secret)
        )
        with trio.fail_after(30):  # a guard: before the fix it never registered
            await nursery.start(lifecycle.run)  # registration left the silent voters
            await lifecycle.unfenced.wait()  # so did the metadata fetch and the heartbeat
        assert not service.image.brokers[1].fenced

        # A decision holds the lock (a slow commit): a heartbeat is still heard at once.
        client = ControllerClient(config.controller_voters, secret=secret)
        async with service._decision_lock:
            heard_before = service.tracker.last_heartbeat_ms_by_broker[1]
            await trio.sleep(0.01)  # the monotonic clock moves on
            with trio.fail_after(30):  # a guard: before the fix it waited for the lock
                response = await client.heartbeat(
                    c.BrokerHeartbeatRequest(1, lifecycle.broker_epoch, service.image.last_offset)
                )
            assert response.is_fenced is False
            assert service.tracker.last_heartbeat_ms_by_broker[1] > heard_before
        await client.aclose()
        nursery.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def _controller_in_a_thread(service: ControllerService):
    """The controller service on an event loop (and thread) of its own, as in its own process;
    yields `stall(seconds)`, which blocks that loop (a controller starved of CPU, or busy
    applying a large change) and returns when it runs again."""
    started, stop = threading.Event(), threading.Event()
    token: list[trio.lowlevel.TrioToken] = []

    async def controller_process() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(service.run)
            token.append(trio.lowlevel.current_trio_token())
            started.set()
            await trio.to_thread.run_sync(stop.wait)
            nursery.cancel_scope.cancel()

    async def stall(seconds: float) -> None:
        await trio.to_thread.run_sync(
            lambda: trio.from_thread.run_sync(time.sleep, seconds, trio_token=token[0])
        )

    thread = threading.Thread(target=trio.run, args=(controller_process,))
    thread.start()
    try:
        assert await trio.to_thread.run_sync(started.wait, 30)
        yield stall
    finally:
        stop.set()
        await trio.to_thread.run_sync(thread.join, 30)


@contextlib.asynccontextmanager
async def _a_broker_of_a_stallable_controller(tmp_path, props: dict | None = None):
    """A registered, unfenced broker (heartbeating from this loop) of a one-voter controller on
    its own loop; yields (config, service, lifecycle, stall)."""
    config = one_node_config(tmp_path, free_base_port(1), props or {})
    service = ControllerService(config, seed=1)
    async with _controller_in_a_thread(service) as stall:
        voters, secret = config.controller_voters, config.props["controller.quorum.password"]
        lifecycle = BrokerLifecycle(
            config, ControllerClient(voters, secret=secret), ControllerClient(voters, secret=secret)
        )
        async with trio.open_nursery() as nursery:
            with trio.fail_after(30):
                await nursery.start(lifecycle.run)
                await lifecycle.unfenced.wait()
            yield config, service, lifecycle, stall
            nursery.cancel_scope.cancel()


async def _broker_keeps_its_session_through(tmp_path, caplog, props: dict, stalls) -> list[str]:
    """Run `await stalls(stall)` beside a registered broker of a stallable controller and check
    that the broker kept its session; returns the controller's log messages."""
    async with _a_broker_of_a_stallable_controller(tmp_path, props) as running:
        _, service, lifecycle, stall = running
        epoch = lifecycle.broker_epoch
        caplog.set_level(logging.INFO, logger="quorum.service")
        await stalls(stall)
        await trio.sleep(1.5)  # the controller catches up; a fence would have been now
        messages = [r.getMessage() for r in caplog.records]
        assert [m for m in messages if "broker fenced" in m] == []
        assert not service.image.brokers[1].fenced
        assert lifecycle.broker_epoch == epoch and not lifecycle.is_fenced
        return messages


async def test_a_broker_that_gives_up_on_a_stalled_controller_is_not_fenced(tmp_path, caplog):
    """The controller's process stalls for longer than a heartbeat attempt (half the session)
    but less than the session. The broker gives up on that connection and calls again on a new
    one; the old one must stay open until the controller has heard it on the new one: the
    controller fences a broker whose heartbeat connection closed unless it heartbeats again
    within broker.disconnect.fence.ms (1 ms here), the fast path for a killed broker. Closing it
    at once got the broker fenced as soon as the controller came back (ControllerClient's make
    before break)."""

    async def controller_then_broker_stall(stall) -> None:
        async with trio.open_nursery() as stalls:
            stalls.start_soon(stall, 2.0)  # > the 1.5 s attempt, < the 3 s session
            await trio.sleep(1.9)
            # The broker's process stalls too as the controller comes back, so the controller
            # sees whatever the broker did to the old connection before it can hear the broker
            # on a new one (without this, that was a race).
            time.sleep(0.4)

    props = {"broker.session.timeout.ms": 3000, "broker.disconnect.fence.ms": 1}
    await _broker_keeps_its_session_through(tmp_path, caplog, props, controller_then_broker_stall)


async def test_a_controller_that_could_not_run_for_a_whole_session_fences_nobody(tmp_path, caplog):
    """The node's event loop is blocked for longer than its broker's session (its broker
    applying a 3,000-partition topic did that): the controller and the broker beside it both
    stop, and when they run again the controller's fencing task is due at once while the
    broker's next heartbeat is only being sent. The controller must not fence the broker for
    the silence its own stall caused (broker_heartbeats.py on_stall); it did."""

    async def both_stall(stall) -> None:
        async with trio.open_nursery() as stalls:
            stalls.start_soon(stall, 3.5)  # > the 2 s session
            await trio.sleep(0.05)
            time.sleep(3.5)  # the broker's loop (the same loop, in a node) stops too

    props = {"broker.session.timeout.ms": 2000}
    messages = await _broker_keeps_its_session_through(tmp_path, caplog, props, both_stall)
    assert any("did not run for" in m for m in messages), messages


@contextlib.asynccontextmanager
async def _a_broker_and_a_channel_to_a_stallable_controller(tmp_path):
    """A registered broker and a channel (attempts of 500 ms) to a controller on its own event
    loop; yields (service, channel, stall), the channel's connection already open, so the next
    request goes out on it at once and waits in the stalled controller's socket."""
    async with _a_broker_of_a_stallable_controller(tmp_path) as (config, service, _, stall):
        secret = config.props["controller.quorum.password"]
        channel = ControllerClient(config.controller_voters, secret=secret, request_timeout_ms=500)
        topics = tuple(c.CreatableTopic(name, 1, 1, topic_id=uuid.uuid4()) for name in "tu")
        created = await channel.create_topics(c.CreateTopicsRequest(topics))
        assert [r.error_code for r in created.results] == [ErrorCode.NONE] * 2
        yield service, channel, stall
        await channel.aclose()


async def _during_a_stall(stall, call):
    """`call()`'s answer, made while the controller stalls for longer than two attempts: the
    first attempt waits in its socket and is applied when the controller comes back."""
    async with trio.open_nursery() as stalls:
        stalls.start_soon(stall, 1.2)  # the first attempts time out (500 ms each)
        await trio.sleep(0.05)
        with trio.fail_after(30):
            return await call()


async def test_a_create_topics_retried_after_a_stall_answers_as_the_creation_did(tmp_path):
    """A forwarded CreateTopics whose attempt timed out while the controller was stalled, and
    was applied when it came back, is retried by the controller client: the retry must answer
    as the creation did (the broker drew the topic's id once for the request), not
    TOPIC_ALREADY_EXISTS for the topic the same request just created."""
    async with _a_broker_and_a_channel_to_a_stallable_controller(tmp_path) as (
        service, channel, stall,
    ):  # fmt: skip
        topic_id = uuid.uuid4()
        request = c.CreateTopicsRequest((c.CreatableTopic("v", 3, 1, topic_id=topic_id),))
        response = await _during_a_stall(stall, lambda: channel.create_topics(request))
        (result,) = response.results
        assert (result.error_code, result.topic_id) == (ErrorCode.NONE, topic_id)
        assert (result.num_partitions, result.replication_factor) == (3, 1)
        assert service.image.topic("v").topic_id == topic_id
        # A new request for the same name (another id) is refused as before.
        again = await channel.create_topics(c.CreateTopicsRequest((c.CreatableTopic(
            "v", 3, 1, topic_id=uuid.uuid4()),)))  # fmt: skip
        assert again.results[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS


async def test_a_create_partitions_retried_after_a_stall_answers_as_the_increase_did(tmp_path):
    """A forwarded CreatePartitions whose first attempt was applied when the stalled controller
    came back is retried: the retry finds the topic at the count it asks for, and must answer
    as the increase did (its last new partition carries the request's id), not
    INVALID_PARTITIONS. A fresh request for the same count is still refused, as Kafka does."""
    async with _a_broker_and_a_channel_to_a_stallable_controller(tmp_path) as (
        service, channel, stall,
    ):  # fmt: skip
        grow = c.CreatePartitionsRequest(
            (c.CreatePartitionsTopic("t", 3),), request_id=uuid.uuid4()
        )
        response = await _during_a_stall(stall, lambda: channel.create_partitions(grow))
        assert [(r.name, r.error_code) for r in response.results] == [("t", ErrorCode.NONE)]
        assert len(service.image.topic("t").partitions) == 3
        for request_id in (uuid.uuid4(), None):  # another request for the same count
            again = c.CreatePartitionsRequest(
                (c.CreatePartitionsTopic("t", 3),), request_id=request_id
            )
            (result,) = (await channel.create_partitions(again)).results
            assert result.error_code == ErrorCode.INVALID_PARTITIONS


async def test_a_delete_topics_retried_after_a_stall_answers_as_the_deletion_did(tmp_path):
    """A forwarded DeleteTopics (one topic by name, one by id) whose first attempt was applied
    when the stalled controller came back is retried: the retry must answer as the deletion
    did, not UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID for the topics the same request
    just deleted. A fresh request for them still gets those answers."""
    async with _a_broker_and_a_channel_to_a_stallable_controller(tmp_path) as (
        service, channel, stall,
    ):  # fmt: skip
        t_id, u_id = (service.image.topic(name).topic_id for name in "tu")
        delete = c.DeleteTopicsRequest(("t",), (u_id,), request_id=uuid.uuid4())
        response = await _during_a_stall(stall, lambda: channel.delete_topics(delete))
        assert [(r.name, r.topic_id, r.error_code) for r in response.results] == [
            ("t", t_id, ErrorCode.NONE),
            ("u", u_id, ErrorCode.NONE),
        ]
        assert service.image.topic("t") is None and service.image.topic("u") is None
        again = c.DeleteTopicsRequest(("t",), (u_id,), request_id=uuid.uuid4())
        assert [r.error_code for r in (await channel.delete_topics(again)).results] == [
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ErrorCode.UNKNOWN_TOPIC_ID,
        ]
