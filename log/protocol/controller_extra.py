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
  alter_partition, controlled_shutdown) with the request dataclass as JSON (`payload`,
  quorum.controller_codec); the response dataclass comes back the same way. Non-leaders
  answer NOT_CONTROLLER with `leader_id` (the active controller's node id, -1 unknown).

      request:  operation string | payload bytes
      response: throttle_time_ms int32 | error_code int16 | error_message string (nullable)
                | leader_id int32 | payload bytes

Both are flexible v0. Importing this module registers them in `log.protocol.apis.APIS`, so
`ServerConnection` and `ClientCodec` decode them (the service and the client import it).
"""

from __future__ import annotations

from log.protocol.apis import APIS, Api
from log.protocol.schema import ARRAY, BYTES, INT16, INT32, INT64, STRING, STRUCT, F, message

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

for _api in (
    Api(METADATA_FETCH_KEY, "MetadataFetch", METADATA_FETCH_REQUEST, METADATA_FETCH_RESPONSE,
        (0, 0), (0, 0)),
    Api(CONTROLLER_FORWARD_KEY, "ControllerForward", CONTROLLER_FORWARD_REQUEST,
        CONTROLLER_FORWARD_RESPONSE, (0, 0), (0, 0)),
):  # fmt: skip
    APIS.setdefault(_api.api_key, _api)

CONTROLLER_LISTENER_APIS = frozenset({62, 63, 67, METADATA_FETCH_KEY, CONTROLLER_FORWARD_KEY})
