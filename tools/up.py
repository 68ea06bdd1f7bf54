"""`quorumlog up`: format a local cluster directory and run one OS process per node.

`LocalCluster` is the reusable part (also used by `quorumlog demo`): an async context manager
that starts the nodes, yields once they are ready and stops them all on exit. The supervisor
starts `quorumlog node --data-dir DIR/node-i` for every node, waits for each to
say it is ready (a `READY` line on its stdout; its logs go to `DIR/node-i/node.log`), prints the
bootstrap servers and stays in the foreground. SIGINT/SIGTERM stop every node cleanly (SIGTERM,
then SIGKILL after a grace period). A node that dies is reported, not restarted: the operator
restarts it with `quorumlog node`, and the rest keep serving. Nodes die with the supervisor:
each inherits the read end of a pipe whose write end only the supervisor holds, and stops
cleanly at its end-of-file (`quorumlog node --parent-pipe-fd`, see tools/node_cmd.py), so a
SIGKILLed `up` or `demo` leaves no node behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import click
import trio

from tools.cli_support import COMMAND_CONFIG_ENV
from tools.cluster_layout import ClusterLayout, format_cluster
from tools.node_format import FormatError
from tools.secure_cluster import CLIENT_PROPERTIES, client_settings

READY_LINE = b"READY"
STOP_GRACE_S = 30.0
READY_TIMEOUT_S = 120.0
MAX_READY_LINE_BYTES = 4096


def node_command(node_dir: Path, parent_pipe_fd: int | None = None) -> list[str]:
    command = [sys.executable, "-m", "tools", "node", "--data-dir", str(node_dir)]
    if parent_pipe_fd is not None:
        command += ["--parent-pipe-fd", str(parent_pipe_fd)]
    return command


class NodeProcess:
    """One child node process and its readiness."""

    def __init__(self, node_id: int, node_dir: Path, prefix: tuple[str, ...] = ()) -> None:
        """`prefix`: a command the node runs under (e.g. `ip netns exec NS`: its own host)."""
        self.node_id = node_id
        self.node_dir = node_dir
        self.prefix = prefix
        self.process: trio.Process | None = None
        self.ready = trio.Event()
        self._lifeline_fd: int | None = None  # the write end of the node's parent pipe

    async def start(self) -> None:
        self.close_lifeline()  # a restart: the old node's pipe
        log = open(self.node_dir / "node.log", "ab")  # noqa: SIM115 - the child owns it
        read_fd, self._lifeline_fd = os.pipe()  # both non-inheritable (PEP 446)
        try:
            self.process = await trio.lowlevel.open_process(
                [*self.prefix, *node_command(self.node_dir, read_fd)],
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # our signal handling decides when children stop
                pass_fds=(read_fd,),  # only the read end; close_fds keeps the rest out
            )
        finally:
            os.close(read_fd)
            log.close()

    async def restart(self, nursery: trio.Nursery) -> None:
        """Start the node again after it exited; `ready` is set (by a watcher in `nursery`)
        once the new process says READY."""
        self.ready = trio.Event()
        await self.start()
        nursery.start_soon(self.watch_ready)

    def close_lifeline(self) -> None:
        """Close our end of the node's parent pipe (the node then stops, if still running)."""
        if self._lifeline_fd is not None:
            os.close(self._lifeline_fd)
            self._lifeline_fd = None

    async def watch_ready(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        buffer = b""
        async for chunk in self.process.stdout:
            buffer = (buffer + chunk)[-MAX_READY_LINE_BYTES:]
            if READY_LINE in buffer.splitlines():
                self.ready.set()
                return

    def signal(self, signum: int) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signum)


async def stop_all(nodes: list[NodeProcess]) -> None:
    for node in nodes:
        node.signal(signal.SIGTERM)
    with trio.move_on_after(STOP_GRACE_S):
        for node in nodes:
            if node.process is not None:
                await node.process.wait()
    for node in nodes:
        node.signal(signal.SIGKILL)
        if node.process is not None:
            await node.process.wait()
        node.close_lifeline()


class ClusterNotReadyError(Exception):
    """Fewer nodes than required said READY before the timeout (or they exited)."""


