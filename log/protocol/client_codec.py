"""The client side of one Kafka connection, sans-IO: requests to bytes, bytes to responses.

For our own producer, tools and tests. It remembers which API and version each outstanding
correlation id was sent with, so responses decode without the caller saying what they are,
and it checks that responses come back in request order (Kafka guarantees it).

    codec = ClientCodec(client_id="quorumlog-producer")
    data = codec.encode_request(PRODUCE_KEY, 8, body)          # framed; send it
    for response in codec.receive_data(received):              # ClientResponse events
        ...
    versions = choose_versions(api_versions_response.body.api_keys)  # {api_key: version}

A Produce request with acks=0 expects no response (`expect_response=False` is inferred).
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

from log.common.errors import InvalidRequestError, UnsupportedApiError
from log.protocol.apis import API_VERSIONS_KEY, APIS, Api
from log.protocol.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    SIZE,
    FrameDecoder,
    RequestHeader,
    encode_request_header,
    read_response_header,
    response_header_version,
)
from log.records.builder import BatchParts

PRODUCE_KEY = 0
MAX_CORRELATION_ID = 0x7FFFFFFF


@dataclasses.dataclass(frozen=True, slots=True)
class ClientResponse:
    correlation_id: int
    api_key: int
    api_version: int
    body: Any


def encode_request(header: RequestHeader, body: Any) -> bytes:
    """A whole request frame for `header` and `body`."""
    return b"".join(encode_request_parts(header, body))


def encode_request_parts(header: RequestHeader, body: Any) -> list:
    """A whole request frame as a list of buffers, in order: record batches given as
    BatchParts (a producer's batch whose records were encoded elsewhere) stay as their
    pieces, for a vectored send without a joining copy."""
    api = _api(header.api_key)
    flexible = api.request.is_flexible(header.api_version)
    parts: list = [b"", encode_request_header(header, flexible)]
    api.request.encode_parts(body, header.api_version, parts)
    parts[0] = SIZE.pack(sum(len(part) for part in parts))
    if any(type(part) is BatchParts for part in parts):
        parts = [
            piece
            for part in parts
            for piece in (part.parts if type(part) is BatchParts else (part,))
        ]
    return parts


def decode_response(
    frame: bytes | bytearray | memoryview, api_key: int, api_version: int
) -> ClientResponse:
    """Decode one response frame (without its size prefix).

    An ApiVersions error body (KIP-511) is always v0 whatever version was asked.
    """
    api = _api(api_key)
    view = memoryview(frame)
    header_version = response_header_version(api_key, api.response.is_flexible(api_version))
    correlation_id, position = read_response_header(view, header_version)
    if api_key == API_VERSIONS_KEY and not api.is_declared(api_version):
        api_version = 0
    elif (
        api_key == API_VERSIONS_KEY
        and len(view) - position >= 2
        and view[position : position + 2].tobytes() != b"\x00\x00"
    ):
        api_version = 0  # an error answer to a version the broker lacks: v0 layout
    body, _ = api.response.decode(view, api_version, position)
    return ClientResponse(correlation_id, api_key, api_version, body)


# The highest version a client sends where later ones belong to brokers: AddPartitionsToTxn
# v4+ is the batched, verify-only request partition leaders send (KIP-890 part 1). And our
# producer is a transaction version 1 client, as Kafka's is on a cluster without
# transaction.version 2: Produce v12, EndTxn v5 and TxnOffsetCommit v5 ask for TV2's implicit
# adds and epoch bump per transaction, which its transactions do not follow. Our clients name
# topics by name: OffsetCommit v10 (and Produce v13) name them by id; and `quorumlog groups`
# reads a KIP-848 group's Dead answer of DescribeGroups v5, which v6 turns into an error.
CLIENT_MAX_VERSIONS = {24: 3, 0: 11, 26: 4, 28: 4, 8: 9, 15: 5}


def choose_versions(broker_api_keys: list[Any]) -> dict[int, int]:
    """Per API key, the highest version both we (as a client) and the broker speak.

    `broker_api_keys` is an ApiVersions response's `api_keys`; APIs with no common version
    are left out (the caller raises UnsupportedVersionError if it needs one of them).
    """
    chosen = {}
    for entry in broker_api_keys:
        api = APIS.get(entry.api_key)
        if api is None:
            continue
        top = min(api.implemented[1], CLIENT_MAX_VERSIONS.get(entry.api_key, api.implemented[1]))
        version = min(top, entry.max_version)
        if version >= max(api.implemented[0], entry.min_version):
            chosen[entry.api_key] = version
    return chosen


def _api(api_key: int) -> Api:
    api = APIS.get(api_key)
    if api is None:
        raise UnsupportedApiError(f"unknown api key {api_key}")
    return api


class ClientCodec:
    def __init__(
        self,
        client_id: str | None = "quorumlog",
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_in_flight: int = 1024,
    ) -> None:
        self.client_id = client_id
        self.max_in_flight = max_in_flight
        self._frames = FrameDecoder(max_frame_bytes)
        self._next_correlation_id = 0
        self._pending: collections.deque[tuple[int, int, int]] = collections.deque()

    @property
    def in_flight_count(self) -> int:
        return len(self._pending)

    def encode_request(
        self, api_key: int, api_version: int, body: Any, expect_response: bool | None = None
    ) -> bytes:
        """Frame a request with the next correlation id; remember it if a response is due."""
        return b"".join(self.encode_request_parts(api_key, api_version, body, expect_response))

    def encode_request_parts(
        self, api_key: int, api_version: int, body: Any, expect_response: bool | None = None
    ) -> list:
        """encode_request as a list of buffers (module encode_request_parts), for a vectored
        send."""
        if expect_response is None:
            expect_response = not (api_key == PRODUCE_KEY and body.acks == 0)
        if expect_response and len(self._pending) >= self.max_in_flight:
            raise InvalidRequestError(f"more than {self.max_in_flight} requests in flight")
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & MAX_CORRELATION_ID
        header = RequestHeader(api_key, api_version, correlation_id, self.client_id)
        data = encode_request_parts(header, body)
        if expect_response:
            self._pending.append((correlation_id, api_key, api_version))
        return data

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[ClientResponse]:
        """Feed received bytes; return the responses now complete, in order.

        Raises InvalidRequestError (or InvalidFrameError) on an unexpected or malformed
        response: the connection is unusable then.
        """
        responses = []
        for frame in self._frames.frames(data):
            if not self._pending:
                raise InvalidRequestError("a response arrived with no request outstanding")
            correlation_id, api_key, api_version = self._pending.popleft()
            response = decode_response(frame, api_key, api_version)
            if response.correlation_id != correlation_id:
                raise InvalidRequestError(
                    f"response correlation id {response.correlation_id}, expected {correlation_id}"
                )
            responses.append(response)
        return responses
