"""BrokerConnection: one trio TCP connection to a broker speaking Kafka framing (driver).

Theory of operation. `run` (started with `nursery.start`) connects, performs the ApiVersions
handshake (we ask at v2, fall back to v0 when the broker answers UNSUPPORTED_VERSION per
KIP-511), picks per API the highest version both sides speak (`choose_versions`), reports
itself started, then reads responses until the connection dies or is closed. The sans-IO
`ClientCodec` frames requests and matches responses to requests in order (Kafka answers a
connection's requests strictly in order).

`send(api_key, body, on_response)` writes one request and returns at once; the reader later
calls `on_response(response_or_error)` where the argument is a `ClientResponse` or the
`KafkaError` that ended the request (`ConnectionFailedError`, `RequestTimedOutError`). A
Produce with acks=0 has no response: its callback runs right after the write with None.
`request(api_key, body)` is the awaiting form for cold APIs (Metadata, ListOffsets...).

Limits: at most `max_in_flight` requests await a response (`send` raises if the caller did
not check `can_send`; `request` waits for room); each request must be answered within
`request_timeout_ms`, else the connection is closed and every outstanding request fails
with REQUEST_TIMED_OUT, as in Kafka's NetworkClient; frames are bounded by
`max_frame_bytes`. `BrokerConnections` keeps one connection per node id, connecting in the
background with `reconnect_backoff_ms` between attempts to the same node.

How a connection is opened is a `Connector` (host, port) -> stream: `open_plaintext` (TCP with
TCP_NODELAY) unless the caller passes one that adds TLS and/or a SASL login (the CLI builds
those from `--command-config`: tools/client_security.py). A connector's KafkaError (a refused
login: SASL_AUTHENTICATION_FAILED) ends the connection with that error.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from log.common.errors import (
    ErrorCode,
    KafkaError,
    RequestTimedOutError,
    UnsupportedVersionError,
)
from log.common.vectored_send import send_parts
from log.protocol.api_versions import API_VERSIONS_REQUEST
from log.protocol.apis import API_VERSIONS_KEY, APIS
from log.protocol.client_codec import PRODUCE_KEY, ClientCodec, ClientResponse, choose_versions
from log.protocol.framing import DEFAULT_MAX_FRAME_BYTES

MAX_READ_BYTES = 1 << 20  # the most one receive_some returns
API_VERSIONS_REQUEST_VERSION = 2  # the highest non-flexible ApiVersions both sides know
DEFAULT_RECONNECT_BACKOFF_MS = 50  # Kafka's reconnect.backoff.ms

ResponseCallback = Callable[[ClientResponse | KafkaError | None], None]
Connector = Callable[[str, int], Awaitable[trio.abc.Stream]]  # (host, port) -> a ready stream


async def open_plaintext(host: str, port: int) -> trio.abc.Stream:
    """The default Connector: TCP, requests written at once (TCP_NODELAY)."""
    stream = await trio.open_tcp_stream(host, port)
    stream.setsockopt(6, 1, 1)  # IPPROTO_TCP, TCP_NODELAY
    return stream


class ConnectionFailedError(KafkaError):
    """The connection to a broker could not be made or was lost (Kafka's NetworkException)."""

    error_code = ErrorCode.NETWORK_EXCEPTION


def now_ms() -> int:
    """Monotonic milliseconds for the producer's sans-IO cores."""
    return int(time.monotonic() * 1000)


class _Pending:
    __slots__ = ("api_key", "deadline", "callback")

    def __init__(self, api_key: int, deadline: float, callback: ResponseCallback) -> None:
        self.api_key = api_key
        self.deadline = deadline
        self.callback = callback


class BrokerConnection:
    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int = -1,
        client_id: str = "quorumlog-producer",
        max_in_flight: int = 5,
        request_timeout_ms: int = 30000,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        connector: Connector = open_plaintext,
    ) -> None:
        assert max_in_flight >= 1
        self.connector = connector
        self.host = host
        self.port = port
        self.node_id = node_id
        self.max_in_flight = max_in_flight
        self.request_timeout_ms = request_timeout_ms
        self.versions: dict[int, int] = {}
        self._codec = ClientCodec(client_id, max_frame_bytes, max_in_flight + 1)
        self._stream: trio.abc.Stream | None = None
        self._send_lock = trio.Lock()
        self._pending: list[_Pending] = []  # in request order; the head is answered first
        self._read_scope: trio.CancelScope | None = None
        self._room = trio.Condition()
        self._closed = False
        self.error: KafkaError | None = None

    # -- state ----------------------------------------------------------------------------------

    @property
    def is_connected(self) -> bool:
        return self._stream is not None and not self._closed

    @property
    def in_flight_count(self) -> int:
        return len(self._pending)

    @property
    def can_send(self) -> bool:
        """Connected, handshaken, and below max in-flight requests (Kafka's client.ready)."""
        return self.is_connected and len(self._pending) < self.max_in_flight

    def version(self, api_key: int) -> int:
        version = self.versions.get(api_key)
        if version is None:
            raise UnsupportedVersionError(
                f"broker {self.host}:{self.port} speaks no version of {APIS[api_key].name} "
                "that we implement"
            )
        return version

    # -- lifetime -------------------------------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Connect, handshake, report started, then read responses until closed or broken."""
        try:
            try:
                with trio.fail_after(self.request_timeout_ms / 1000):
                    self._stream = await self.connector(self.host, self.port)
                    await self._handshake()
            except (OSError, trio.TooSlowError, trio.BrokenResourceError) as exc:
                raise ConnectionFailedError(
                    f"cannot connect to {self.host}:{self.port}: {exc!r}"
                ) from None
            task_status.started(self)
            await self._read_loop()
        except KafkaError as exc:
            self._fail(exc)
            raise
        finally:
            self._fail(self.error or ConnectionFailedError("connection closed"))
            if self._stream is not None:
                with trio.CancelScope(shield=True):
                    await self._stream.aclose()

    async def _handshake(self) -> None:
        assert self._stream is not None
        for version in (API_VERSIONS_REQUEST_VERSION, 0):
            body = API_VERSIONS_REQUEST.cls()
            await self._stream.send_all(self._codec.encode_request(API_VERSIONS_KEY, version, body))
            response = await self._receive_one()
            if response.body.error_code == ErrorCode.NONE:
                self.versions = choose_versions(response.body.api_keys)
                return
            if response.body.error_code != ErrorCode.UNSUPPORTED_VERSION:
                break
        raise ConnectionFailedError(
            f"ApiVersions refused by {self.host}:{self.port}: error {response.body.error_code}"
        )

    async def _receive_one(self) -> ClientResponse:
        assert self._stream is not None
        while True:
            data = await self._stream.receive_some(MAX_READ_BYTES)
            if not data:
                raise ConnectionFailedError(f"{self.host}:{self.port} closed the connection")
            responses = self._codec.receive_data(data)
            if responses:
                assert len(responses) == 1
                return responses[0]

    async def _read_loop(self) -> None:
        assert self._stream is not None
        while not self._closed:
            deadline = self._pending[0].deadline if self._pending else math.inf
            with trio.CancelScope(deadline=deadline) as scope:
                self._read_scope = scope
                try:
                    data = await self._stream.receive_some(MAX_READ_BYTES)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    if self._closed:
                        return
                    raise ConnectionFailedError(
                        f"connection to {self.host}:{self.port} lost: {exc!r}"
                    ) from None
            self._read_scope = None
            if scope.cancelled_caught:
                if self._closed:
                    return
                if self._pending and trio.current_time() >= self._pending[0].deadline:
                    raise RequestTimedOutError(
                        f"no response from {self.host}:{self.port} within "
                        f"{self.request_timeout_ms} ms"
                    )
                continue  # a new request arrived: recompute the deadline
            if not data:
                raise ConnectionFailedError(f"{self.host}:{self.port} closed the connection")
            try:
                responses = self._codec.receive_data(data)
            except KafkaError as exc:
                raise ConnectionFailedError(
                    f"bad response from {self.host}:{self.port}: {exc}"
                ) from None
            for response in responses:
                pending = self._pending.pop(0)
                assert pending.api_key == response.api_key
                pending.callback(response)
            if responses:
                async with self._room:
                    self._room.notify_all()

    def close(self) -> None:
        """Stop reading; outstanding requests fail with ConnectionFailedError."""
        self._closed = True
        if self._read_scope is not None:
            self._read_scope.cancel()

    def _fail(self, error: KafkaError) -> None:
        if self.error is None:
            self.error = error
        self._closed = True
        pending, self._pending = self._pending, []
        for entry in pending:
            entry.callback(error)

    # -- requests -------------------------------------------------------------------------------

    async def send(
        self, api_key: int, body: Any, on_response: ResponseCallback, version: int | None = None
    ) -> None:
        """Write one request; `on_response` gets the response, an error, or None (acks=0)."""
        if not self.is_connected:
            on_response(self.error or ConnectionFailedError("not connected"))
            return
        expects_response = not (api_key == PRODUCE_KEY and body.acks == 0)
        assert not expects_response or len(self._pending) < self.max_in_flight, "check can_send"
        version = self.version(api_key) if version is None else version
        parts = self._codec.encode_request_parts(api_key, version, body, expects_response)
        if expects_response:
            deadline = trio.current_time() + self.request_timeout_ms / 1000
            self._pending.append(_Pending(api_key, deadline, on_response))
            if self._read_scope is not None and self._read_scope.deadline > deadline:
                self._read_scope.deadline = deadline
        try:
            async with self._send_lock:
                assert self._stream is not None
                await send_parts(self._stream, parts)  # plain TCP: record batches not joined
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            error = ConnectionFailedError(f"send to {self.host}:{self.port} failed: {exc!r}")
            self._fail(error)
            if self._read_scope is not None:
                self._read_scope.cancel()
            if not expects_response:
                on_response(self.error or error)  # not in _pending: nobody else will tell it
            return
        if not expects_response:
            on_response(None)

    async def request(self, api_key: int, body: Any, version: int | None = None) -> Any:
        """Send and await the response body; raises the KafkaError that ended the request."""
        async with self._room:
            while self.is_connected and len(self._pending) >= self.max_in_flight:
                await self._room.wait()
        done = trio.Event()
        outcome: list[Any] = []

        def on_response(result: ClientResponse | KafkaError | None) -> None:
            outcome.append(result)
            done.set()

        await self.send(api_key, body, on_response, version)
        await done.wait()
        result = outcome[0]
        if isinstance(result, KafkaError):
            raise result
        assert result is not None
        return result.body


