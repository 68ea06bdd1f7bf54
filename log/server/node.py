"""The node process runtime: one `run_node(config, ready=...)` per `quorumlog node`.

Start-up (per process.roles): write DIR/node.pid; the controller role (ControllerService:
Raft seat + CONTROLLER listener); the broker role: LogManager (recovers the partition logs),
BrokerLifecycle (registration, heartbeats, metadata following over TCP to
controller.quorum.voters: the same path on combined and broker-only nodes) and the Kafka
listener (KafkaServer, log/server/broker.py; it shuts the LogManager down on exit).
`ready()` is called once the Kafka listener serves and the broker is unfenced
(controller-only nodes: once the CONTROLLER listener serves).

Shutdown on SIGTERM/SIGINT: controlled shutdown (leaderships move away), stop serving,
LogManager.shutdown() (the clean-shutdown marker), Raft stops; run_node returns normally.
Log lines (one per state change, with the node id) go to the `logging` root (stderr);
recovery logs one line per partition log loaded (with its duration) and then a summary.
`on_log_loaded` (LogManager's hook) lets `quorumlog node` draw a progress bar too.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable

import trio

from log.common.node_config import NodeConfig
from log.security.tls import controller_contexts, controller_peer_check
from log.server.broker import KafkaServer
from log.server.metrics import NodeMetrics
from log.storage.config import default_log_config
from log.storage.log_cleaner import CleanerConfig
from log.storage.manager import LogManager, OnLogLoaded
from quorum.broker_lifecycle import BrokerLifecycle
from quorum.controller_client import ControllerClient
from quorum.service import ControllerService

logger = logging.getLogger(__name__)

PID_FILE = "node.pid"
CONTROLLED_SHUTDOWN_TIMEOUT_S = 3.0  # the quorum may be stopping too (`up` stops all nodes)


def _wall_ms() -> int:
    return int(time.time() * 1000)


class Node:
    """The running pieces of one node (for tests and tools: `node.controller`, ...)."""

    def __init__(self, config: NodeConfig, *, on_log_loaded: OnLogLoaded | None = None) -> None:
        self.config = config
        self.on_log_loaded = on_log_loaded
        self.controller: ControllerService | None = None
        self.lifecycle: BrokerLifecycle | None = None
        self.log_manager: LogManager | None = None
        self.kafka_port: int | None = None
        self.controller_port: int | None = None
        self.metrics = NodeMetrics(config.node_id)
        self.metrics_port: int | None = None  # serving /metrics (metrics.port > 0)

    async def run(self, ready: Callable[[], None], *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Start every role, call `ready()`, serve until SIGTERM/SIGINT (also during start-up,
        e.g. while waiting for a quorum that never forms), then shut down cleanly."""
        node_id = self.config.node_id
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            try:
                async with trio.open_nursery() as nursery:

                    async def start_roles() -> None:
                        await self._start_roles(nursery)
                        logger.info("node %d: ready", node_id)
                        ready()
                        task_status.started(self)

                    nursery.start_soon(start_roles)
                    async for signum in signals:
                        name = signal.Signals(signum).name
                        logger.info("node %d: %s, shutting down", node_id, name)
                        break
                    if (
                        self.lifecycle is not None
                        and self.config.props["controlled.shutdown.enable"]
                    ):
                        with trio.move_on_after(CONTROLLED_SHUTDOWN_TIMEOUT_S) as scope:
                            await self.lifecycle.controlled_shutdown()
                        if scope.cancelled_caught:
                            # Like BrokerLifecycle's own failure line: our leaderships did not
                            # move (e.g. the whole cluster is stopping, no quorum); the next
                            # start registers with the clean-shutdown marker's broker epoch.
                            logger.warning("node %d: controlled shutdown failed: no answer "
                                           "within %.1f s", node_id,
                                           CONTROLLED_SHUTDOWN_TIMEOUT_S)  # fmt: skip
                    nursery.cancel_scope.cancel()
            finally:
                self.metrics.close()
                if self.log_manager is not None:
                    self.log_manager.shutdown(_wall_ms())
                logger.info("node %d: stopped", node_id)

    async def _start_roles(self, nursery: trio.Nursery) -> None:
        self._serve_metrics()
        # CONTROLLER:SSL: TLS on the controller listener and on every broker's way to it
        self._controller_server_tls, self._controller_client_tls = controller_contexts(self.config)
        if "controller" in self.config.roles:
            self.controller = ControllerService(
                self.config,
                metrics=self.metrics,
                ssl_context=self._controller_server_tls,
                peer_check=controller_peer_check(self.config),
            )
            self.controller_port = await nursery.start(self.controller.run)
        if "broker" in self.config.roles:
            await self._start_broker(nursery)

    async def _start_broker(self, nursery: trio.Nursery) -> None:
        config = self.config
        start_s = time.perf_counter()

        def loaded(topic: str, partition: int, elapsed_ms: float, index: int, total: int) -> None:
            logger.info("log recovered node=%d topic=%s partition=%d duration_ms=%.1f log=%d/%d",
                        config.node_id, topic, partition, elapsed_ms, index, total)  # fmt: skip
            if self.on_log_loaded is not None:
                self.on_log_loaded(topic, partition, elapsed_ms, index, total)

        self.log_manager = manager = await trio.to_thread.run_sync(
            lambda: LogManager(
                config.log_dir,
                default_log_config(config),
                now_ms=_wall_ms(),
                on_log_loaded=loaded,
                cleaner_config=CleanerConfig(
                    enable=config.props["log.cleaner.enable"],
                    backoff_ms=config.props["log.cleaner.backoff.ms"],
                ),
            )
        )
        logger.info("log recovery done node=%d logs=%d clean_shutdown=%s duration_ms=%.0f",
                    config.node_id, len(manager.logs), manager.had_clean_shutdown,
                    (time.perf_counter() - start_s) * 1000)  # fmt: skip
        secret = config.props["controller.quorum.password"]
        tls = self._controller_client_tls
        client = ControllerClient(config.controller_voters, secret=secret, ssl_context=tls)
        # Metadata may come from any controller: a combined node asks its own first.
        local_first = sorted(config.controller_voters, key=lambda v: v.node_id != config.node_id)
        fetch_client = ControllerClient(local_first, secret=secret, ssl_context=tls)
        self.lifecycle = lifecycle = BrokerLifecycle(
            config,
            client,
            fetch_client,
            previous_broker_epoch=manager.previous_broker_epoch,
            log_dir_empty=manager.log_dir_was_empty,
        )
        await nursery.start(lifecycle.run)
        # One client per purpose (each carries one request at a time): heartbeats never wait
        # behind a forwarded admin call or the metadata long-poll.
        channel = ControllerClient(config.controller_voters, secret=secret, ssl_context=tls)
        lifecycle.add_controller_client(channel)  # learns controllers added later
        server = KafkaServer(
            config,
            self.log_manager,
            lifecycle,
            channel,
            broker_epoch_getter=lambda: lifecycle.broker_epoch,
            metrics=self.metrics,
        )
        self.kafka_port = await nursery.start(server.run)
        await lifecycle.unfenced.wait()

    def _serve_metrics(self) -> None:
        port = self.config.props["metrics.port"]
        if port <= 0:
            return
        listeners = self.config.listeners
        host = listeners[0].host if listeners else "127.0.0.1"
        try:
            self.metrics_port = self.metrics.serve(host, port)
        except OSError as exc:  # observability must not keep a node from serving
            logger.warning("metrics endpoint failed node=%d port=%d error=%s",
                           self.config.node_id, port, exc)  # fmt: skip
            return
        logger.info("metrics endpoint node=%d url=http://%s:%d/metrics",
                    self.config.node_id, host, self.metrics_port)  # fmt: skip


async def run_node(
    config: NodeConfig, *, ready: Callable[[], None], on_log_loaded: OnLogLoaded | None = None
) -> None:
    """Run a node until SIGTERM/SIGINT; returns after a clean shutdown. `on_log_loaded` is
    called (from a worker thread) per partition log recovered at start-up."""
    config.node_dir.mkdir(parents=True, exist_ok=True)
    pid_path = config.node_dir / PID_FILE
    pid_path.write_text(f"{os.getpid()}\n")
    await Node(config, on_log_loaded=on_log_loaded).run(ready)
