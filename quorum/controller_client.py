"""ControllerClient: a broker's calls to the controller quorum over TCP (Kafka framing).

One TCP connection at a time (TLS when given an `ssl_context`: the controller listener is
`CONTROLLER:SSL`; the controller's certificate is checked against the voter's host), proving
it holds the cluster secret (controller_auth.py) before any request; one request at a time (a lock), to one of
`controller.quorum.voters`. `call()` finds the active controller: it starts with the last
controller that answered (or the first voter), follows a NOT_CONTROLLER answer's `leader_id`
when it has one, otherwise moves to the next voter; connection failures and retriable errors
are retried with exponential backoff up to `max_attempts`. Everything is bounded (attempts,
and `request_timeout_ms` per attempt, connecting and the handshake included); callers still put
`trio.fail_after` around calls. A caller's deadline must leave room for more than one attempt:
an attempt that times out moves on to the next voter (a controller cut off from the network
keeps the connection open and never answers, or never finishes the handshake), while a
caller's own deadline only cancels, and its retry would go back to the same voter.

Make before break: a connection whose request timed out or was cancelled is out of step, but it
is not closed then: it is set aside until a later call has been answered (not with
NOT_CONTROLLER) on another connection, and closed after that (or when more than MAX_ABANDONED
pile up). The active controller fences a broker soon after the connection it last heartbeated on
closes (quorum/broker_heartbeats.py: a killed broker's kernel closes it at once); a live broker
that gave up waiting on a slow controller (starved of CPU, applying a large metadata change)
must not look like a dead one. By the time the old connection closes, the controller has taken a
heartbeat on the new one, and closing the old one means nothing to it. (Closing at once turned a
controller answering 0.75 s late into every broker fenced within 100 ms, the fencing into 1,000
partitions' ISR changes, and those into more late answers: seen with a thousand partitions on a
loaded 2-core box, ISRs refilled after 86 s instead of 2.)

`ControllerClient` implements quorum.broker_interface.ControllerChannel (create_topics,
delete_topics, create_partitions, alter_topic_configs, alter_partition,
allocate_producer_ids, elect_leaders, alter_partition_reassignments) plus register / heartbeat / controlled_shutdown / metadata_fetch for
broker_lifecycle. MetadataFetch may be served by any controller, so `any_controller=True`
does not chase the leader.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Sequence
from typing import Any

import trio

from log.common.errors import (
    ErrorCode,
    InvalidRequestError,
    KafkaError,
    RequestTimedOutError,
    error_for,
)
from log.common.node_config import Voter
from log.protocol import controller_extra as extra
from log.protocol.controller import (
    ALLOCATE_PRODUCER_IDS_REQUEST,
    BROKER_HEARTBEAT_REQUEST,
    BROKER_REGISTRATION_REQUEST,
)
from log.protocol.framing import FrameDecoder
from quorum import acls, controller_auth, controller_codec, features
from quorum import broker_configs as bc
from quorum import controller as c
from quorum import leader_election as le
from quorum import metadata_quorum as mq
from quorum import reassignment as ra
from quorum.scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_MS = 1000
REQUEST_TIMEOUT_MS = 10_000  # per attempt by default; a MetadataFetch adds its max_wait_ms
MAX_ATTEMPTS = 20
RETRY_BACKOFF_MS = 50
RETRY_BACKOFF_MAX_MS = 200  # a controller election takes ~0.3-0.7 s: look again soon
MAX_READ_BYTES = 1 << 20
MAX_ABANDONED = 4  # timed-out connections kept open until a call is answered on another
MAX_RESPONSE_BYTES = 512 * 1024 * 1024  # a MetadataFetch may carry a whole checkpoint
_RETRIABLE = frozenset(
    {
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.UNKNOWN_SERVER_ERROR,
        ErrorCode.STALE_CONTROLLER_EPOCH,
    }
)


class ControllerClient:
    def __init__(
        self,
        voters: Sequence[Voter],
        *,
        secret: str,
        client_id: str = "quorumlog-broker",
        max_attempts: int = MAX_ATTEMPTS,
        ssl_context: ssl.SSLContext | None = None,
        request_timeout_ms: int = REQUEST_TIMEOUT_MS,
    ) -> None:
        assert voters and max_attempts >= 1 and request_timeout_ms > 0
        self.voters = tuple(voters)
        self.secret = secret  # the cluster's controller.quorum.password (controller_auth.py)
        self.ssl_context = ssl_context  # log.security.tls.controller_contexts; None: plaintext
        self.client_id = client_id
        self.max_attempts = max_attempts
        self.request_timeout_ms = request_timeout_ms  # per attempt; a MetadataFetch adds its wait
        self._current = 0  # index into voters
        self._stream: trio.abc.Stream | None = None
        self._frames: FrameDecoder | None = None
        self._abandoned: list[trio.abc.Stream] = []  # out of step, kept open (see above)
        self._next_correlation_id = 0
        self._lock = trio.Lock()

    async def aclose(self) -> None:
        await self._disconnect()
        await self._close_abandoned(0)

    async def _disconnect(self) -> None:
        stream, self._stream, self._frames = self._stream, None, None
        if stream is not None:
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _abandon(self) -> None:
        """Set the current connection aside, open (its request went unanswered in time)."""
        stream, self._stream, self._frames = self._stream, None, None
        if stream is not None:
            self._abandoned.append(stream)
            await self._close_abandoned(MAX_ABANDONED)

    async def _close_abandoned(self, keep: int) -> None:
        """Close the oldest set-aside connections, all but `keep`."""
        with trio.CancelScope(shield=True):
            while len(self._abandoned) > keep:
                await self._abandoned.pop(0).aclose()

    async def next_controller(self) -> None:
        """Drop the connection and use the next voter from the next call on."""
        async with self._lock:
            await self._disconnect()
            self._current = (self._current + 1) % len(self.voters)

    def learn_voters(self, voters: Sequence[Voter]) -> None:
        """Controllers registered at run time (`metadata-quorum add-controller`): a known id's
        endpoint is replaced in place, a new one appended, so calls can find a controller the
        configuration never named. The current position stays on the same index."""
        known = list(self.voters)
        for voter in voters:
            for i, old in enumerate(known):
                if old.node_id == voter.node_id and voter.node_id >= 0:
                    known[i] = voter
                    break
            else:
                known.append(voter)
        self.voters = tuple(known)

    def _move_to(self, leader_id: int) -> None:
        for i, voter in enumerate(self.voters):
            if voter.node_id == leader_id:
                self._current = i
                return
        self._current = (self._current + 1) % len(self.voters)

    async def idle(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` between calls, watching the open connection: True as soon
        as the controller closes it (it died, or lost leadership and dropped its broker
        connections) or it breaks, so the caller can call again at once instead of finding
        out at its next call. No answer is due while idle, so any bytes mean the same."""
        with trio.move_on_after(timeout_s):
            async with self._lock:
                stream = self._stream
                if stream is not None:
                    try:
                        await stream.receive_some(1)
                    except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
                        pass
                    await self._disconnect()
                    return True
            await trio.sleep_forever()  # not connected: nothing to watch
        return False

    async def _exchange(self, api_key: int, body: Any, timeout_s: float) -> Any:
        if self._stream is None:
            voter = self.voters[self._current]
            with trio.fail_after(CONNECT_TIMEOUT_MS / 1000):
                stream: trio.abc.Stream = await trio.open_tcp_stream(voter.host, voter.port)
            try:
                with trio.fail_after(controller_auth.HANDSHAKE_TIMEOUT_S):
                    if self.ssl_context is not None:
                        stream = trio.SSLStream(
                            stream, self.ssl_context, server_hostname=voter.host
                        )
                        await stream.do_handshake()
                    await controller_auth.connect(stream, self.secret)
            except BaseException as exc:
                with trio.CancelScope(shield=True):
                    await stream.aclose()
                if isinstance(exc, controller_auth.HandshakeError):
                    raise trio.BrokenResourceError(f"handshake with {voter}: {exc}") from None
                raise
            self._stream = stream
            self._frames = FrameDecoder(MAX_RESPONSE_BYTES)
        stream, frames = self._stream, self._frames
        assert stream is not None and frames is not None
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        try:
            with trio.fail_after(timeout_s):
                await stream.send_all(
                    extra.encode_request_frame(api_key, correlation_id, self.client_id, body)
                )
                while (frame := frames.next_frame()) is None:
                    data = await stream.receive_some(MAX_READ_BYTES)
                    if not data:
                        raise trio.BrokenResourceError("controller closed the connection")
                    frames.feed(data)
        except (trio.TooSlowError, trio.Cancelled):  # out of step, but the peer may be live
            await self._abandon()
            raise
        except BaseException:  # failed mid-request: the stream is out of step
            await self._disconnect()
            raise
        answered_id, response = extra.decode_response_frame(frame, api_key)
        if answered_id != correlation_id:
            raise InvalidRequestError(f"correlation id {answered_id}, expected {correlation_id}")
        return response

    async def call(self, api_key: int, body: Any, *, any_controller: bool = False) -> Any:
        """Send one request to the (active) controller; return a response body whose
        error_code is not retriable. Raises a KafkaError after max_attempts."""
        extra_wait_s = getattr(body, "max_wait_ms", 0) / 1000
        backoff_ms = RETRY_BACKOFF_MS
        last_error: str = "no attempt"
        async with self._lock:
            for _attempt in range(self.max_attempts):
                attempt_s = self.request_timeout_ms / 1000 + extra_wait_s
                try:
                    with trio.fail_after(attempt_s):  # connect and handshake included
                        response = await self._exchange(api_key, body, attempt_s)
                except (OSError, trio.BrokenResourceError, trio.TooSlowError, KafkaError) as exc:
                    last_error = f"{self.voters[self._current]}: {type(exc).__name__} {exc}"
                    await self._disconnect()
                    self._current = (self._current + 1) % len(self.voters)
                else:
                    try:
                        code = ErrorCode(response.error_code)
                    except ValueError:
                        code = ErrorCode.UNKNOWN_SERVER_ERROR
                    if code not in _RETRIABLE:
                        # Answered (not NOT_CONTROLLER from another voter): what the old
                        # connections were for is done, and they can go.
                        await self._close_abandoned(0)
                        return response
                    last_error = f"{self.voters[self._current]}: {code.name}"
                    if any_controller:  # e.g. that controller is stopping: try another
                        await self._disconnect()
                        self._current = (self._current + 1) % len(self.voters)
                    elif code == ErrorCode.NOT_CONTROLLER:
                        leader_id = getattr(response, "leader_id", -1)
                        await self._disconnect()
                        self._move_to(leader_id)
                        if leader_id >= 0 and leader_id != self.voters[self._current].node_id:
                            self._current = (self._current + 1) % len(self.voters)
                await trio.sleep(backoff_ms / 1000)
                backoff_ms = min(2 * backoff_ms, RETRY_BACKOFF_MAX_MS)
        raise RequestTimedOutError(f"controller call {api_key} failed: {last_error}")

    # -- broker-to-controller RPCs --------------------------------------------------------------

    async def register(self, request: c.BrokerRegistrationRequest, cluster_id: str) -> Any:
        request_cls: Any = BROKER_REGISTRATION_REQUEST.cls  # made at run time by schema.py: untyped
        listener = request_cls.Listener
        body = request_cls(
            broker_id=request.broker_id,
            cluster_id=cluster_id,
            incarnation_id=request.incarnation_id,
            listeners=[
                listener(name=e.name, host=e.host, port=e.port, security_protocol=0)
                for e in request.endpoints
            ],
            features=[],
            rack=request.rack,
            previous_broker_epoch=request.previous_broker_epoch,
            # A log directory that came back empty is reported as Kafka's reserved "lost"
            # directory id: the controller then never elects it as the last known leader.
            log_dirs=[c.LOST_DIRECTORY_ID] if request.log_dir_empty else [],
        )
        r = await self.call(62, body)
        return c.BrokerRegistrationResponse(ErrorCode(r.error_code), r.broker_epoch)

    async def heartbeat(self, request: c.BrokerHeartbeatRequest) -> c.BrokerHeartbeatResponse:
        body = BROKER_HEARTBEAT_REQUEST.cls(
            broker_id=request.broker_id,
            broker_epoch=request.broker_epoch,
            current_metadata_offset=request.current_metadata_offset,
            want_fence=request.want_fence,
            want_shut_down=request.want_shut_down,
        )
        r = await self.call(63, body)
        return c.BrokerHeartbeatResponse(
            ErrorCode(r.error_code), r.is_caught_up, r.is_fenced, r.should_shut_down
        )

    async def metadata_fetch(
        self, broker_id: int, after_offset: int, max_wait_ms: int, max_batches: int = 1000
    ) -> Any:
        body = extra.METADATA_FETCH_REQUEST.cls(
            broker_id=broker_id,
            after_offset=after_offset,
            max_wait_ms=max_wait_ms,
            max_batches=max_batches,
        )
        response = await self.call(extra.METADATA_FETCH_KEY, body, any_controller=True)
        if response.error_code != ErrorCode.NONE:
            raise error_for(response.error_code, f"metadata fetch after {after_offset}")
        return response

    async def _forward(self, operation: str, request: Any, *, any_controller: bool = False) -> Any:
        body = extra.CONTROLLER_FORWARD_REQUEST.cls(
            operation=operation, payload=controller_codec.encode(request)
        )
        r = await self.call(extra.CONTROLLER_FORWARD_KEY, body, any_controller=any_controller)
        if r.error_code != ErrorCode.NONE:
            raise error_for(r.error_code, r.error_message or operation)
        return controller_codec.decode(controller_codec.OPERATIONS[operation][1], r.payload)

    async def controlled_shutdown(
        self, request: c.ControlledShutdownRequest
    ) -> c.ControlledShutdownResponse:
        return await self._forward("controlled_shutdown", request)

    # -- ControllerChannel ----------------------------------------------------------------------

    async def create_topics(self, request: c.CreateTopicsRequest) -> c.CreateTopicsResponse:
        return await self._forward("create_topics", request)

    async def delete_topics(self, request: c.DeleteTopicsRequest) -> c.DeleteTopicsResponse:
        return await self._forward("delete_topics", request)

    async def create_partitions(
        self, request: c.CreatePartitionsRequest
    ) -> c.CreatePartitionsResponse:
        return await self._forward("create_partitions", request)

    async def alter_topic_configs(self, request: c.AlterConfigsRequest) -> c.AlterConfigsResponse:
        return await self._forward("alter_topic_configs", request)

    async def alter_broker_configs(
        self, request: bc.AlterBrokerConfigsRequest
    ) -> bc.AlterBrokerConfigsResponse:
        return await self._forward("alter_broker_configs", request)

    async def update_features(
        self, request: features.UpdateFeaturesRequest
    ) -> features.UpdateFeaturesResponse:
        return await self._forward("update_features", request)

    async def alter_partitions(
        self, request: c.AlterPartitionsRequest
    ) -> c.AlterPartitionsResponse:
        return await self._forward("alter_partitions", request)

    async def elect_leaders(self, request: le.ElectLeadersRequest) -> le.ElectLeadersResponse:
        return await self._forward("elect_leaders", request)

    async def alter_partition_reassignments(
        self, request: ra.AlterPartitionReassignmentsRequest
    ) -> ra.AlterPartitionReassignmentsResponse:
        return await self._forward("alter_partition_reassignments", request)

    async def alter_user_scram_credentials(
        self, request: AlterUserScramCredentialsRequest
    ) -> AlterUserScramCredentialsResponse:
        return await self._forward("alter_user_scram_credentials", request)

    async def create_acls(self, request: acls.CreateAclsRequest) -> acls.CreateAclsResponse:
        return await self._forward("create_acls", request)

    async def delete_acls(self, request: acls.DeleteAclsRequest) -> acls.DeleteAclsResponse:
        return await self._forward("delete_acls", request)

    async def describe_quorum(self, *, from_any_controller: bool = False) -> Any:
        """The quorum as the leader sees it, or (`from_any_controller`) as the first controller
        that answers does; the voters' controller endpoints are learnt either way."""
        request = mq.DescribeQuorumRequest(from_any_controller)
        r = await self._forward("describe_quorum", request, any_controller=from_any_controller)
        learnt = [(v.voter_id, mq.parse_endpoint(v.controller_endpoint)) for v in r.voters]
        self.learn_voters([Voter(i, *e) for i, e in learnt if i >= 0 and e is not None])
        return r

    async def add_raft_voter(self, request: mq.AddRaftVoterRequest) -> mq.VoterChangeResponse:
        return await self._forward("add_raft_voter", request)

    async def remove_raft_voter(self, request: mq.RemoveRaftVoterRequest) -> mq.VoterChangeResponse:
        return await self._forward("remove_raft_voter", request)

    async def allocate_producer_ids(
        self, request: c.AllocateProducerIdsRequest
    ) -> c.AllocateProducerIdsResponse:
        body = ALLOCATE_PRODUCER_IDS_REQUEST.cls(
            broker_id=request.broker_id, broker_epoch=request.broker_epoch
        )
        r = await self.call(67, body)
        return c.AllocateProducerIdsResponse(
            ErrorCode(r.error_code), r.producer_id_start, r.producer_id_len
        )
