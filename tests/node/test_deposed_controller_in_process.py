"""A controller that loses leadership goes quiet (in process: a two-voter quorum and a broker on
real loopback sockets, the standby voter stopped so the active one loses its majority).

Its fencing task kept reading the heartbeat graces of the brokers whose connections it closed
on stepping down; nothing fences or forgets those once the node is a standby, so their deadline
stayed in the past and the task looped without sleeping for as long as the node stayed one:
35-100 % of a core per deposed controller, seen on the suite's shared clusters after spurious
elections, where it made the next election likelier still."""

from __future__ import annotations

import pytest
import trio
from cluster_harness import free_base_port, in_process_config

from quorum.broker_lifecycle import BrokerLifecycle
from quorum.controller_client import ControllerClient
from quorum.service import ControllerService

pytestmark = pytest.mark.timeout(60)


class _FenceLoopSteps(trio.abc.Instrument):
    """Counts the steps of one service's fencing task: each is one pass of its loop."""

    def __init__(self, service: ControllerService) -> None:
        self.service = service
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        frame = getattr(task.coro, "cr_frame", None)
        if frame is not None and frame.f_code.co_name == "_fence_loop":
            if frame.f_locals.get("self") is self.service:
                self.steps += 1


async def _serve(service: ControllerService, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Run `service` until the cancel scope handed back is cancelled (its node stops)."""
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            await nursery.start(service.run)
            task_status.started(scope)


async def test_a_deposed_controller_does_not_spin(tmp_path):
    base = free_base_port(3)
    # Two combined nodes and a broker; a 100 ms grace after a heartbeat connection closes.
    configs = {i: in_process_config(tmp_path / f"node-{i}", base, i, 2, {
        "broker.disconnect.fence.ms": 100,
    }) for i in (1, 2, 3)}  # fmt: skip
    services = {i: ControllerService(configs[i], seed=i) for i in (1, 2)}
    broker_config = configs[3]
    voters = broker_config.controller_voters
    async with trio.open_nursery() as nursery:
        scopes = {i: await nursery.start(_serve, s) for i, s in services.items()}
        lifecycle = BrokerLifecycle(
            broker_config,
            ControllerClient(voters, secret="pw"),
            ControllerClient(voters, secret="pw"),
        )
        with trio.fail_after(30):
            await nursery.start(lifecycle.run)
            await lifecycle.unfenced.wait()
        active_id = next(i for i, s in services.items() if s.is_active)
        deposed = services[active_id]
        assert deposed.raft is not None
        # The broker heartbeats on a connection to the active controller; the standby stops,
        # so the active one is cut off from its majority and steps down (pysyncobj's leader
        # fallback timeout, 2 s), closing that connection.
        scopes[3 - active_id].cancel()
        with trio.fail_after(30):
            while deposed.raft.is_leader:
                await trio.sleep(0.05)
        await trio.sleep(0.5)  # the broker connection's 100 ms grace has run out
        counter = _FenceLoopSteps(deposed)
        trio.lowlevel.add_instrument(counter)
        try:
            await trio.sleep(1.0)
        finally:
            trio.lowlevel.remove_instrument(counter)
        assert not deposed.is_active
        # A pass every fence_check_interval_ms (250 ms here) and on wake-ups: a handful. The
        # spinning loop made thousands of passes in the same second.
        assert counter.steps <= 20, f"{counter.steps} passes of the fencing loop in 1 s"
        nursery.cancel_scope.cancel()
