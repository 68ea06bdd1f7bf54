"""quorumlog's own broker-to-controller APIs: MetadataFetch and ControllerForward.

Never advertised to clients; api keys in a private range (Kafka's own keys stay below 100).

* MetadataFetch (api key 1000): a broker long-polls committed metadata batches after
  `after_offset` from ANY controller (each serves its own committed state). The answer carries
  up to `max_batches` `(offset, payload)` batches, or, when the broker is behind the retained
  tail, the newest checkpoint (`checkpoint_offset`, `checkpoint`: MetadataStateMachine bytes)
  and no batches. `committed_offset` is the controller's newest applied offset.

      request:  broker_id int32 | after_offset int64 | max_wait_ms int32 | max_batches int32
      response: throttle_time_ms int32 | error_code int16 | leader_id int32
                | committed_offset int64 | checkpoint_offset int64 (-1: none)
                | checkpoint bytes (nullable) | batches [offset int64, payload bytes]

* ControllerForward (api key 1001): one sans-IO controller call of quorum/controller.py
  (`operation` = create_topics, delete_topics, create_partitions, alter_topic_configs,
  alter_partitions, controlled_shutdown) with the request dataclass as JSON (`payload`,
  quorum.controller_codec); the response dataclass comes back the same way. Non-leaders
  answer NOT_CONTROLLER with `leader_id` (the active controller's node id, -1 unknown).

      request:  operation string | payload bytes
      response: throttle_time_ms int32 | error_code int16 | error_message string (nullable)
                | leader_id int32 | payload bytes

Both are flexible v0. They are NOT in `log.protocol.apis.APIS` (the client-facing table):
the CONTROLLER listener uses `CONTROLLER_LISTENER_APIS` and the frame helpers below (Kafka's
framing: size, request header v2 / response header v1, body). Requests are answered one at a
time per connection, in order.
"""

from __future__ import annotations

from typing import Any

from log.common.errors import InvalidRequestError
from log.protocol.apis import APIS, Api
from log.protocol.framing import (
    SIZE,
    RequestHeader,
    encode_request_header,
    encode_response_header,
    read_request_header,
    read_response_header,
)
from log.protocol.schema import (
    ARRAY,
    BYTES,
    INT16,
    INT32,
    INT64,
    STRING,
    STRUCT,
    F,
    message,
    skip_tagged_fields,
)

METADATA_FETCH_KEY = 1000
CONTROLLER_FORWARD_KEY = 1001
MAX_FETCH_BATCHES = 10_000  # a limit per MetadataFetch response
MAX_FETCH_WAIT_MS = 30_000

# fmt: off
METADATA_FETCH_REQUEST = message(
    "MetadataFetchRequest",
    api_key=METADATA_FETCH_KEY,
    versions="0-0",
    flexible_versions="0+",
    fields=(
        F("broker_id", INT32),
        F("after_offset", INT64, default=-1),
        F("max_wait_ms", INT32, default=500),
        F("max_batches", INT32, default=1000),
    ),
)

METADATA_FETCH_RESPONSE = message(
    "MetadataFetchResponse",
    api_key=METADATA_FETCH_KEY,
    versions="0-0",
    flexible_versions="0+",
    fields=(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("leader_id", INT32, default=-1),
        F("committed_offset", INT64, default=-1),
        F("checkpoint_offset", INT64, default=-1),
        F("checkpoint", BYTES, nullable="0+", default=None),
        F("batches", ARRAY(STRUCT("MetadataBatch",
                F("offset", INT64),
                F("payload", BYTES),
            ))),
    ),
)

CONTROLLER_FORWARD_REQUEST = message(
    "ControllerForwardRequest",
    api_key=CONTROLLER_FORWARD_KEY,
    versions="0-0",
    flexible_versions="0+",
    fields=(
        F("operation", STRING),
        F("payload", BYTES),
    ),
)

CONTROLLER_FORWARD_RESPONSE = message(
    "ControllerForwardResponse",
    api_key=CONTROLLER_FORWARD_KEY,
    versions="0-0",
    flexible_versions="0+",
    fields=(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("leader_id", INT32, default=-1),
        F("payload", BYTES),
    ),
)
# fmt: on

# The CONTROLLER listener's API table: Kafka's broker-to-controller APIs plus ours. Kept out
# of `apis.APIS` (the client-facing table): these two are ours, not Kafka's.
CONTROLLER_LISTENER_APIS: dict[int, Api] = {
    **{key: APIS[key] for key in (62, 63, 67)},
    METADATA_FETCH_KEY: Api(METADATA_FETCH_KEY, "MetadataFetch", METADATA_FETCH_REQUEST,
                            METADATA_FETCH_RESPONSE, (0, 0), (0, 0)),
    CONTROLLER_FORWARD_KEY: Api(CONTROLLER_FORWARD_KEY, "ControllerForward",
                                CONTROLLER_FORWARD_REQUEST, CONTROLLER_FORWARD_RESPONSE,
                                (0, 0), (0, 0)),
}  # fmt: skip
CONTROLLER_API_VERSION = 0  # every API above is v0 (flexible), except:
# BrokerRegistration v3 carries the previous broker epoch of a clean shutdown (KIP-966).
CONTROLLER_API_VERSIONS = {62: 3}


def controller_api_version(api_key: int) -> int:
    return CONTROLLER_API_VERSIONS.get(api_key, CONTROLLER_API_VERSION)


def encode_request_frame(
    api_key: int, correlation_id: int, client_id: str | None, body: Any
) -> bytes:
    """A whole v0 request frame (size, header v2, body) for a CONTROLLER listener API."""
    api = CONTROLLER_LISTENER_APIS[api_key]
    version = controller_api_version(api_key)
    header = RequestHeader(api_key, version, correlation_id, client_id)
    parts: list = [b"", encode_request_header(header, True)]
    api.request.encode_parts(body, version, parts)
    parts[0] = SIZE.pack(sum(len(part) for part in parts))
    return b"".join(parts)


def decode_request_frame(frame: bytes | bytearray) -> tuple[RequestHeader, Api, Any]:
    """Parse one request frame (no size prefix); InvalidRequestError for anything we do not
    serve (unknown key or version, bad body): the caller closes the connection."""
    view = memoryview(frame)
    header, position = read_request_header(view)
    api = CONTROLLER_LISTENER_APIS.get(header.api_key)
    if api is None or header.api_version != controller_api_version(header.api_key):
        raise InvalidRequestError(f"api {header.api_key} v{header.api_version} not served here")
    position = skip_tagged_fields(view, position)
    body, _ = api.request.decode(view, header.api_version, position)
    return header, api, body


def encode_response_frame(api: Api, correlation_id: int, body: Any) -> bytes:
    """A whole v0 response frame (size, header v1, body)."""
    parts: list = [b"", encode_response_header(correlation_id, 1)]
    api.response.encode_parts(body, controller_api_version(api.api_key), parts)
    parts[0] = SIZE.pack(sum(len(part) for part in parts))
    return b"".join(parts)


def decode_response_frame(frame: bytes | bytearray, api_key: int) -> tuple[int, Any]:
    """(correlation_id, body) of one response frame (no size prefix)."""
    view = memoryview(frame)
    correlation_id, position = read_response_header(view, 1)
    body, _ = CONTROLLER_LISTENER_APIS[api_key].response.decode(
        view, controller_api_version(api_key), position
    )
    return correlation_id, body