def parse_bootstrap_servers(
    bootstrap_servers: str | Sequence[str],
) -> list[tuple[str, int]]:
    """ "host:port,host:port" (or a list of them) -> [(host, port)]; default port 9092."""
    items = (
        bootstrap_servers.split(",")
        if isinstance(bootstrap_servers, str)
        else list(bootstrap_servers)
    )
    addresses = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        host, _, port = item.rpartition(":")
        if not host:
            host, port = item, "9092"
        try:
            addresses.append((host.strip("[]"), int(port)))
        except ValueError:
            raise ValueError(f"bad bootstrap server {item!r}: expected host:port") from None
    if not addresses:
        raise ValueError("bootstrap.servers is empty")
    return addresses


class BrokerConnections:
    """One connection per node id, connected in the background; the driver owns the nursery."""

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        client_id: str,
        max_in_flight: int,
        request_timeout_ms: int,
        reconnect_backoff_ms: int = DEFAULT_RECONNECT_BACKOFF_MS,
        on_change: Callable[[], None] = lambda: None,
        on_disconnect: Callable[[int], None] = lambda node_id: None,
        connector: Connector = open_plaintext,
    ) -> None:
        self._nursery = nursery
        self._connector = connector
        self._client_id = client_id
        self._max_in_flight = max_in_flight
        self._request_timeout_ms = request_timeout_ms
        self._reconnect_backoff_ms = reconnect_backoff_ms
        self._on_change = on_change
        # Called with the node id when a connection attempt fails or a connection is lost
        # (Kafka's NetworkClient asks for a metadata update then: the node may be gone).
        self._on_disconnect = on_disconnect
        self._connections: dict[int, BrokerConnection] = {}
        self._last_error: dict[int, KafkaError] = {}
        self._connecting: set[int] = set()
        self._last_attempt_ms: dict[int, int] = {}
        self._closed = False
        self._changed = trio.Event()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()
        self._on_change()

    def get(self, node_id: int) -> BrokerConnection | None:
        """The node's ready connection, or None (then start one with `connect`)."""
        connection = self._connections.get(node_id)
        if connection is not None and connection.is_connected:
            return connection
        return None

    def is_ready(self, node_id: int) -> bool:
        connection = self.get(node_id)
        return connection is not None and connection.can_send

    def connection_delay_ms(self, node_id: int, now: int) -> int:
        last = self._last_attempt_ms.get(node_id)
        if last is None:
            return 0
        return max(0, last + self._reconnect_backoff_ms - now)

    def connect(self, node_id: int, host: str, port: int) -> None:
        """Start connecting to `node_id` unless connected, connecting or backing off."""
        if self._closed or self.get(node_id) is not None or node_id in self._connecting:
            return
        now = now_ms()
        if self.connection_delay_ms(node_id, now) > 0:
            return
        self._last_attempt_ms[node_id] = now
        self._connecting.add(node_id)
        self._nursery.start_soon(self._run, node_id, host, port)

    async def _run(self, node_id: int, host: str, port: int) -> None:
        connection = BrokerConnection(
            host,
            port,
            node_id=node_id,
            client_id=self._client_id,
            max_in_flight=self._max_in_flight,
            request_timeout_ms=self._request_timeout_ms,
            connector=self._connector,
        )
        pool = self

        class _Status:
            def started(self, value: object = None) -> None:
                pool._connections[node_id] = connection
                pool._connecting.discard(node_id)
                pool._notify()

        try:
            await connection.run(task_status=_Status())
        except KafkaError as exc:
            # The callbacks of its requests saw the error; the next attempt backs off.
            self._last_error[node_id] = exc
        finally:
            self._connecting.discard(node_id)
            if self._connections.get(node_id) is connection:
                del self._connections[node_id]
            if not self._closed:
                self._on_disconnect(node_id)
            self._notify()

    async def connected(self, node_id: int, host: str, port: int) -> BrokerConnection:
        """Connect if needed and wait until ready (callers bound this with a timeout). An
        attempt that fails raises ConnectionFailedError at once, so a caller going through
        candidate nodes moves on instead of retrying a dead node until its timeout; one whose
        SASL login was refused raises that error (SASL_AUTHENTICATION_FAILED)."""
        attempted = False
        while True:
            if self._closed:
                raise ConnectionFailedError("connections closed")
            connection = self.get(node_id)
            if connection is not None:
                return connection
            if attempted and node_id not in self._connecting:
                error = self._last_error.get(node_id)
                if error is not None and error.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED:
                    raise error  # as Kafka's clients: a refused login is not retried
                raise ConnectionFailedError(f"cannot connect to node {node_id}: {error}")
            delay_ms = self.connection_delay_ms(node_id, now_ms())
            if node_id not in self._connecting and delay_ms:
                with trio.move_on_after(delay_ms / 1000):
                    await self._changed.wait()  # backing off: or another task connected it
                continue
            self.connect(node_id, host, port)
            attempted = True
            await self._changed.wait()

    def close(self) -> None:
        self._closed = True
        for connection in list(self._connections.values()):
            connection.close()

    def ready_nodes(self) -> list[int]:
        return [node for node, c in self._connections.items() if c.can_send]

    def in_flight_count(self) -> int:
        return sum(c.in_flight_count for c in self._connections.values())
