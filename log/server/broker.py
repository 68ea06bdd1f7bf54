"""KafkaServer: the broker's trio TCP server -- listener, connections, request dispatch.

    server = KafkaServer(config, log_manager, metadata, controller, broker_epoch_getter=...)
    port = await nursery.start(server.run)

`run` binds every client listener (`listeners` but the controller's; the inter-broker one's
port 0 picks a free port; `task_status.started(port)` reports that one),
runs the ReplicaManager (which follows the metadata image) and the group coordinator, drives
`LogManager.tick` (sleeping until the next due job), serves connections until cancelled, and
on the way out shuts the LogManager down (flush, checkpoints, clean-shutdown marker) --
node.py need not call it. Everything a handler uses is built here, whole, before it serves:
the BrokerContext.

One task per connection drives the sans-IO `ServerConnection`: read at most MAX_READ_BYTES at a
time and only when the connection has no whole request buffered (so a client that pipelines
stops being read -- back-pressure -- instead of growing our buffers); requests on a connection
are taken one at a time in arrival order, like Kafka (which mutes a connection while its
request is processed): that keeps an idempotent producer's pipelined batches in sequence order.
One difference: an acks=-1 Produce is appended in that order, but its wait for the high
watermark does not hold the connection, so a producer's next pipelined batches are appended
(and replicated in the same follower fetch round) while it waits, up to
`max.inflight.requests.per.connection` unanswered requests; answers still leave in request
order. Kafka's replication round takes about a millisecond and rarely stalls; ours takes
several on a busy machine, and one stalled round made every request queued behind it wait a
whole round of its own after it (traced: bench/e2e_latency.py's docstring).
Responses are written with one vectored send, so Fetch records go from the log's read buffer to
the socket without a copy. A connection that has waited `connections.max.idle.ms` for its next
request is closed by one sweep over the waiting connections (`_close_idle_connections`), as
Kafka's Selector closes idle channels from its poll loop: no deadline is set per read.

Security (log/server/listener_security.py): an SSL / SASL_SSL listener runs the TLS handshake
first; a SASL_* connection's SaslServerAuthenticator answers SaslHandshake/SaslAuthenticate and
closes the connection on any other request before it is authenticated (or after its session
expired). The listener name and the principal go into the connection's `connection_state`
(`listener`, `principal`): Metadata answers the endpoints of the listener the client used.

Failures: a KafkaError from a handler answers the whole request with its code
(`error_response_body`); any other exception is logged with its traceback and answered
UNKNOWN_SERVER_ERROR; a BadRequest is answered and/or closes; an invalid frame closes; a
Produce with acks=0 that failed closes (Kafka's way to tell the client to refresh metadata).
Nothing a client sends can end the server: the connection task catches everything but
cancellation.
"""

from __future__ import annotations

import functools
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

import trio

from log.common import socket_io
from log.common.errors import ErrorCode, KafkaError
from log.common.node_config import NodeConfig, parse_overrides
from log.common.vectored_send import send_parts
from log.coordinator.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from log.coordinator.group_driver import GroupCoordinatorDriver
from log.coordinator.transaction_driver import TransactionCoordinatorDriver
from log.protocol.apis import error_response_body
from log.protocol.connection import (
    NEED_DATA,
    PAUSED,
    BadRequest,
    Request,
    SaslToken,
    ServerConnection,
    sasl_token_frame,
)
from log.protocol.sasl import SASL_AUTHENTICATE_RESPONSE, SASL_HANDSHAKE_RESPONSE
from log.replication.fetch_session import FetchSessionCache
from log.replication.replica_manager import ReplicaManager
from log.security.authenticator import (
    SASL_AUTHENTICATE_KEY,
    SASL_HANDSHAKE_KEY,
    SaslServerAuthenticator,
    SaslState,
)
from log.security.scram import SCRAM_MECHANISMS, ScramCredential
from log.server.authorization import Authorization
from log.server.broker_context import BrokerContext, wall_clock_ms
from log.server.broker_failure_view import BrokerFailureView
from log.server.connection_quotas import ConnectionQuotas
from log.server.handlers import ADVERTISED_API_KEYS, HANDLED_API_KEYS, HANDLERS
from log.server.handlers.produce import (
    append_produce,
    complete_produce,
    has_error,
    without_records,
)
from log.server.listener_security import ListenerSecurity, TlsHandshakeFailed
from log.server.metrics import NodeMetrics
from log.server.producer_ids import ProducerIdDriver
from log.server.repeat_limiter import RepeatLimiter
from log.server.request_memory import RequestMemory
from log.storage.manager import LogManager
from quorum.broker_interface import ControllerChannel, MetadataSource

