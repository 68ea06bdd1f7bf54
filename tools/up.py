"""`quorumlog up`: format a local cluster directory and run one OS process per node.

The supervisor starts `quorumlog node --data-dir DIR/node-i` for every node, waits for each to
say it is ready (a `READY` line on its stdout; its logs go to `DIR/node-i/node.log`), prints the
bootstrap servers and stays in the foreground. SIGINT/SIGTERM stop every node cleanly (SIGTERM,
then SIGKILL after a grace period). A node that dies is reported, not restarted: the operator
restarts it with `quorumlog node`, and the rest keep serving.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import click
import trio

from tools.cluster_layout import ClusterLayout, format_cluster

READY_LINE = b"READY"
STOP_GRACE_S = 30.0
READY_TIMEOUT_S = 120.0
MAX_READY_LINE_BYTES = 4096


def node_command(node_dir: Path) -> list[str]:
    return [sys.executable, "-m", "tools", "node", "--data-dir", str(node_dir)]


class NodeProcess:
    """One child node process and its readiness."""

    def __init__(self, node_id: int, node_dir: Path) -> None:
        self.node_id = node_id
        self.node_dir = node_dir
        self.process: trio.Process | None = None
        self.ready = trio.Event()

    async def start(self) -> None:
        log = open(self.node_dir / "node.log", "ab")  # noqa: SIM115 - the child owns it
        try:
            self.process = await trio.lowlevel.open_process(
                node_command(self.node_dir),
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # our signal handling decides when children stop
            )
        finally:
            log.close()

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


async def run_cluster(layout: ClusterLayout, echo=click.echo) -> int:
    format_cluster(layout)
    nodes = [NodeProcess(i, layout.node_dir(i)) for i in layout.node_ids]
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        try:
            for node in nodes:
                await node.start()
            async with trio.open_nursery() as nursery:
                for node in nodes:
                    nursery.start_soon(node.watch_ready)
                    nursery.start_soon(_report_exit, node, echo)
                code = await _serve(layout, nodes, signals, echo)
                nursery.cancel_scope.cancel()
            return code
        finally:
            with trio.CancelScope(shield=True):
                await stop_all(nodes)


async def _serve(layout: ClusterLayout, nodes: list[NodeProcess], signals, echo) -> int:
    """Wait until every node is ready or gone, announce the cluster, wait for a signal."""
    interrupted = False
    with trio.move_on_after(READY_TIMEOUT_S) as ready_scope:
        async with trio.open_nursery() as waiters:

            async def settle(node: NodeProcess) -> None:
                assert node.process is not None
                async with trio.open_nursery() as race:

                    async def ready() -> None:
                        await node.ready.wait()
                        race.cancel_scope.cancel()

                    async def exited() -> None:
                        await node.process.wait()
                        race.cancel_scope.cancel()

                    race.start_soon(ready)
                    race.start_soon(exited)

            async def all_settled() -> None:
                async with trio.open_nursery() as each:
                    for node in nodes:
                        each.start_soon(settle, node)
                waiters.cancel_scope.cancel()

            async def on_signal() -> None:
                nonlocal interrupted
                async for _ in signals:
                    interrupted = True
                    waiters.cancel_scope.cancel()
                    return

            waiters.start_soon(all_settled)
            waiters.start_soon(on_signal)
    if interrupted:
        return 130
    ready = [node for node in nodes if node.ready.is_set()]
    if ready_scope.cancelled_caught or not ready:
        echo(f"error: nodes not ready; see {layout.data_dir}/node-*/node.log", err=True)
        return 1
    echo(f"quorumlog cluster ready: {len(ready)} of {len(nodes)} nodes in {layout.data_dir}")
    echo(f"bootstrap servers: {layout.bootstrap_servers}")
    async for signum in signals:
        echo(f"received {signal.Signals(signum).name}, stopping every node")
        break
    return 0


async def _report_exit(node: NodeProcess, echo) -> None:
    assert node.process is not None
    code = await node.process.wait()
    echo(
        f"node-{node.node_id} exited with code {code}; the other nodes keep running "
        f"(restart it with: quorumlog node --data-dir {node.node_dir})",
        err=True,
    )


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
def up(node_count, data_dir, base_port, controller_base_port, raft_base_port) -> None:
    """Start a local cluster, one process per node, in the foreground.

    \b
    Examples:
      quorumlog up                      # 3 nodes in ./data, Kafka on 9092-9094
      quorumlog up --nodes 1 --data-dir /tmp/ql --base-port 19092
    """
    try:
        layout = ClusterLayout(
            data_dir.resolve(), node_count, base_port, controller_base_port, raft_base_port
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    sys.exit(trio.run(run_cluster, layout))
