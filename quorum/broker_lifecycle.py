"""BrokerLifecycle: a broker's registration, heartbeats and metadata following.

Theory of operation
-------------------
* Register with the active controller (a fresh incarnation id per process start, and the
  broker epoch of the last clean shutdown, KIP-966, so a restart after SIGTERM is accepted at
  once); the controller answers with the broker_epoch; the broker starts fenced.
* Follow metadata: long-poll MetadataFetch (any controller) after the newest offset replayed,
  replay each committed batch into a local MetadataStateMachine (the same deterministic
  apply as every controller, so a batch rejected there is rejected here), or adopt the
  controller's checkpoint when it says we are behind its retained tail. Every new image is
  published to subscribers (the MetadataSource contract of quorum/broker_interface.py), after
  the image preparers ran: the broker creates the logs of new partitions in a worker thread
  there, while it keeps answering from the image before.
* Heartbeat every broker.heartbeat.interval.ms with the newest published offset: the
  controller unfences the broker once it has published its own registration
  (`unfenced` is then set). Between heartbeats the connection is watched: when the
  controller closes it (it died or lost leadership) the next heartbeat goes out at once, to
  whichever controller is active now, since the active controller fences a broker whose
  heartbeat connection closed if it does not hear from it again within
  broker.disconnect.fence.ms. STALE_BROKER_EPOCH / BROKER_ID_NOT_REGISTERED (the controller lost
  or replaced our registration) registers again.
* A controller that stops answering without closing the connection (its host cut off from the
  network) is left after half a session (`attempt_timeout_ms`, Kafka's heartbeat channel
  timeout, KAFKA-14392): both clients then try the next voter. A new active controller counts
  every session from its activation, so the broker must reach it within one session timeout;
  waiting the whole session on the old one would get every broker fenced at once.
* `controlled_shutdown()`: a heartbeat with want_shut_down, so the controller moves our
  leaderships away and fences us before the node stops serving.

All I/O goes through a ControllerClient; every call is under a deadline.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from log.common.errors import ErrorCode, KafkaError
from log.common.node_config import NodeConfig, Voter
from quorum import controller as c
from quorum.broker_interface import MAX_PENDING_IMAGES
from quorum.controller_client import ControllerClient
from quorum.image import MetadataImage, partition_changes
from quorum.metadata_quorum import parse_endpoint
from quorum.records import BrokerEndpoint
from quorum.state_machine import MetadataStateMachine

logger = logging.getLogger(__name__)

FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BATCHES = 1000
FETCH_IDLE_ROTATE_COUNT = 20  # empty long-polls (~10 s) before trying another controller
RETRY_BACKOFF_MS = 200
FENCED_HEARTBEAT_INTERVAL_MS = 100
MAX_LOGGED_CHANGES = 20  # partition changes logged per image; the rest are counted
MAX_SUBSCRIBERS = 64

# Called with (the published image, the one about to be published) before it is published.
ImagePreparer = Callable[[MetadataImage, MetadataImage], Awaitable[None]]


def _failure(exc: Exception, timeout_ms: int) -> str:
    """What a failed call logs: the error, or for a timeout (trio.TooSlowError says nothing)
    how long it waited."""
    return str(exc) or f"no answer within {timeout_ms} ms"


class BrokerLifecycle:
    """`await nursery.start(lifecycle.run)` returns once registered; implements MetadataSource."""

    def __init__(
        self,
        config: NodeConfig,
        client: ControllerClient,
        fetch_client: ControllerClient,
        *,
        incarnation_id: uuid.UUID | None = None,
        previous_broker_epoch: int = -1,
        log_dir_empty: bool = False,
    ) -> None:
        self.config = config
        # The broker epoch of this node's last clean shutdown (its log dir's marker; -1: none).
        self.previous_broker_epoch = previous_broker_epoch
        # Its log directory held nothing at start: it has none of the data it may have had.
        self.log_dir_empty = log_dir_empty
        self.broker_id = config.node_id
        self.client = client
        self.fetch_client = fetch_client
        # the node's other clients of the controllers (learn_voters keeps them all current)
        self.other_controller_clients: list[ControllerClient] = []
        self.incarnation_id = incarnation_id or uuid.uuid4()
        self.heartbeat_interval_ms = config.props["broker.heartbeat.interval.ms"]
        self.session_timeout_ms = config.props["broker.session.timeout.ms"]
        self.attempt_timeout_ms = max(1, self.session_timeout_ms // 2)
        for each in (client, fetch_client):  # see the module docstring
            each.request_timeout_ms = min(each.request_timeout_ms, self.attempt_timeout_ms)
        self.broker_epoch = -1
        self.is_fenced = True
        self.unfenced = trio.Event()
        self._state_machine = MetadataStateMachine()
        self._published = self._state_machine.image  # what `image` shows (see _publish_newest)
        self._preparers: list[ImagePreparer] = []
        self._image_advanced = trio.Event()
        self.committed_metadata_offset = -1  # the controller's, as of the last MetadataFetch
        self._subscribers: list[trio.MemorySendChannel[MetadataImage]] = []
        self._stopping = False
        self._scope: trio.CancelScope | None = None
        self._idle_scope = trio.CancelScope()

    # -- MetadataSource -----------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self._published

    async def wait_for_image(self, min_offset: int) -> MetadataImage:
        while self._published.last_offset < min_offset:
            await self._image_advanced.wait()
        return self._published

    def add_image_preparer(self, prepare: ImagePreparer) -> None:
        self._preparers.append(prepare)

    def subscribe(self) -> trio.MemoryReceiveChannel[MetadataImage]:
        assert len(self._subscribers) < MAX_SUBSCRIBERS
        send, receive = trio.open_memory_channel[MetadataImage](MAX_PENDING_IMAGES)
        self._subscribers.append(send)
        return receive

    async def _publish_newest(self) -> None:
        """Publish the newest replayed image, once every preparer is done with it: until then
        `image` is the one before, so nothing acts on partitions whose logs are still being
        created (the broker's replica manager creates them in a worker thread, not on the
        event loop every client request waits for: a topic of 2,000 partitions stalled each
        node for ~3 s, 2026-11-28)."""
        before, after = self._published, self._state_machine.image
        for prepare in self._preparers:
            try:
                await prepare(before, after)
            except Exception:  # preparing is ahead-of-time work: publish anyway, say why
                logger.exception("node %d: preparing metadata image %d failed; publishing it",
                                 self.broker_id, after.last_offset)  # fmt: skip
        self._published = after
        if after.controllers is not before.controllers:
            self._learn_controllers(after)
        self._log_changes(before, after)
        self._publish(after)

    def _publish(self, image: MetadataImage) -> None:
        for send in list(self._subscribers):
            try:
                send.send_nowait(image)
            except trio.WouldBlock:
                pass  # the next image supersedes this one
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._subscribers.remove(send)
        event, self._image_advanced = self._image_advanced, trio.Event()
        event.set()

    # -- lifecycle ----------------------------------------------------------------------------

    def metadata_lag(self) -> int:
        """Committed metadata records (as last heard from a controller) not published yet."""
        return max(0, self.committed_metadata_offset - self._published.last_offset)

    def _registration_request(self) -> c.BrokerRegistrationRequest:
        endpoints = tuple(
            BrokerEndpoint(e.listener, e.host, e.port)
            for e in self.config.advertised_listeners
            if e.listener != self.config.controller_listener_name
        )
        return c.BrokerRegistrationRequest(
            self.broker_id, self.incarnation_id, endpoints,
            previous_broker_epoch=self.previous_broker_epoch,
            log_dir_empty=self.log_dir_empty,
        )  # fmt: skip

    async def register(self) -> None:
        """Register until it works (each attempt bounded by the client's retries); the first
        refusal or failure is logged at INFO, the retries after it at DEBUG."""
        attempts = 0
        while True:
            level = logging.INFO if attempts == 0 else logging.DEBUG
            attempts += 1
            try:
                with trio.fail_after(self.session_timeout_ms / 1000):
                    response = await self.client.register(
                        self._registration_request(), self.config.props["cluster.id"]
                    )
                if response.error_code == ErrorCode.NONE:
                    self.broker_epoch = response.broker_epoch
                    logger.info(
                        "node %d: registered, broker_epoch=%d incarnation=%s",
                        self.broker_id,
                        self.broker_epoch,
                        self.incarnation_id,
                    )
                    return
                logger.log(level, "node %d: registration refused: %s (retrying)",
                           self.broker_id, response.error_code.name)  # fmt: skip
            except (KafkaError, trio.TooSlowError) as exc:
                logger.log(level, "node %d: registration failed: %s (retrying)", self.broker_id,
                           _failure(exc, self.session_timeout_ms))  # fmt: skip
                await self._discover_controllers()
            await trio.sleep(RETRY_BACKOFF_MS / 1000)

    async def _discover_controllers(self) -> None:
        """Ask any controller where the voters listen: the leader may be a controller added
        after this node's node.toml was written (its metadata image, which says so too, is
        only read once registered)."""
        try:
            with trio.fail_after(self.session_timeout_ms / 1000):
                quorum = await self.fetch_client.describe_quorum(from_any_controller=True)
        except (KafkaError, trio.TooSlowError, OSError) as exc:
            logger.debug("node %d: no controller described the quorum: %s", self.broker_id, exc)
            return
        learnt = [(v.voter_id, parse_endpoint(v.controller_endpoint)) for v in quorum.voters]
        voters = [Voter(i, *e) for i, e in learnt if i >= 0 and e is not None]
        for client in (self.client, *self.other_controller_clients):
            client.learn_voters(voters)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        await self.register()
        try:
            async with trio.open_nursery() as nursery:
                self._scope = nursery.cancel_scope
                nursery.start_soon(self._follow_metadata)
                nursery.start_soon(self._heartbeat_loop)
                task_status.started()
        finally:
            for send in self._subscribers:
                send.close()
            with trio.CancelScope(shield=True):
                await self.client.aclose()
                await self.fetch_client.aclose()

    async def _heartbeat_loop(self) -> None:
        while not self._stopping:
            request = c.BrokerHeartbeatRequest(
                self.broker_id, self.broker_epoch, self._published.last_offset
            )
            try:
                with trio.fail_after(self.session_timeout_ms / 1000):
                    response = await self.client.heartbeat(request)
            except (KafkaError, trio.TooSlowError) as exc:
                logger.info("node %d: heartbeat failed: %s", self.broker_id,
                            _failure(exc, self.session_timeout_ms))  # fmt: skip
                await trio.sleep(RETRY_BACKOFF_MS / 1000)
                continue  # the session is at stake: keep looking for the controller
            else:
                self._on_heartbeat(response)
                if response.error_code in (
                    ErrorCode.STALE_BROKER_EPOCH,
                    ErrorCode.BROKER_ID_NOT_REGISTERED,
                ):
                    await self.register()
                    continue
            # While fenced, heartbeat often: the controller unfences us on the first heartbeat
            # that shows we replayed our own registration.
            interval_ms = self.heartbeat_interval_ms
            if self.is_fenced:
                interval_ms = min(interval_ms, FENCED_HEARTBEAT_INTERVAL_MS)
            if self._stopping:
                break  # controlled_shutdown() sends the last heartbeat
            with trio.CancelScope() as self._idle_scope:
                if await self.client.idle(interval_ms / 1000):
                    logger.debug("node %d: controller closed the heartbeat connection",
                                 self.broker_id)  # fmt: skip

    def _on_heartbeat(self, response: c.BrokerHeartbeatResponse) -> None:
        if response.error_code != ErrorCode.NONE:
            logger.info("node %d: heartbeat answered %s", self.broker_id, response.error_code.name)
            return
        if response.is_fenced != self.is_fenced and not self._stopping:
            logger.info(
                "node %d: broker %s (broker_epoch=%d)",
                self.broker_id,
                "fenced" if response.is_fenced else "unfenced",
                self.broker_epoch,
            )
        self.is_fenced = response.is_fenced
        if not response.is_fenced:
            self.unfenced.set()

    async def _follow_metadata(self) -> None:
        idle_count = 0
        while True:
            after = self._state_machine.last_applied_offset
            timeout_ms = FETCH_MAX_WAIT_MS + self.session_timeout_ms
            try:
                with trio.fail_after(timeout_ms / 1000):
                    response = await self.fetch_client.metadata_fetch(
                        self.broker_id, after, FETCH_MAX_WAIT_MS, FETCH_MAX_BATCHES
                    )
            except (KafkaError, trio.TooSlowError) as exc:
                logger.info("node %d: metadata fetch failed: %s", self.broker_id,
                            _failure(exc, timeout_ms))  # fmt: skip
                await trio.sleep(RETRY_BACKOFF_MS / 1000)
                continue
            if self.apply_fetch_response(response):
                idle_count = 0
                await self._publish_newest()
                continue
            # A controller cut off from the quorum answers empty long-polls forever: after a
            # while without news, ask another one (harmless when the cluster is just idle).
            idle_count += 1
            if idle_count >= FETCH_IDLE_ROTATE_COUNT:
                idle_count = 0
                await self.fetch_client.next_controller()

    def apply_fetch_response(self, response: Any) -> bool:
        """Replay a MetadataFetch answer; True when the replayed image advanced (the caller
        publishes it)."""
        before = self._state_machine.image
        committed_offset = getattr(response, "committed_offset", -1)
        self.committed_metadata_offset = max(self.committed_metadata_offset, committed_offset)
        if response.checkpoint is not None and response.checkpoint_offset > before.last_offset:
            self._state_machine = MetadataStateMachine.from_checkpoint(bytes(response.checkpoint))
            logger.info(
                "node %d: loaded metadata checkpoint at offset %d",
                self.broker_id,
                self._state_machine.last_applied_offset,
            )
        for batch in response.batches:
            if batch.offset > self._state_machine.last_applied_offset:
                self._state_machine.apply(batch.offset, bytes(batch.payload))
        return self._state_machine.image is not before

    def add_controller_client(self, client: ControllerClient) -> None:
        """Keep `client`'s controllers current too (from the image as it is now on)."""
        self.other_controller_clients.append(client)
        self._learn_controllers(self.image)

    def _learn_controllers(self, image: MetadataImage) -> None:
        """Controllers added at run time: every client of this broker may now call them."""
        voters = [Voter(r.controller_id, r.controller_host, r.controller_port)
                  for r in image.controllers.values()]  # fmt: skip
        for client in (self.client, self.fetch_client, *self.other_controller_clients):
            client.learn_voters(voters)

    def _log_changes(self, before: MetadataImage, after: MetadataImage) -> None:
        changes = partition_changes(before, after)
        for change in changes[:MAX_LOGGED_CHANGES]:
            new = change.new
            if new is None:
                logger.info(
                    "node %d: partition %s-%d removed",
                    self.broker_id,
                    change.topic_name,
                    change.partition,
                )
                continue
            logger.info(
                "node %d: partition %s-%d leader=%d leader_epoch=%d isr=%s metadata_offset=%d",
                self.broker_id,
                change.topic_name,
                change.partition,
                new.leader,
                new.leader_epoch,
                list(new.isr),
                after.last_offset,
            )
        if len(changes) > MAX_LOGGED_CHANGES:
            logger.info(
                "node %d: ... and %d more partition changes",
                self.broker_id,
                len(changes) - MAX_LOGGED_CHANGES,
            )

    async def controlled_shutdown(self) -> None:
        """Ask the controller to move our leaderships away and fence us; best effort."""
        self._stopping = True
        self._idle_scope.cancel()  # frees the client for the shutdown heartbeat
        if self.broker_epoch < 0:
            return
        request = c.BrokerHeartbeatRequest(
            self.broker_id,
            self.broker_epoch,
            self._published.last_offset,
            want_shut_down=True,
        )
        try:
            with trio.fail_after(self.session_timeout_ms / 1000):
                response = await self.client.heartbeat(request)
            logger.info(
                "node %d: controlled shutdown: %s", self.broker_id, response.error_code.name
            )
        except KafkaError as exc:
            logger.warning("node %d: controlled shutdown failed: %s", self.broker_id, exc)
        except trio.TooSlowError:
            logger.warning("node %d: controlled shutdown failed: no answer within %d ms",
                           self.broker_id, self.session_timeout_ms)  # fmt: skip