class LocalCluster:
    """`async with LocalCluster(layout) as cluster:` -- every node ready inside, all stopped after.

    Entering formats the directory, starts one process per node and waits (up to
    `ready_timeout_s`) until each node is ready or has exited; fewer than `min_ready` ready
    nodes (default: all) stop everything and raise ClusterNotReadyError. While inside, a node
    that exits is reported through `echo`. Leaving (normally, on an error, on cancellation)
    stops every node: SIGTERM, SIGKILL after STOP_GRACE_S, shielded from cancellation. The
    body's exception propagates unchanged (the watcher tasks are cancelled, never raise).
    """

    def __init__(
        self,
        layout: ClusterLayout,
        *,
        min_ready: int | None = None,
        ready_timeout_s: float = READY_TIMEOUT_S,
        echo=click.echo,
        prefix: Callable[[int], tuple[str, ...]] | None = None,
    ) -> None:
        """`prefix(node_id)`: the command node node_id runs under (NodeProcess)."""
        self.layout = layout
        self.min_ready = layout.node_count if min_ready is None else min_ready
        self.ready_timeout_s = ready_timeout_s
        self.echo = echo
        self.nodes = [
            NodeProcess(i, layout.node_dir(i), prefix(i) if prefix else ()) for i in layout.node_ids
        ]

    @property
    def bootstrap_servers(self) -> str:
        return self.layout.bootstrap_servers

    @property
    def ready_nodes(self) -> list[NodeProcess]:
        return [node for node in self.nodes if node.ready.is_set()]

    async def __aenter__(self) -> LocalCluster:
        format_cluster(self.layout)
        self._nursery_manager = trio.open_nursery()
        self._nursery = await self._nursery_manager.__aenter__()
        try:
            for node in self.nodes:
                await node.start()
            for node in self.nodes:
                self._nursery.start_soon(node.watch_ready)
            with trio.move_on_after(self.ready_timeout_s):
                async with trio.open_nursery() as each:
                    for node in self.nodes:
                        each.start_soon(_settle, node)
            if len(self.ready_nodes) < max(1, self.min_ready):
                raise ClusterNotReadyError(
                    f"{len(self.ready_nodes)} of {len(self.nodes)} nodes ready; "
                    f"see {self.layout.data_dir}/node-*/node.log"
                )
            for node in self.nodes:
                self._nursery.start_soon(_report_exit, node, self.echo)
        except BaseException:
            await self._stop()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> bool:
        await self._stop()
        return False

    async def _stop(self) -> None:
        self._nursery.cancel_scope.cancel()  # the watchers: they only ever end cancelled
        try:
            await self._nursery_manager.__aexit__(None, None, None)
        finally:
            with trio.CancelScope(shield=True):
                await stop_all(self.nodes)


async def _settle(node: NodeProcess) -> None:
    """Return when the node is ready or its process has exited."""
    process = node.process
    assert process is not None
    async with trio.open_nursery() as race:

        async def ready() -> None:
            await node.ready.wait()
            race.cancel_scope.cancel()

        async def exited() -> None:
            await process.wait()
            race.cancel_scope.cancel()

        race.start_soon(ready)
        race.start_soon(exited)


async def _report_exit(node: NodeProcess, echo) -> None:
    assert node.process is not None
    code = await node.process.wait()
    echo(
        f"node-{node.node_id} exited with code {code}; the other nodes keep running "
        f"(restart it with: quorumlog node --data-dir {node.node_dir})",
        err=True,
    )


async def run_cluster(layout: ClusterLayout, echo=click.echo) -> int:
    """`up`: a LocalCluster in the foreground until SIGINT/SIGTERM; the exit code."""
    code = 0
    ready = trio.Event()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:

            async def serve() -> None:
                nonlocal code
                try:
                    async with LocalCluster(layout, min_ready=1, echo=echo) as cluster:
                        echo(
                            f"quorumlog cluster ready: {len(cluster.ready_nodes)} of "
                            f"{len(cluster.nodes)} nodes in {layout.data_dir}"
                        )
                        echo(f"bootstrap servers: {layout.bootstrap_servers}")
                        settings = client_settings(layout.data_dir)
                        if settings:
                            echo(f"client settings ({layout.data_dir / CLIENT_PROPERTIES}):")
                            for name, value in settings.items():
                                echo(f"  {name}={value}")
                            path = layout.data_dir / CLIENT_PROPERTIES
                            echo(f"quorumlog tools: --command-config {path} (or "
                                 f"{COMMAND_CONFIG_ENV}={path}); kcat: -F {path}")  # fmt: skip
                        ready.set()
                        await trio.sleep_forever()
                except ClusterNotReadyError:
                    echo(f"error: nodes not ready; see {layout.data_dir}/node-*/node.log", err=True)
                    code = 1
                nursery.cancel_scope.cancel()

            async def on_signal() -> None:
                nonlocal code
                async for signum in signals:
                    if ready.is_set():
                        echo(f"received {signal.Signals(signum).name}, stopping every node")
                    else:
                        code = 130
                    nursery.cancel_scope.cancel()
                    return

            nursery.start_soon(serve)
            nursery.start_soon(on_signal)
    return code


@click.command("up")
@click.option("--nodes", "node_count", default=3, show_default=True, help="number of nodes")
@click.option(
    "--data-dir",
    default="./data",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="cluster directory (formatted on first use, reused after)",
)
@click.option("--base-port", default=9092, show_default=True, help="Kafka port of node 1")
@click.option("--controller-base-port", type=int, help="controller port of node 1 [base+100]")
@click.option("--raft-base-port", type=int, help="Raft port of node 1 [base+200]")
@click.option(
    "--secure",
    is_flag=True,
    help="format the cluster with SASL_SSL listeners, a generated CA and an admin user "
    "(first start only; prints the client settings)",
)
def up(node_count, data_dir, base_port, controller_base_port, raft_base_port, secure) -> None:
    """Start a local cluster, one process per node, in the foreground.

    \b
    Examples:
      quorumlog up                      # 3 nodes in ./data, Kafka on 9092-9094
      quorumlog up --nodes 1 --data-dir /tmp/ql --base-port 19092
      quorumlog up --secure --data-dir /tmp/qls  # TLS + SASL/SCRAM, prints client settings
    """
    try:
        layout = ClusterLayout(
            data_dir.resolve(), node_count, base_port, controller_base_port, raft_base_port,
            secure=secure,
        )  # fmt: skip
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        format_cluster(layout)  # before any node starts (LocalCluster's own call then keeps it)
    except FormatError as exc:  # e.g. a node directory holding files but no node.toml
        raise click.ClickException(str(exc)) from None
    sys.exit(trio.run(run_cluster, layout))
