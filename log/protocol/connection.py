"""The server side of one Kafka connection, sans-IO: bytes in, typed requests out, responses
back to bytes in request order.

    conn = ServerConnection(max_frame_bytes=..., max_in_flight=...)
    conn.receive_data(data)                  # InvalidFrameError: close the connection
    while (event := conn.next_request()) not in (NEED_DATA, PAUSED):
        if isinstance(event, BadRequest):    # answered already, or the connection must close
            send(event.data_to_send); close if event.close_connection
        else:                                # a Request: dispatch, later
            send(conn.send_response(event, body))   # or conn.no_response(event) for acks=0

Kafka answers requests on a connection strictly in the order they arrived, so a response that
completes early (a fetch) waits behind an earlier one still parked (an acks=all produce):
`send_response` returns whatever is now releasable, possibly nothing. `PAUSED` means
`max_in_flight` requests are unanswered: stop reading the socket until one is answered.
After a SaslHandshake v0 the driver takes the client's raw SASL tokens with `next_sasl_token`
and answers each with `sasl_token_frame` (no headers), until the login completes.

What cannot be answered closes the connection, as in Kafka: a bad frame size, an unknown API
key, a version we have no schema for, a body that does not parse. ApiVersions at a version we
do not implement is answered with the v0 error body (KIP-511); a version we advertise but do
not implement (Produce v0-2...) with UNSUPPORTED_VERSION in that version's layout.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from log.common.errors import ErrorCode, InvalidRequestError
from log.protocol.apis import (
    API_VERSIONS_KEY,
    APIS,
    Api,
    api_versions_error_body,
    error_response_body,
)
from log.protocol.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    SIZE,
    FrameDecoder,
    RequestHeader,
    encode_response_header,
    read_request_header,
    response_header_version,
)
from log.protocol.schema import skip_tagged_fields


class _Sentinel:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NEED_DATA = _Sentinel("NEED_DATA")  # no whole request buffered: read more
PAUSED = _Sentinel("PAUSED")  # max_in_flight requests unanswered: stop reading

PRODUCE_KEY = 0
DEFAULT_MAX_READ_BYTES = 1 << 20  # the most a driver reads from the socket at once
DEFAULT_MAX_IN_FLIGHT = 5  # what idempotent producers use; Kafka handles one at a time


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    header: RequestHeader
    api: Api
    body: Any
    sequence: int  # connection-local arrival order
    # What handlers keep per connection (the fetch fill order); shared by its requests.
    connection_state: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    @property
    def expects_response(self) -> bool:
        """False for Produce with acks=0: finish it with `no_response` instead."""
        return not (self.header.api_key == PRODUCE_KEY and self.body.acks == 0)


@dataclasses.dataclass(frozen=True, slots=True)
class BadRequest:
    """A request we did not hand out. Send `data_to_send`, then close if `close_connection`."""

    header: RequestHeader | None
    error_code: ErrorCode
    reason: str
    close_connection: bool
    data_to_send: bytes = b""


@dataclasses.dataclass(frozen=True, slots=True)
class SaslToken:
    """A raw SASL token: after a SaslHandshake v0 the client sends its tokens as bare
    size-prefixed frames, no request header (the pre-KIP-152 framing), until authenticated."""

    data: bytes


def sasl_token_frame(token: bytes) -> bytes:
    """The server's answer to a SaslToken: the challenge as a bare size-prefixed frame."""
    return SIZE.pack(len(token)) + token


def encode_response(api: Api, api_version: int, correlation_id: int, body: Any) -> list:
    """A whole response frame as a list of parts (records stay zero-copy buffers)."""
    flexible = api.response.is_flexible(api_version)
    parts: list = [
        b"",
        encode_response_header(correlation_id, response_header_version(api.api_key, flexible)),
    ]
    api.response.encode_parts(body, api_version, parts)
    parts[0] = SIZE.pack(sum(len(part) for part in parts))
    return parts


