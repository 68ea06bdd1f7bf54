"""ControllerService: the controller role of a node (Raft seat + controller RPC listener).

Theory of operation
-------------------
The service runs a RaftNode over MetadataStateMachine. When Raft makes this node leader, the
activation task proposes `activate_controller(node_id, raft_term)` (batch controller_epoch =
raft term); only once that batch applied (accepted) and the term is unchanged does the service
become *active*: its image then holds everything earlier leaders committed, and stale batches
of older epochs are rejected on replay. Leaving leadership deactivates at once.

Decisions are serialized by one lock: decide on the newest image (pure functions of
quorum/controller.py), propose the records as one batch under a timeout, answer only after the
batch applied; a batch rejected on replay is answered with its error code. Randomness (topic
ids, placement start) is drawn here, never in the pure layer.

The CONTROLLER listener: TLS first when it is `CONTROLLER:SSL` (the node's ssl.* settings;
ssl.client.auth=required makes brokers present a certificate the CA signed, and with an
authorizer its principal must be a super user: `peer_check`), then every
connection proves it holds the cluster secret (quorum/controller_auth.py) before any request.
RPCs (Kafka framing, CONTROLLER listener): BrokerRegistration, BrokerHeartbeat,
AllocateProducerIds (Kafka's messages), ControllerForward (the other decisions) and
MetadataFetch (log/protocol/controller_extra.py). Non-leaders answer NOT_CONTROLLER (with the
leader's node id in ControllerForward/MetadataFetch); MetadataFetch is served by any
controller from its own committed state (long-poll with RaftNode.wait_for_offset), or as the
newest checkpoint when the broker is behind the retained tail.

The active controller also runs the fencing task (quorum/broker_heartbeats.py): it fences
brokers whose last heartbeat is older than broker.session.timeout.ms, and -- much sooner -- a
broker whose heartbeat connection closed and that did not heartbeat again within
broker.disconnect.fence.ms (a killed broker's kernel closes its sockets at once): leadership
moves to the first live ISR member with leader_epoch + 1. It runs every
`fence_check_interval_ms` and whenever such a grace runs out. A controller that loses
leadership closes the connections brokers heartbeat on, so they look for the new one at once.
"""

from __future__ import annotations

import itertools
import logging
import random
import ssl
import time
import uuid
from collections.abc import Callable
from typing import Any

import trio

from log.common.errors import (
    ErrorCode,
    InvalidRequestError,
    KafkaError,
    NotControllerError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
)
from log.common.node_config import NodeConfig
from log.protocol import controller_extra as extra
from log.protocol.framing import FrameDecoder
from quorum import controller as c
from quorum import controller_auth, controller_codec
from quorum import leader_election as le
from quorum import metadata_quorum as mq
from quorum import reassignment as ra
from quorum.acls import create_acls, delete_acls
from quorum.broker_configs import alter_broker_configs, elr_safety_records
from quorum.broker_heartbeats import BrokerHeartbeatTracker
from quorum.features import bootstrap_levels, update_features
from quorum.image import MetadataImage
from quorum.partition_change import ElectionPolicy
from quorum.raft import RaftConfig, RaftFatalError, RaftNode, VoterChangeRefusedError
from quorum.raft_voters import ADD, REMOVE
from quorum.records import (
    BrokerEndpoint,
    MetadataRecord,
    RegisterControllerRecord,
    encode_batch,
)
from quorum.scram_credentials import alter_user_scram_credentials
from quorum.state_machine import ApplyResult, MetadataStateMachine

logger = logging.getLogger(__name__)

VOTER_CHANGE_TIMEOUT_S = 30  # an added voter catches up (a snapshot) before the change commits
VOTER_PROBE_TIMEOUT_S = 3  # a new voter's Raft port must accept a connection by then
_QUORUM_OPERATIONS = ("describe_quorum", "add_raft_voter", "remove_raft_voter")
PROPOSE_TIMEOUT_MS = 5000  # a decision that has not committed by then is answered with a timeout
MAX_CONNECTIONS = 256  # authenticated connections
MAX_HANDSHAKES = 32  # connections still proving they hold the cluster secret
MAX_READ_BYTES = 1 << 16
ACTIVATION_RETRY_MS = 100
# Leadership changes wake the activation loop at once (RaftNode's on_leadership_change); when
# nothing is to be done it checks again only this often, a backstop. It woke every
# ACTIVATION_RETRY_MS before: a third of an idle node's wake-ups.
ACTIVATION_BACKSTOP_MS = 1000
# The fencing task woke at least this much later than it asked to: the node's event loop (or
# the whole process) did not run meanwhile, and that time counts against no broker's session.
STALL_CREDIT_MIN_MS = 500
_SESSION_APIS = (62, 63)  # BrokerRegistration, BrokerHeartbeat: a broker's session