logger = logging.getLogger(__name__)

MAX_READ_BYTES = 1 << 18  # one socket read
MIN_TICK_SLEEP_MS = 10  # LogManager.tick never spins, whatever it returns
# Idle connections are closed by one sweep (Kafka's Selector closes them from its poll loop),
# not by a deadline on each read. It runs every tenth of connections.max.idle.ms, but at least
# once a second and at most every 10 ms, so a connection is closed no later than one interval
# after it has waited connections.max.idle.ms for its next bytes.
IDLE_SWEEPS_PER_TIMEOUT = 10
MAX_IDLE_SWEEP_S = 1.0
MIN_IDLE_SWEEP_S = 0.01
RETRY_TICK_MS = 1000  # the tick also retries partitions whose change failed (replica_manager)
PRODUCE_API_KEY = 0


def _peer_address(stream: trio.SocketStream) -> str:
    """host:port of the client ('?' once it is gone)."""
    try:
        host, port = stream.socket.getpeername()[:2]
    except OSError:
        return "?"
    return f"{host}:{port}"


class KafkaServer:
    def __init__(
        self,
        config: NodeConfig,
        log_manager: LogManager,
        metadata: MetadataSource,
        controller: ControllerChannel,
        *,
        broker_epoch_getter: Callable[[], int] = lambda: -1,
        clock_ms: Callable[[], int] = wall_clock_ms,
        listen_port: int | None = None,
        listen_ports: dict[str, int] | None = None,
        metrics: NodeMetrics | None = None,
    ) -> None:
        # listen_port: None binds the inter-broker listener's port; 0 any free port (tests,
        # bench: NodeConfig refuses port 0), reported through task_status.started.
        # listen_ports: the same per listener name, for the other listeners (tests).
        self.listen_port = listen_port
        self.listen_ports = dict(listen_ports or {})
        self.security = ListenerSecurity.build_all(config, self._scram_credential)
        self.failed_authentication_count = 0
        self.broker_epoch_getter = broker_epoch_getter
        self.config = config
        self.log_manager = log_manager
        self.metrics = metrics if metrics is not None else NodeMetrics(config.node_id)
        self.acks_all_waiting_count = 0
        props = config.props
        self.quotas = ConnectionQuotas(
            props["max.connections"],
            props["max.connections.per.ip"],
            parse_overrides(props["max.connections.per.ip.overrides"]),
        )
        self.idle_timeout_s = props["connections.max.idle.ms"] / 1000
        # The connections waiting for their next bytes: their cancel scope -> since when.
        self._receiving: dict[trio.CancelScope, float] = {}
        request_bytes = props["queued.max.request.bytes"]  # -1: unbounded, as in Kafka
        one_frame = props["socket.request.max.bytes"] + 4  # one whole frame always fits
        self.request_memory = RequestMemory(
            sys.maxsize if request_bytes < 0 else max(request_bytes, one_frame)
        )
        self._refusals = RepeatLimiter(interval_s=60)
        self.replica_manager = ReplicaManager(
            config,
            log_manager,
            metadata,
            controller,
            broker_epoch_getter=broker_epoch_getter,
            clock_ms=clock_ms,
            on_isr_change=self._count_isr_change,
        )
        self.group_coordinator = GroupCoordinatorDriver(
            config, self.replica_manager, metadata, controller, clock_ms
        )
        self.producer_ids = ProducerIdDriver(
            config.node_id, controller, broker_epoch_getter, clock_ms
        )
        self.replica_manager.add_transaction_completion_listener(
            self.group_coordinator.on_transaction_completed
        )
        self.transaction_coordinator = TransactionCoordinatorDriver(
            config,
            self.replica_manager,
            metadata,
            controller,
            clock_ms,
            allocate_producer_id=self.producer_ids.generate_producer_id_now,
            ensure_producer_id=self.producer_ids.ensure_producer_id,
            group_partition_for=self.group_coordinator.partition_for,
        )
        self.add_partitions_to_txn_manager = AddPartitionsToTxnManager(
            config, self.replica_manager, self.transaction_coordinator
        )
        self.ctx = BrokerContext(
            config=config,
            log_manager=log_manager,
            metadata=metadata,
            controller=controller,
            replica_manager=self.replica_manager,
            group_coordinator=self.group_coordinator,
            producer_ids=self.producer_ids,
            transaction_coordinator=self.transaction_coordinator,
            add_partitions_to_txn_manager=self.add_partitions_to_txn_manager,
            fetch_sessions=FetchSessionCache(
                props["max.incremental.fetch.session.cache.slots"],
                sweep_interval_ms=max(props["replica.lag.time.max.ms"] // 4, 1),
            ),
            advertised_api_keys=ADVERTISED_API_KEYS,
            broker_failure_view=BrokerFailureView.from_props(props),
            clock_ms=clock_ms,
            authorization=Authorization(props),
        )
        self.max_frame_bytes = config.props["socket.request.max.bytes"]
        self.sasl_max_receive_bytes = config.props["sasl.server.max.receive.size"]
        self.max_in_flight = config.props["max.inflight.requests.per.connection"]
        self.legacy_versions = config.props["quorumlog.legacy.request.versions"]
        self.port: int | None = None
        self.ports: dict[str, int] = {}  # listener name -> bound port
        self.connection_count = 0
        self._register_state_metrics(metadata)

    def _scram_credential(self, mechanism_name: str, user: str) -> ScramCredential | None:
        """A SCRAM credential from the metadata image (AlterUserScramCredentials)."""
        key = (user, SCRAM_MECHANISMS[mechanism_name].mechanism_type)
        record = self.ctx.metadata.image.scram_credentials.get(key)
        if record is None:
            return None
        return ScramCredential(record.salt, record.stored_key, record.server_key,
                               record.iterations)  # fmt: skip

    def _register_state_metrics(self, metadata: MetadataSource) -> None:
        metrics, partitions = self.metrics, self.replica_manager
        metrics.gauge(
            "under_replicated_partitions",
            "Led partitions whose ISR is smaller than their replica set",
            lambda: sum(len(h.isr) < len(h.replicas) for h in partitions.leaders()),
        )
        metrics.gauge(
            "produce_acks_all_waiting",
            "Produce requests with acks=all in progress (waiting for the ISR to reach the high watermark)",
            lambda: self.acks_all_waiting_count,
        )
        txn = self.transaction_coordinator
        metrics.gauge(
            "txn_coordinator_open_transactions",
            "Transactions this broker coordinates that are Ongoing or being committed/aborted",
            txn.open_transaction_count,
        )
        metrics.gauge(
            "txn_coordinator_markers_queued",
            "Transaction markers waiting to be sent to partition leaders (WriteTxnMarkers)",
            lambda: txn.queued_marker_count,
        )
        verifier = self.add_partitions_to_txn_manager
        metrics.counter(
            "txn_verifications",
            "Partitions whose first transactional batch was verified with the transaction "
            "coordinator (KIP-890 part 1)",
            lambda: verifier.verified_partition_count,
        )
        metrics.counter(
            "txn_verification_failures",
            "Verified partitions refused (not in the transaction) or not confirmed (coordinator "
            "unreachable, moving or loading)",
            lambda: verifier.failed_partition_count,
        )
        metrics.gauge("connections", "Open Kafka connections", lambda: self.connection_count)
        metrics.counter(
            "failed_authentications",
            "Connections refused by TLS or SASL (bad handshake, certificate or credentials)",
            lambda: self.failed_authentication_count,
        )
        metrics.counter(
            "authorization_denials",
            "Operations on resources refused by the authorizer (authorizer.class.name)",
            lambda: self.ctx.authorization.denied_count,
        )
        metrics.gauge(
            "partition_open_transactions",
            "Open transactions in led partitions (a transaction spanning N partitions counts N)",
            lambda: sum(
                h.log.producer_state_manager.ongoing_txn_count for h in partitions.leaders()
            ),
        )
        metrics.gauge(
            "last_stable_offset_lag_max",
            "Largest high watermark minus last stable offset over led partitions (how far "
            "read_committed consumers trail read_uncommitted ones)",
            lambda: max(
                (h.log.high_watermark - h.log.last_stable_offset for h in partitions.leaders()),
                default=0,
            ),
        )
        metrics.gauge(
            "request_memory_bytes",
            "Bytes reserved for requests being received (queued.max.request.bytes bounds it)",
            lambda: self.request_memory.used_bytes,
        )
        metrics.counter(
            "leader_changes",
            "Leadership changes of hosted partitions seen by this broker (became leader or "
            "follower of a new leader epoch)",
            lambda: partitions.leader_change_count,
        )
        metrics.gauge(
            "metadata_offset",
            "Offset of the newest metadata record replayed by this broker",
            lambda: metadata.image.last_offset,
        )
        lag = getattr(metadata, "metadata_lag", None)
        if lag is not None:
            metrics.gauge(
                "metadata_lag", "Committed metadata offset minus the replayed offset", lag
            )

    def _count_isr_change(self, before_count: int, after_count: int) -> None:
        if after_count < before_count:
            self.metrics.isr_shrinks.inc()
        elif after_count > before_count:
            self.metrics.isr_expands.inc()

    async def _open_listeners(self) -> dict[str, list[trio.SocketListener]]:
        inter_broker = self.config.inter_broker_listener_name
        opened: dict[str, list[trio.SocketListener]] = {}
        for endpoint in self.config.broker_listeners:
            port = self.listen_ports.get(endpoint.listener, endpoint.port)
            if endpoint.listener == inter_broker and self.listen_port is not None:
                port = self.listen_port
            try:
                opened[endpoint.listener] = await trio.open_tcp_listeners(port, host=endpoint.host)
            except BaseException:
                for listeners in opened.values():
                    for listener in listeners:
                        await listener.aclose()
                raise
        return opened

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        by_name = await self._open_listeners()
        listeners = [listener for group in by_name.values() for listener in group]
        try:
            async with trio.open_nursery() as nursery:
                self.producer_ids.nursery = nursery
                await nursery.start(self.replica_manager.run)
                nursery.start_soon(self._tick_log_manager)
                nursery.start_soon(self._close_idle_connections)
                nursery.start_soon(self._watch_fenced_brokers)
                if self.log_manager.cleaner is not None:  # compaction, in the background
                    await nursery.start(self.log_manager.cleaner.run, self.ctx.clock_ms)
                await nursery.start(self.group_coordinator.run)
                await nursery.start(self.transaction_coordinator.run)
                await nursery.start(self.add_partitions_to_txn_manager.run)
                for endpoint in self.config.broker_listeners:
                    group = by_name[endpoint.listener]
                    port = self.ports[endpoint.listener] = group[0].socket.getsockname()[1]
                    serve = functools.partial(self._serve_connection, listener=endpoint.listener)
                    nursery.start_soon(trio.serve_listeners, serve, group)
                    logger.info("broker %s listening on %s://%s:%s (%s)", self.config.node_id,
                                endpoint.listener, endpoint.host, port,
                                self.security[endpoint.listener].security_protocol)  # fmt: skip
                self.port = self.ports[self.config.inter_broker_listener_name]
                task_status.started(self.port)
        finally:
            for listener in listeners:
                with trio.CancelScope(shield=True):
                    await listener.aclose()
            self.log_manager.shutdown(self.ctx.clock_ms(), self.broker_epoch_getter())

    async def _watch_fenced_brokers(self) -> None:
        """Show every applied image to the broker failure view, which lists a broker this node
        saw fenced once more per connection (log/server/broker_failure_view.py)."""
        view = self.ctx.broker_failure_view
        view.observe(self.ctx.metadata.image, self.ctx.clock_ms())
        async with self.ctx.metadata.subscribe() as images:
            async for image in images:
                view.observe(image, self.ctx.clock_ms())

    async def _tick_log_manager(self) -> None:
        log_manager = self.log_manager
        while True:
            self.replica_manager.retry_failed(self.ctx.clock_ms())
            delay_ms = min(log_manager.tick(self.ctx.clock_ms()), RETRY_TICK_MS)
            writes = log_manager.take_checkpoint_writes()
            if writes:  # their fsyncs in a worker thread: requests go on meanwhile
                failures = await trio.to_thread.run_sync(log_manager.write_checkpoints, writes)
                for job, exc in failures:
                    log_manager.checkpoint_write_failed(job, exc)
            await trio.sleep(max(delay_ms, MIN_TICK_SLEEP_MS) / 1000)

    # -- connections -------------------------------------------------------------------------

    async def _close_idle_connections(self) -> None:
        """Close the connections that have waited connections.max.idle.ms for a request."""
        interval_s = min(self.idle_timeout_s / IDLE_SWEEPS_PER_TIMEOUT, MAX_IDLE_SWEEP_S)
        interval_s = max(interval_s, MIN_IDLE_SWEEP_S)
        while True:
            await trio.sleep(interval_s)
            idle_since = trio.current_time() - self.idle_timeout_s
            for scope, since in list(self._receiving.items()):
                if since <= idle_since:
                    scope.cancel()

    async def _serve_connection(self, stream: trio.SocketStream, *, listener: str = "") -> None:
        """One client connection. What clients do at the socket level (reset, vanish mid-frame,
        send garbage) is expected: DEBUG/INFO once per connection with the peer address. Only
        a bug of ours is an ERROR with its traceback."""
        peer = _peer_address(stream)
        ip = peer.rpartition(":")[0] or peer
        refused = self.quotas.try_open(ip)
        if refused is not None:
            self._refusals.log(logger, logging.INFO, refused,
                               "connection from %s refused: %s", peer, refused)  # fmt: skip
            with trio.CancelScope(shield=True):
                await stream.aclose()
            return
        self.connection_count += 1
        listener = listener or self.config.inter_broker_listener_name
        try:
            async with stream:
                security = self.security[listener]
                try:
                    secured, principal = await security.secure(stream)
                except TlsHandshakeFailed as exc:
                    self.failed_authentication_count += 1
                    self._refusals.log(logger, logging.INFO, ("tls", ip),
                                       "connection from %s to %s refused: %s", peer, listener,
                                       exc)  # fmt: skip
                    return
                with trio.CancelScope() as idle_scope:  # cancelled: idle, closed
                    await self._connection_loop(
                        secured, peer, listener=listener, principal=principal,
                        authenticator=security.new_authenticator(), idle_scope=idle_scope,
                    )  # fmt: skip
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            # The peer reset or closed while we read or wrote (OSError: our vectored sends use
            # the raw socket, whose EPIPE / ECONNRESET are not wrapped by trio).
            logger.debug("connection from %s ended: %s", peer, exc.__cause__ or exc)
        except Exception:  # never let one connection take the server down
            logger.exception("connection from %s failed", peer)
        finally:
            self.connection_count -= 1
            self.quotas.close(ip)

    async def _connection_loop(
        self,
        stream: Any,
        peer: str = "?",
        *,
        listener: str = "",
        principal: Any = None,
        authenticator: SaslServerAuthenticator | None = None,
        idle_scope: trio.CancelScope | None = None,
    ) -> None:
        """Serve one connection's requests; `stream` is a SocketStream or an SSLStream.

        An acks=-1 Produce is appended at once and its wait for the high watermark runs in
        this connection's `waits` nursery, so the next requests are read (and appended) while
        it waits; the answers still leave in request order (ServerConnection holds back an
        early one). Everything else is handled one at a time, as Kafka handles a connection's
        requests (it mutes the channel until the answer is sent). The loop ends -- and the
        acks waits with it -- when the client closes or a write fails."""
        failure: Exception | None = None
        async with trio.open_nursery() as waits:
            try:
                await self._serve_requests(
                    stream, peer, waits, listener=listener, principal=principal,
                    authenticator=authenticator, idle_scope=idle_scope or trio.CancelScope(),
                )  # fmt: skip
            except Exception as exc:  # re-raised outside, not wrapped in an ExceptionGroup
                failure = exc
            finally:
                waits.cancel_scope.cancel()
        if failure is not None:
            raise failure

    async def _serve_requests(
        self,
        stream: Any,
        peer: str,
        waits: trio.Nursery,
        *,
        listener: str,
        principal: Any,
        authenticator: SaslServerAuthenticator | None,
        idle_scope: trio.CancelScope,
    ) -> None:
        conn = ServerConnection(
            max_frame_bytes=self.max_frame_bytes,
            max_in_flight=self.max_in_flight,
            advertised_api_keys=ADVERTISED_API_KEYS,
            accepted_api_keys=HANDLED_API_KEYS,
            max_read_bytes=MAX_READ_BYTES,
            legacy_versions=self.legacy_versions,
        )
        conn.connection_state["listener"] = listener or self.config.inter_broker_listener_name
        conn.connection_state["principal"] = principal
        conn.connection_state["host"] = peer.rpartition(":")[0] or peer  # ACLs' host
        if authenticator is not None:  # small frames only until authenticated
            conn.limit_frame_bytes(min(self.max_frame_bytes, self.sasl_max_receive_bytes))
        raw_socket = isinstance(stream, trio.SocketStream)  # large requests read in place
        # Plain TCP is read and written on the descriptor (log/common/socket_io.py: wait first,
        # then one read; its OSErrors end the connection like a failed send).
        receive = socket_io.receiver(stream)
        receiving = self._receiving  # idle_scope is here while it waits for bytes
        # Answers are written by this loop and by the acks waits: one writer at a time, in the
        # order ServerConnection released them (StrictFIFOLock: first come, first served).
        send_lock = trio.StrictFIFOLock()
        answered = trio.Event()  # set when an acks wait answered (PAUSED waits for it)

        async def respond(request: Request, body: Any) -> None:
            parts = conn.send_response_parts(request, body)  # no checkpoint until the lock
            # Taking the lock is a checkpoint even when it is free: the answers woken in one
            # turn (an append wakes every follower's parked fetch) are all built and encoded
            # before the first is sent, then sent back to back in the next turn, so no
            # follower's answer waits for another's encoding
            # (tests/replication/test_follower_answers_together.py).
            async with send_lock:
                self.metrics.bytes_out += sum(map(len, parts))
                await send_parts(stream, parts)

        async def answer_when_acked(request: Request, appended: list, start_s: float) -> None:
            nonlocal answered
            try:
                await respond(request, await self._complete_produce(request, appended, start_s))
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                logger.debug("connection from %s ended: %s", peer, exc.__cause__ or exc)
                waits.cancel_scope.cancel()  # the connection is gone: so is its loop
            answered.set()
            answered = trio.Event()

        memory = self.request_memory
        held = 0  # bytes of request_memory held for the request being received / handled
        try:
            while True:
                event: object  # a Request, BadRequest, SaslToken, NEED_DATA or PAUSED
                try:
                    if authenticator is not None and authenticator.expects_raw_token:
                        event = conn.next_sasl_token()  # after a SaslHandshake v0
                    else:
                        event = conn.next_request()
                except KafkaError as exc:  # InvalidFrameError
                    logger.info("closing connection from %s: %s", peer, exc)
                    return
                if event is PAUSED:  # max_in_flight requests wait for their acks
                    await answered.wait()
                    continue
                if event is NEED_DATA:
                    announced = conn.pending_request_bytes
                    if announced > held:  # read the rest only with the memory for it
                        await memory.reserve(announced - held)
                        held = announced
                    # a large request's rest is read straight into its own buffer
                    into = conn.read_buffer() if raw_socket else None
                    receiving[idle_scope] = trio.current_time()
                    try:
                        if into is not None:
                            count = await socket_io.receive_into(stream.socket.fileno(), into)
                        else:
                            data = await receive(MAX_READ_BYTES)
                            count = len(data)
                    finally:
                        del receiving[idle_scope]
                    if not count:
                        return  # closed by the client (an idle one: `_close_idle_connections`)
                    self.metrics.bytes_in += count
                    if into is not None:
                        into.release()
                        conn.received_into(count)
                        continue
                    try:
                        conn.receive_data(data)
                    except KafkaError as exc:
                        logger.info("closing connection from %s: %s", peer, exc)
                        return
                    continue
                if isinstance(event, SaslToken):
                    assert authenticator is not None  # only asked for with one
                    answer = self._raw_sasl_token(event, authenticator, peer)
                    if answer is None:
                        return  # v0 cannot say why: the connection closes, as in Kafka
                    conn.connection_state["principal"] = authenticator.principal
                    if authenticator.state is SaslState.COMPLETE:
                        conn.limit_frame_bytes(self.max_frame_bytes)
                    await stream.send_all(answer)
                    continue
                if isinstance(event, BadRequest):
                    if event.data_to_send:
                        async with send_lock:
                            await stream.send_all(event.data_to_send)
                    if event.close_connection:
                        logger.info("closing connection from %s: %s", peer, event.reason)
                        return
                    continue
                assert isinstance(event, Request)
                close_after = False
                if authenticator is not None and not authenticator.admits(
                    event.api_key, self.ctx.clock_ms()
                ):
                    logger.info("closing connection from %s: %s before SASL authentication "
                                "(or after its session expired)", peer,
                                event.api.name)  # fmt: skip
                    return
                if authenticator is not None and event.api_key in (
                    SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY
                ):  # fmt: skip
                    body, close_after = self._authenticate(event, authenticator, peer)
                    conn.connection_state["principal"] = authenticator.principal
                    if authenticator.state is SaslState.COMPLETE:
                        conn.limit_frame_bytes(self.max_frame_bytes)
                elif event.api_key == PRODUCE_API_KEY and event.body.acks == -1:
                    start_s = time.perf_counter()
                    appended = await self._append_produce(event)
                    if isinstance(appended, list):  # appended: its answer waits for the acks
                        # The batches are in the log: the frame's memory is free (Kafka
                        # releases a produce's buffer once it is in the purgatory).
                        event = without_records(event)
                        waits.start_soon(answer_when_acked, event, appended, start_s)
                        memory.release(held)
                        held = 0
                        continue
                    body = appended  # the whole request failed: its error answer
                else:
                    body = await self._dispatch(event)
                if event.expects_response:
                    await respond(event, body)
                    if close_after:
                        return
                else:
                    pending = conn.no_response(event)
                    if pending:
                        async with send_lock:
                            await stream.send_all(pending)
                    if has_error(body):
                        return
                memory.release(held)  # the request's frame is no longer ours to keep
                held = 0
        finally:
            memory.release(held)

    def _authenticate(
        self, request: Request, authenticator: SaslServerAuthenticator, peer: str
    ) -> tuple[Any, bool]:
        """Answer SaslHandshake / SaslAuthenticate on a SASL connection: (body, close after)."""
        if request.api_key == SASL_HANDSHAKE_KEY:
            handshake = authenticator.handshake(request.body.mechanism, request.api_version)
            close = handshake.close
            body = SASL_HANDSHAKE_RESPONSE.cls(
                error_code=handshake.error_code, mechanisms=handshake.mechanisms
            )
            reason = f"SaslHandshake {request.body.mechanism!r}: {handshake.error_code.name}"
        else:
            result = authenticator.authenticate(bytes(request.body.auth_bytes),
                                                self.ctx.clock_ms())  # fmt: skip
            close = result.close
            body = SASL_AUTHENTICATE_RESPONSE.cls(
                error_code=result.error_code, error_message=result.error_message,
                auth_bytes=result.auth_bytes, session_lifetime_ms=result.session_lifetime_ms,
            )  # fmt: skip
            reason = f"{result.error_code.name}: {result.error_message}"
            if authenticator.state is SaslState.COMPLETE:
                logger.debug("connection from %s authenticated as %s (%s)", peer,
                             authenticator.principal, authenticator.mechanism)  # fmt: skip
        if close:
            self.failed_authentication_count += 1
            self._refusals.log(logger, logging.INFO, ("sasl", peer.rpartition(":")[0]),
                               "authentication of %s failed: %s", peer, reason)  # fmt: skip
        return body, close

    def _raw_sasl_token(
        self, token: SaslToken, authenticator: SaslServerAuthenticator, peer: str
    ) -> bytes | None:
        """A SaslHandshake v0 client's raw token: the frame to answer, or None: close."""
        result = authenticator.authenticate(token.data, self.ctx.clock_ms())
        if result.close:
            self.failed_authentication_count += 1
            self._refusals.log(logger, logging.INFO, ("sasl", peer.rpartition(":")[0]),
                               "authentication of %s failed: %s: %s (SaslHandshake v0)", peer,
                               result.error_code.name, result.error_message)  # fmt: skip
            return None
        return sasl_token_frame(result.auth_bytes)

    async def _append_produce(self, request: Request) -> list | Any:
        """The local part of an acks=-1 Produce (verify, append now): the per-partition
        results, or the whole request's error answer (as `_handle` gives it)."""
        return await self._handle(request, append_produce)

    async def _complete_produce(self, request: Request, appended: list, start_s: float) -> Any:
        """The acks wait and the answer of a Produce `_append_produce` appended at `start_s`."""
        self.acks_all_waiting_count += 1
        try:
            return await self._handle(request, lambda ctx, r: complete_produce(ctx, r, appended))
        finally:
            self.acks_all_waiting_count -= 1
            self.metrics.observe_request(request.api.name, time.perf_counter() - start_s)

    async def _dispatch(self, request: Request) -> Any:
        """Any request but an acks=-1 Produce (the connection loop's append-then-wait path)."""
        start_s = time.perf_counter()
        try:
            return await self._handle(request)
        finally:
            self.metrics.observe_request(request.api.name, time.perf_counter() - start_s)

    async def _handle(self, request: Request, handler: Any = None) -> Any:
        handler = handler or HANDLERS[request.api_key]
        try:
            return await handler(self.ctx, request)
        except KafkaError as exc:
            code = exc.error_code
        except Exception:
            logger.exception("%s v%s failed", request.api.name, request.api_version)
            code = ErrorCode.UNKNOWN_SERVER_ERROR
        return error_response_body(request.api, request.api_version, request.body, code)