def encode_response_frame(correlation_id: int, api_key: int, api_version: int, body: Any) -> bytes:
    """A whole response frame (size, header of the right version, body), stateless."""
    return b"".join(encode_response(APIS[api_key], api_version, correlation_id, body))


class ServerConnection:
    def __init__(
        self,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        advertised_api_keys: frozenset[int] | None = None,
        accepted_api_keys: frozenset[int] | None = None,
        max_read_bytes: int = DEFAULT_MAX_READ_BYTES,
        legacy_versions: bool = False,
    ) -> None:
        assert max_in_flight >= 1
        self.max_in_flight = max_in_flight
        self.advertised_api_keys = advertised_api_keys
        # KIP-896's removed request versions: answered (and advertised) only when True
        self.legacy_versions = legacy_versions
        # APIs this listener answers (None: every declared API); others close, as in Kafka.
        self.accepted_api_keys = accepted_api_keys
        self._frames = FrameDecoder(max_frame_bytes)
        self._max_buffered_bytes = 2 * (max_frame_bytes + 4) + max_read_bytes
        self._next_sequence = 0
        self._next_to_send = 0  # sequence of the oldest unanswered request
        self._ready: dict[int, list] = {}  # sequence -> encoded response parts ([] = none)
        self._in_flight = 0
        self._closed = False
        self.connection_state: dict[str, Any] = {}  # handed to every Request of this connection

    @property
    def in_flight_count(self) -> int:
        return self._in_flight

    @property
    def buffered_bytes(self) -> int:
        return self._frames.buffered_bytes

    @property
    def pending_request_bytes(self) -> int:
        """The announced size of the request being received (0 when none is half-way)."""
        return self._frames.pending_frame_bytes

    def limit_frame_bytes(self, max_frame_bytes: int) -> None:
        """Change the largest frame accepted from now on (at most the constructor's): a SASL
        connection accepts only small frames until it has authenticated."""
        assert 0 < max_frame_bytes <= self._max_buffered_bytes
        self._frames.max_frame_bytes = max_frame_bytes

    @property
    def reading_paused(self) -> bool:
        """True while max_in_flight requests are unanswered: do not read the socket."""
        return self._in_flight >= self.max_in_flight

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        self._frames.feed(data)
        # A driver that honours PAUSED/reading_paused buffers at most one partial frame plus
        # one read; anything more means it kept reading past back-pressure.
        assert self._frames.buffered_bytes <= self._max_buffered_bytes, "read while paused"

    def read_buffer(self) -> memoryview | None:
        """Where to read the rest of a large request straight into (then `received_into`),
        or None: read and `receive_data` (FrameDecoder.read_buffer). Ask after NEED_DATA."""
        return self._frames.read_buffer()

    def received_into(self, count: int) -> None:
        """`count` bytes were read into the view read_buffer() returned."""
        self._frames.filled(count)

    def next_request(self) -> Request | BadRequest | _Sentinel:
        """The next request, a BadRequest, NEED_DATA or PAUSED.

        Raises InvalidFrameError (a KafkaError) when the frame size is invalid: close.
        """
        if self._closed:
            return NEED_DATA
        if self._in_flight >= self.max_in_flight:
            return PAUSED
        frame = self._frames.next_frame()
        if frame is None:
            return NEED_DATA
        view = memoryview(frame)
        try:
            header, position = read_request_header(view)
        except InvalidRequestError as exc:
            return self._close(None, ErrorCode.INVALID_REQUEST, str(exc))
        api = APIS.get(header.api_key)
        if api is not None and self.accepted_api_keys is not None:
            if header.api_key not in self.accepted_api_keys and header.api_key != API_VERSIONS_KEY:
                api = None
        if api is None:
            return self._close(
                header, ErrorCode.INVALID_REQUEST, f"unknown api key {header.api_key}"
            )
        version = header.api_version
        if not api.is_implemented(version, self.legacy_versions):
            return self._unsupported(api, header, view, position)
        try:
            if api.request.is_flexible(version):
                position = skip_tagged_fields(view, position)
            body, _ = api.request.decode(view, version, position)
        except InvalidRequestError as exc:
            return self._close(header, ErrorCode.INVALID_REQUEST, str(exc))
        return self._hand_out(header, api, body)

    def next_sasl_token(self) -> SaslToken | _Sentinel:
        """The next frame as a raw SASL token (SaslHandshake v0), or NEED_DATA. Only between
        requests: the handshake was answered, nothing is in flight."""
        assert self._in_flight == 0, "raw SASL tokens follow an answered SaslHandshake v0"
        if self._closed:
            return NEED_DATA
        frame = self._frames.next_frame()
        return NEED_DATA if frame is None else SaslToken(bytes(frame))

    def send_response(self, request: Request, body: Any) -> bytes:
        """Queue the response to `request`; return the bytes now sendable (maybe b"")."""
        return b"".join(self.send_response_parts(request, body))

    def send_response_parts(self, request: Request, body: Any) -> list:
        """Like send_response, as a list of buffers for a vectored write (zero-copy records)."""
        parts = encode_response(request.api, request.api_version, request.correlation_id, body)
        return self._complete(request.sequence, parts)

    def no_response(self, request: Request) -> bytes:
        """Finish a request that gets no response (Produce with acks=0)."""
        return b"".join(self._complete(request.sequence, []))

    # --- internals ---

    def _hand_out(self, header: RequestHeader, api: Api, body: Any) -> Request:
        request = Request(header, api, body, self._next_sequence, self.connection_state)
        self._next_sequence += 1
        self._in_flight += 1
        return request

    def _complete(self, sequence: int, parts: list) -> list:
        assert sequence not in self._ready and self._next_to_send <= sequence < self._next_sequence
        self._ready[sequence] = parts
        self._in_flight -= 1
        releasable: list = []
        while self._next_to_send in self._ready:
            releasable.extend(self._ready.pop(self._next_to_send))
            self._next_to_send += 1
        return releasable

    def _close(
        self, header: RequestHeader | None, error_code: ErrorCode, reason: str
    ) -> BadRequest:
        self._closed = True
        return BadRequest(header, error_code, reason, close_connection=True)

    def _answer(self, header: RequestHeader, reason: str, parts: list) -> BadRequest:
        sequence = self._next_sequence
        self._next_sequence += 1
        self._in_flight += 1
        data = b"".join(self._complete(sequence, parts))
        return BadRequest(header, ErrorCode.UNSUPPORTED_VERSION, reason, False, data)

    def _unsupported(
        self, api: Api, header: RequestHeader, view: memoryview, position: int
    ) -> BadRequest:
        version = header.api_version
        low, high = api.answered(self.legacy_versions)
        reason = f"{api.name} v{version} is not supported (we answer v{low}-v{high})"
        if api.api_key == API_VERSIONS_KEY:
            body = api_versions_error_body(self.advertised_api_keys, self.legacy_versions)
            return self._answer(
                header, reason, encode_response(api, 0, header.correlation_id, body)
            )
        if not api.is_declared(version):
            return self._close(header, ErrorCode.UNSUPPORTED_VERSION, reason)
        try:
            if api.request.is_flexible(version):
                position = skip_tagged_fields(view, position)
            request_body, _ = api.request.decode(view, version, position)
        except InvalidRequestError as exc:
            return self._close(header, ErrorCode.INVALID_REQUEST, str(exc))
        if api.api_key == PRODUCE_KEY and request_body.acks == 0:
            # The client expects no response: an answer would desynchronise it, so close.
            return self._close(header, ErrorCode.UNSUPPORTED_VERSION, reason)
        body = error_response_body(api, version, request_body, ErrorCode.UNSUPPORTED_VERSION)
        return self._answer(
            header, reason, encode_response(api, version, header.correlation_id, body)
        )