def raft_config_for(config: NodeConfig) -> RaftConfig:
    me = [v for v in config.raft_voters if v.node_id == config.node_id][0]
    records = max(2, config.props["metadata.log.max.record.count.between.snapshots"])
    return RaftConfig(
        self_address=f"{me.host}:{me.port}",
        partner_addresses=tuple(
            f"{v.host}:{v.port}" for v in config.raft_voters if v.node_id != config.node_id
        ),
        data_dir=str(config.metadata_dir.parent),
        password=config.props["controller.quorum.password"],
        checkpoint_interval_records=records,
        checkpoint_interval_ms=config.props["metadata.log.max.snapshot.interval.ms"],
        tail_max_batches=max(20_000, 2 * records),
    )


class ControllerService:
    """`port = await nursery.start(service.run)`; serves until cancelled."""

    def __init__(
        self,
        config: NodeConfig,
        *,
        seed: int | None = None,
        metrics: Any = None,
        ssl_context: ssl.SSLContext | None = None,
        peer_check: Callable[[bytes | None], str] | None = None,
    ) -> None:
        assert "controller" in config.roles
        # The listener's TLS (log.security.tls.controller_contexts); None: plaintext.
        self.ssl_context = ssl_context
        # With TLS: the peer's certificate (DER) -> why it may not act as a broker, "" if it
        # may (log.security.tls.controller_peer_check); None: no check beyond the secret.
        self.peer_check = peer_check
        # metrics: a log.server.metrics.NodeMetrics (or None): propose -> commit latency.
        self.metrics = metrics
        self.config = config
        self.node_id = config.node_id
        self.session_timeout_ms = config.props["broker.session.timeout.ms"]
        self.fence_check_interval_ms = max(50, min(1000, self.session_timeout_ms // 4))
        self.raft: RaftNode | None = None
        self.active_epoch = -1  # the controller epoch we serve in; -1: not active
        # Elections take the node's min.insync.replicas / unclean.leader.election.enable
        # unless a topic or the cluster config sets them.
        self.election_defaults = ElectionPolicy(
            min_insync_replicas=config.props["min.insync.replicas"],
            unclean_leader_election_enable=config.props["unclean.leader.election.enable"],
        )
        self.tracker = BrokerHeartbeatTracker(
            self.session_timeout_ms,
            config.props["broker.disconnect.fence.ms"],
            self.election_defaults,
        )
        self._fence_wakeup = trio.Event()
        self._connection_ids = itertools.count(1)
        # Connections a broker heartbeats (or registered) on: closed when leadership is lost.
        self._session_scopes: dict[int, trio.CancelScope] = {}
        self._decision_lock = trio.Lock()
        self._voter_change_lock = trio.Lock()  # one voter change at a time
        self._proposal_ids = itertools.count(1)
        self._random = random.Random(seed)
        self._leadership_changed = trio.Event()
        self._connection_slots = trio.Semaphore(MAX_CONNECTIONS)
        self._handshake_slots = trio.Semaphore(MAX_HANDSHAKES)
        self._secret = config.props["controller.quorum.password"]
        # what a new cluster finalizes (FeatureError, a ValueError, on a bad setting)
        self._bootstrap_features = bootstrap_levels(config.props["quorumlog.bootstrap.features"])
        self._idle_timeout_s = config.props["connections.max.idle.ms"] / 1000

    # -- lifecycle ----------------------------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        endpoint = self.config.listener(self.config.controller_listener_name)
        async with RaftNode(
            raft_config_for(self.config),
            state_machine_factory=MetadataStateMachine,
            on_leadership_change=self._on_leadership_change,
        ) as raft:
            self.raft = raft
            listeners = await trio.open_tcp_listeners(endpoint.port, host=endpoint.host)
            port = listeners[0].socket.getsockname()[1]
            logger.info("node %d: controller listening on %s:%d", self.node_id, endpoint.host, port)
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(trio.serve_listeners, self._serve_connection, listeners)
                    nursery.start_soon(self._activation_loop)
                    nursery.start_soon(self._fence_loop)
                    if self.config.props["auto.leader.rebalance.enable"]:
                        nursery.start_soon(self._balance_loop)
                    nursery.start_soon(self._stop_on_raft_failure, raft)
                    task_status.started(port)
            finally:
                self.active_epoch = -1

    async def _stop_on_raft_failure(self, raft: RaftNode) -> None:
        """A controller whose Raft node stopped (it could not apply a committed entry or write
        its journal) takes the node down with it, as Kafka's fatal faults do."""
        error = await raft.wait_failed()
        raise RaftFatalError(f"node {self.node_id}: metadata quorum member stopped: {error}")

    @property
    def image(self) -> MetadataImage:
        assert self.raft is not None
        machine = self.raft.state_machine
        assert isinstance(machine, MetadataStateMachine)  # what run() gives RaftNode to make
        return machine.image

    @property
    def is_active(self) -> bool:
        raft = self.raft
        return (
            raft is not None
            and self.active_epoch >= 0
            and raft.is_leader
            and raft.raft_term == self.active_epoch
        )

    def leader_node_id(self) -> int:
        if self.is_active:
            return self.node_id
        raft = self.raft
        address = None if raft is None else raft.leader_id
        if not address:
            return -1
        return next((e.voter_id for e in self.voter_directory().values()
                     if e.raft_endpoint == address), -1)  # fmt: skip

    def _on_leadership_change(self, is_leader: bool, raft_term: int) -> None:
        logger.info("raft leadership change node=%d is_leader=%s raft_term=%d",
                    self.node_id, is_leader, raft_term)  # fmt: skip
        if not is_leader:
            self.active_epoch = -1
            for scope in self._session_scopes.values():
                scope.cancel()  # brokers see the close and look for the new controller
        event, self._leadership_changed = self._leadership_changed, trio.Event()
        event.set()

    async def _activation_loop(self) -> None:
        raft = self.raft
        assert raft is not None
        while True:
            # Taken before the state is read: a change during the awaits below has set it, so
            # the wait at the bottom returns at once and the state is read again.
            changed = self._leadership_changed
            wait_ms = ACTIVATION_BACKSTOP_MS
            if raft.is_leader and not self.is_active:
                wait_ms = ACTIVATION_RETRY_MS  # until this term's activation commits
                term = raft.raft_term
                previous_controller_id, lost_ms = self._dead_previous_controller()
                try:
                    async with self._decision_lock:
                        new_cluster = self.image.last_offset < 0  # nothing committed yet
                        features = self._bootstrap_features if new_cluster else None
                        result = await self._propose(
                            c.activate_controller(self.node_id, term, features), term
                        )
                    if raft.is_leader and raft.raft_term == term and result.accepted:
                        self.tracker.on_activate(
                            self.image, _now_ms(), previous_controller_id, lost_ms
                        )
                        self._fence_wakeup.set()  # time a dead previous controller's grace
                        self.active_epoch = term
                        logger.info(
                            "active controller node=%d controller_epoch=%d metadata_offset=%d",
                            self.node_id,
                            term,
                            result.metadata_offset,
                        )
                        # KIP-966: one cluster-wide min.insync.replicas (Kafka's ELR safety
                        # records), decided on the image that now holds every earlier batch
                        await self._decide(self._elr_safety)
                    elif not result.accepted:
                        logger.warning("node %d: activation rejected: %s", self.node_id, result)
                except KafkaError as exc:
                    logger.info("node %d: activation failed (%s), retrying", self.node_id, exc)
            with trio.move_on_after(wait_ms / 1000):
                await changed.wait()

    def _dead_previous_controller(self) -> tuple[int, int | None]:
        """The previous active controller's node id when its Raft connection is closed (its
        process is gone, most likely with its broker), else -1: a controller that was only
        paused keeps its broker on the session timeout (broker_heartbeats.py). Beside it,
        when (_now_ms) the connection was lost: its broker's disconnect grace started then,
        not at this activation, which comes an election later (a killed controller's broker
        was fenced 100 ms after it, ~20 % of that fail-over)."""
        previous = self.image.controller_id
        raft = self.raft
        if previous < 0 or previous == self.node_id or raft is None:
            return -1, None
        known = self.voter_directory().get(previous)
        if known is None or raft.partner_connected(known.raft_endpoint):
            return -1, None
        since_s = raft.partner_disconnected_since(known.raft_endpoint)
        if since_s is None:
            return previous, None
        return previous, _now_ms() - max(0, int((time.monotonic() - since_s) * 1000))

    async def _fence_loop(self) -> None:
        while True:
            # A standby has nothing to check: its activation sets _fence_wakeup.
            delay_ms = self.fence_check_interval_ms if self.is_active else ACTIVATION_BACKSTOP_MS
            # Only the active controller's graces count. A controller that lost leadership
            # still hears its brokers' heartbeat connections close (it closes them itself);
            # their graces run out and nothing here fences (nor forgets) them, so a deadline
            # read then stays in the past: this loop spun without sleeping for as long as the
            # node stayed a standby (35-100 % of a core, seen after spurious elections).
            deadline_ms = self.tracker.next_deadline_ms() if self.is_active else None
            if deadline_ms is not None:
                delay_ms = min(delay_ms, max(0, deadline_ms - _now_ms() + 1))
            due_ms = _now_ms() + delay_ms
            with trio.move_on_after(delay_ms / 1000):
                await self._fence_wakeup.wait()
            self._fence_wakeup = trio.Event()
            if not self.is_active:
                continue
            now_ms = _now_ms()
            if now_ms - due_ms >= STALL_CREDIT_MIN_MS:
                self.tracker.on_stall(now_ms - due_ms, now_ms)
                logger.info("node %d: the controller did not run for %d ms; that time counts "
                            "against no broker's session", self.node_id, now_ms - due_ms)  # fmt: skip
            try:
                fenced = await self._decide(self._fence_decision)
            except NotControllerError:
                continue  # lost leadership since the check above
            except KafkaError as exc:
                logger.info("node %d: fencing round failed: %s", self.node_id, exc)
                await trio.sleep(ACTIVATION_RETRY_MS / 1000)
                continue
            for broker_id, reason in fenced:
                logger.info("broker fenced node=%d broker=%d reason=%s",
                            self.node_id, broker_id, reason)  # fmt: skip

    async def _balance_loop(self) -> None:
        """auto.leader.rebalance.enable: every leader.imbalance.check.interval.seconds the
        active controller moves leadership back to preferred replicas that can take it (at
        most MAX_ELECTIONS_PER_IMBALANCE per batch, the next batch at once)."""
        interval_s = self.config.props["leader.imbalance.check.interval.seconds"]
        while True:
            await trio.sleep(interval_s)
            while self.is_active:
                try:
                    records = await self._decide(lambda image: (le.balance_leaders(image),) * 2)
                except KafkaError as exc:
                    logger.info("node %d: leader balancing failed: %s", self.node_id, exc)
                    break
                if records:
                    logger.info("leader balancing node=%d preferred_leaders_elected=%d",
                                self.node_id, len(records))  # fmt: skip
                if len(records) < le.MAX_ELECTIONS_PER_IMBALANCE:
                    break

    def _fence_decision(self, image: Any) -> tuple[list[MetadataRecord], list[tuple[int, str]]]:
        now_ms = _now_ms()
        records, fenced = self.tracker.fence_expired(image, now_ms)
        return records, [(b, self.tracker.reason(b, now_ms)) for b in fenced]

    # -- decisions ----------------------------------------------------------------------------

    def _elr_safety(self, image: MetadataImage) -> tuple[list[MetadataRecord], None]:
        return elr_safety_records(image, self.election_defaults.min_insync_replicas), None

    async def _propose(self, records: list[MetadataRecord], epoch: int) -> ApplyResult:
        raft = self.raft
        assert raft is not None
        payload = encode_batch(records, epoch, next(self._proposal_ids))
        start_s = time.perf_counter()
        try:
            with trio.fail_after(PROPOSE_TIMEOUT_MS / 1000):
                outcome = await raft.propose(payload)
        except trio.TooSlowError:
            raise RequestTimedOutError("metadata batch did not commit in time") from None
        if self.metrics is not None:
            self.metrics.controller_commit_latency.observe(time.perf_counter() - start_s)
        result = outcome.result
        if not isinstance(result, ApplyResult):
            raise KafkaError(f"apply failed: {result}")
        return result

    async def _decide(self, decide: Callable[[Any], tuple[list[MetadataRecord], Any]]) -> Any:
        """Run one pure decision on the newest image; commit its records; return its answer."""
        async with self._decision_lock:
            if not self.is_active:
                raise NotControllerError(f"node {self.node_id} is not the active controller")
            epoch = self.active_epoch
            records, response = decide(self.image)
            if records:
                result = await self._propose(list(records), epoch)
                if not result.accepted:
                    raise KafkaError(
                        f"batch rejected on replay: {result.reason}",
                        error_code=result.error_code or ErrorCode.UNKNOWN_SERVER_ERROR,
                    )
            return response

    async def register_broker(
        self, request: c.BrokerRegistrationRequest, connection_id: int | None = None
    ) -> Any:
        # A combined node's own broker registering anew: its previous incarnation lived in an
        # earlier process of this node (this controller runs in the same process, and the data
        # directory lock allows one), so that session is over, whatever the heartbeat clock
        # says. Without this a lone node killed with -9 waited a whole session timeout (9 s) to
        # register again.
        own_broker = request.broker_id == self.node_id and "broker" in self.config.roles

        def decide(image):  # noqa: ANN001, ANN202
            alive = not own_broker and self.tracker.has_valid_session(
                image, request.broker_id, _now_ms()
            )
            records, response = c.register_broker(
                image, request, previous_session_alive=alive, defaults=self.election_defaults
            )
            if response.error_code == ErrorCode.NONE:
                self.tracker.touch(request.broker_id, _now_ms(), connection_id)
            return records, response

        response = await self._decide(decide)
        # A refusal is the broker's to report (once); here every retry would repeat it.
        logger.log(
            logging.INFO if response.error_code == ErrorCode.NONE else logging.DEBUG,
            "node %d: broker %d registered, broker_epoch=%d (%s)",
            self.node_id,
            request.broker_id,
            response.broker_epoch,
            response.error_code.name,
        )
        return response

    async def heartbeat(
        self, request: c.BrokerHeartbeatRequest, connection_id: int | None = None
    ) -> Any:
        """A heartbeat counts as contact when it arrives, not when its turn at the decision
        lock comes (Kafka touches a heartbeat that timed out in its event queue too): a
        decision waiting on a slow commit must not fence the brokers queued behind it. One
        that changes nothing (the common case) is answered from the newest image at once;
        only one with records to commit (unfence, fence, shut down) waits for the lock."""
        if self.is_active:
            records, response = c.heartbeat(self.image, request, self.election_defaults)
            if response.error_code == ErrorCode.NONE:
                self.tracker.touch(request.broker_id, _now_ms(), connection_id)
            if not records:
                return response

        def decide(image):  # noqa: ANN001, ANN202
            records, response = c.heartbeat(image, request, self.election_defaults)
            if response.error_code == ErrorCode.NONE:
                self.tracker.touch(request.broker_id, _now_ms(), connection_id)
            return records, response

        return await self._decide(decide)

    async def forward(self, operation: str, request: Any) -> Any:
        if operation in _QUORUM_OPERATIONS:
            return await getattr(self, operation)(request)
        if operation == "create_topics":
            ids = [uuid.UUID(int=self._random.getrandbits(128), version=4) for _ in request.topics]
            start = self._random.randrange(1 << 16)
            return await self._decide(
                lambda image: c.create_topics(
                    image,
                    request,
                    start_index=start,
                    topic_ids=ids,
                    default_num_partitions=self.config.props["num.partitions"],
                    default_replication_factor=self.config.props["default.replication.factor"],
                )
            )
        if operation == "create_partitions":
            start = self._random.randrange(1 << 16)
            return await self._decide(
                lambda image: c.create_partitions(image, request, start_index=start)
            )
        # `request` is the payload controller_codec decoded for this operation's request type;
        # the decisions that elect leaders also get the node's election defaults.
        defaults = self.election_defaults
        decisions: dict[str, Callable[[MetadataImage, Any], tuple[list[MetadataRecord], Any]]] = {
            "delete_topics": c.delete_topics,
            "alter_topic_configs": c.alter_topic_configs,
            "alter_broker_configs": alter_broker_configs,
            "update_features": update_features,
            "alter_partitions": lambda image, r: c.alter_partitions(image, r, defaults),
            "controlled_shutdown": lambda image, r: c.controlled_shutdown(image, r, defaults),
            "elect_leaders": lambda image, r: le.elect_leaders(
                image, r, lambda name: c.election_policy(image, name, defaults)
            ),
            "alter_partition_reassignments": lambda image, r: ra.alter_partition_reassignments(
                image, r, lambda name: c.election_policy(image, name, defaults)
            ),
            "alter_user_scram_credentials": alter_user_scram_credentials,
            "create_acls": create_acls,
            "delete_acls": delete_acls,
        }
        decide = decisions[operation]
        return await self._decide(lambda image: decide(image, request))

    # -- the voter set (KIP-853: metadata-quorum describe / add-controller / remove-controller) --

    def voter_directory(self) -> dict[int, mq.VoterEndpoints]:
        """Node id -> its Raft and CONTROLLER endpoints: the configured voters, overlaid by
        the controllers registered in the metadata image (added at run time)."""
        controllers = {v.node_id: f"{v.host}:{v.port}" for v in self.config.controller_voters}
        directory = {
            v.node_id: mq.VoterEndpoints(
                v.node_id, f"{v.host}:{v.port}", controllers.get(v.node_id, "")
            )
            for v in self.config.raft_voters
        }
        raft = self.raft
        if raft is not None:
            for r in self.image.controllers.values():
                directory[r.controller_id] = mq.VoterEndpoints(
                    r.controller_id,
                    f"{r.raft_host}:{r.raft_port}",
                    f"{r.controller_host}:{r.controller_port}",
                )
        return directory

    def _reachable_voters(self, raft: RaftNode) -> set[str]:
        me = raft.config.self_address
        return {me} | {v for v in raft.voters if v != me and raft.partner_connected(v)}

    def _active_raft(self) -> RaftNode:
        raft = self.raft
        if raft is None or not self.is_active:
            raise NotControllerError(f"node {self.node_id} is not the active controller")
        return raft

    async def describe_quorum(self, request: mq.DescribeQuorumRequest) -> Any:
        raft = self.raft if request.from_any_controller else self._active_raft()
        if raft is None:
            raise NotControllerError(f"node {self.node_id}: the controller is not running")
        directory = self.voter_directory()
        by_address = {e.raft_endpoint: e for e in directory.values()}
        status = raft.status()
        me = raft.config.self_address
        voters = []
        for address in raft.voters:
            known = by_address.get(address)
            # the leader's own entry: its commit index; a follower's: the leader's match index
            key = "commit_idx" if address == me else f"match_idx_server_{address}"
            match = status.get(key, -1)
            voters.append(
                mq.VoterState(
                    voter_id=known.voter_id if known else -1,
                    raft_endpoint=address,
                    controller_endpoint=known.controller_endpoint if known else "",
                    connected=address == me or raft.partner_connected(address),
                    match_index=match if isinstance(match, int) else -1,
                )
            )
        return mq.DescribeQuorumResponse(
            error_code=ErrorCode.NONE,
            leader_id=self.leader_node_id(),
            leader_epoch=raft.raft_term,
            high_watermark=raft.committed_offset,
            voters=tuple(voters),
        )

    async def add_raft_voter(self, request: mq.AddRaftVoterRequest) -> Any:
        raft = self._active_raft()
        async with self._voter_change_lock:
            why = mq.check_add(
                request, raft.voters, self._reachable_voters(raft), self.voter_directory()
            )
            if why:
                raise VoterChangeRefusedError(f"cannot add node {request.voter_id}: {why}")
            raft_host, raft_port = mq.parse_endpoint(request.raft_endpoint) or ("", 0)
            host, port = mq.parse_endpoint(request.controller_endpoint) or ("", 0)
            # The new voter counts towards the majority at once: it must be up to catch up.
            try:
                with trio.fail_after(VOTER_PROBE_TIMEOUT_S):
                    probe = await trio.open_tcp_stream(raft_host, raft_port)
                await probe.aclose()
            except (OSError, trio.TooSlowError) as exc:
                raise VoterChangeRefusedError(
                    f"cannot add node {request.voter_id}: its Raft port {request.raft_endpoint} "
                    f"does not answer ({type(exc).__name__}): start it first"
                ) from None
            record = RegisterControllerRecord(request.voter_id, raft_host, raft_port, host, port)
            # First where it listens (brokers and the other controllers learn it), then the vote.
            await self._decide(lambda image: ([record], None))
            with trio.fail_after(VOTER_CHANGE_TIMEOUT_S):
                await raft.change_voters(ADD, request.raft_endpoint)
            logger.info("node %d: added voter %d (%s)", self.node_id, request.voter_id,
                        request.raft_endpoint)  # fmt: skip
            return mq.VoterChangeResponse(
                ErrorCode.NONE, voters=mq.voter_ids(raft.voters, self.voter_directory())
            )

    async def remove_raft_voter(self, request: mq.RemoveRaftVoterRequest) -> Any:
        raft = self._active_raft()
        async with self._voter_change_lock:
            known = self.voter_directory().get(request.voter_id)
            address = known.raft_endpoint if known else None
            why = mq.check_remove(
                address, raft.voters, self._reachable_voters(raft), raft.config.self_address
            )
            if why:
                raise VoterChangeRefusedError(f"cannot remove node {request.voter_id}: {why}")
            assert address is not None
            with trio.fail_after(VOTER_CHANGE_TIMEOUT_S):
                await raft.change_voters(REMOVE, address)
            logger.info("node %d: removed voter %d (%s)", self.node_id, request.voter_id,
                        address)  # fmt: skip
            return mq.VoterChangeResponse(
                ErrorCode.NONE, voters=mq.voter_ids(raft.voters, self.voter_directory())
            )

    # -- metadata fetch (any controller) ------------------------------------------------------

    async def metadata_fetch(self, body: Any) -> Any:
        raft = self.raft
        assert raft is not None
        response: Any = extra.METADATA_FETCH_RESPONSE.cls  # made at run time by schema.py: untyped
        after = max(0, body.after_offset)
        max_wait_ms = min(max(0, body.max_wait_ms), extra.MAX_FETCH_WAIT_MS)
        max_batches = min(max(1, body.max_batches), extra.MAX_FETCH_BATCHES)
        with trio.move_on_after(max_wait_ms / 1000):
            await raft.wait_for_offset(after)
        batch_cls = response.MetadataBatch
        try:
            batches = raft.read_committed(after, max_batches)
        except OffsetOutOfRangeError:
            checkpoint = raft.latest_checkpoint()
            if checkpoint is None:
                return response(error_code=ErrorCode.OFFSET_OUT_OF_RANGE)
            return response(
                error_code=ErrorCode.NONE,
                leader_id=self.leader_node_id(),
                committed_offset=raft.committed_offset,
                checkpoint_offset=checkpoint[0],
                checkpoint=checkpoint[1],
                batches=[],
            )
        return response(
            error_code=ErrorCode.NONE,
            leader_id=self.leader_node_id(),
            committed_offset=raft.committed_offset,
            batches=[batch_cls(offset=o, payload=p) for o, p in batches],
        )

    # -- the wire -----------------------------------------------------------------------------

    async def _dispatch(self, api_key: int, body: Any, connection_id: int | None = None) -> Any:
        """The response body for one request; typed failures become their error code."""
        api = extra.CONTROLLER_LISTENER_APIS[api_key]
        try:
            if api_key == extra.METADATA_FETCH_KEY:
                return await self.metadata_fetch(body)
            if api_key == 62:
                r = await self.register_broker(
                    c.BrokerRegistrationRequest(
                        body.broker_id,
                        body.incarnation_id,
                        tuple(BrokerEndpoint(x.name, x.host, x.port) for x in body.listeners),
                        body.rack,
                        body.previous_broker_epoch,
                        log_dir_empty=c.LOST_DIRECTORY_ID in (body.log_dirs or ()),
                    ),
                    connection_id,
                )
                return api.response.cls(error_code=r.error_code, broker_epoch=r.broker_epoch)
            if api_key == 63:
                r = await self.heartbeat(
                    c.BrokerHeartbeatRequest(
                        body.broker_id,
                        body.broker_epoch,
                        body.current_metadata_offset,
                        body.want_fence,
                        body.want_shut_down,
                    ),
                    connection_id,
                )
                return api.response.cls(
                    error_code=r.error_code,
                    is_caught_up=r.is_caught_up,
                    is_fenced=r.is_fenced,
                    should_shut_down=r.should_shut_down,
                )
            if api_key == 67:
                r = await self._decide(
                    lambda image: c.allocate_producer_ids(
                        image, c.AllocateProducerIdsRequest(body.broker_id, body.broker_epoch)
                    )
                )
                return api.response.cls(
                    error_code=r.error_code,
                    producer_id_start=r.producer_id_start,
                    producer_id_len=r.producer_id_len,
                )
            if api_key == extra.CONTROLLER_FORWARD_KEY:
                types = controller_codec.OPERATIONS.get(body.operation)
                if types is None:
                    raise InvalidRequestError(f"unknown operation {body.operation!r}")
                request = controller_codec.decode(types[0], body.payload)
                result = await self.forward(body.operation, request)
                return api.response.cls(
                    error_code=ErrorCode.NONE,
                    leader_id=self.node_id,
                    payload=controller_codec.encode(result),
                )
            raise InvalidRequestError(f"api {api_key} not served here")
        except KafkaError as exc:
            fields: dict[str, object] = {"error_code": exc.error_code}
            if api_key in (extra.CONTROLLER_FORWARD_KEY, extra.METADATA_FETCH_KEY):
                fields["leader_id"] = self.leader_node_id()
            if api_key == extra.CONTROLLER_FORWARD_KEY:
                fields["error_message"] = str(exc)[:1000]
            return api.response.cls(**fields)

    async def _serve_connection(self, socket_stream: trio.SocketStream) -> None:
        async with socket_stream:
            stream = await self._authenticate(socket_stream)
            if stream is None:
                return
            if self._connection_slots.value == 0:
                return  # every slot is taken by authenticated peers: close
            await self._serve_authenticated(stream)

    async def _authenticate(self, socket_stream: trio.SocketStream) -> trio.abc.Stream | None:
        """TLS (when the listener is SSL), then the handshake (controller_auth.py), on one of
        MAX_HANDSHAKES slots within HANDSHAKE_TIMEOUT_S: a stranger holds a slot for
        seconds, never a session's. The stream to serve on, or None: refused."""
        if self._handshake_slots.value == 0:
            return None
        stream: trio.abc.Stream = socket_stream
        try:
            async with self._handshake_slots:
                with trio.fail_after(controller_auth.HANDSHAKE_TIMEOUT_S):
                    if self.ssl_context is not None:
                        tls = trio.SSLStream(socket_stream, self.ssl_context, server_side=True)
                        await tls.do_handshake()
                        refusal = self.peer_check and self.peer_check(tls.getpeercert(True))
                        if refusal:
                            raise controller_auth.HandshakeError(refusal)
                        stream = tls
                    await controller_auth.accept(stream, self._secret)
            return stream
        except (controller_auth.HandshakeError, trio.TooSlowError, trio.BrokenResourceError,
                trio.ClosedResourceError, OSError) as exc:  # fmt: skip
            reason = exc.__cause__ or exc
            logger.info("node %d: controller connection from %s refused: %s",
                        self.node_id, _peer(socket_stream), reason or type(exc).__name__)  # fmt: skip
            return None

    async def _serve_authenticated(self, stream: trio.abc.Stream) -> None:
        connection_id = next(self._connection_ids)
        async with self._connection_slots:
            try:
                with trio.CancelScope() as scope:
                    await self._serve_requests(stream, connection_id, scope)
            finally:
                self._session_scopes.pop(connection_id, None)
                lost = self.tracker.connection_closed(connection_id, _now_ms())
                if lost and self.is_active:
                    logger.info(
                        "node %d: heartbeat connection of broker %s closed; fencing in %d ms "
                        "unless it heartbeats again",
                        self.node_id,
                        ",".join(map(str, lost)),
                        self.tracker.disconnect_grace_ms,
                    )
                    self._fence_wakeup.set()

    async def _serve_requests(
        self, stream: trio.abc.Stream, connection_id: int, scope: trio.CancelScope
    ) -> None:
        frames = FrameDecoder(self.config.props["socket.request.max.bytes"])
        try:
            while True:
                frame = frames.next_frame()
                if frame is None:
                    data: bytes | bytearray = b""
                    with trio.move_on_after(self._idle_timeout_s):
                        data = await stream.receive_some(MAX_READ_BYTES)
                    if not data:
                        return  # closed by the peer, or idle for connections.max.idle.ms
                    frames.feed(data)
                    continue
                # One request at a time: nothing more is read until it is answered.
                header, api, body = extra.decode_request_frame(frame)
                response = await self._dispatch(header.api_key, body, connection_id)
                if header.api_key in _SESSION_APIS and response.error_code == ErrorCode.NONE:
                    self._session_scopes[connection_id] = scope
                await stream.send_all(
                    extra.encode_response_frame(api, header.correlation_id, response)
                )
        except (trio.BrokenResourceError, trio.ClosedResourceError, KafkaError):
            return  # a bad frame or request closes the connection, as in Kafka


def _peer(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
    except OSError:
        return "?"
    return f"{host}:{port}"


def _now_ms() -> int:
    return int(time.monotonic() * 1000)
