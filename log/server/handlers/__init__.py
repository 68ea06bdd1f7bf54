"""Request handlers, one module per API family: `async def handle_x(ctx, request) -> body`.

HANDLERS maps api_key -> handler; ADVERTISED_API_KEYS is what ApiVersions reports: everything
handled. FindCoordinator is answered COORDINATOR_NOT_AVAILABLE until consumer groups exist, but
it must be advertised: librdkafka before 2.11.1 enables LZ4 only when FindCoordinator v0 is in
range and otherwise silently produces uncompressed batches (tests/broker/test_old_librdkafka.py).
librdkafka's balanced-consumer feature still stays off, as it also needs the group APIs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from log.server.handlers.admin import (
    handle_alter_configs,
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from log.server.handlers.fetch import handle_fetch
from log.server.handlers.metadata import (
    handle_api_versions,
    handle_describe_cluster,
    handle_find_coordinator,
    handle_metadata,
)
from log.server.handlers.offsets import handle_list_offsets, handle_offset_for_leader_epoch
from log.server.handlers.produce import handle_produce
from log.server.handlers.producer_id import handle_init_producer_id

Handler = Callable[[Any, Any], Awaitable[Any]]

HANDLERS: dict[int, Handler] = {
    0: handle_produce,
    1: handle_fetch,
    2: handle_list_offsets,
    3: handle_metadata,
    10: handle_find_coordinator,
    18: handle_api_versions,
    19: handle_create_topics,
    20: handle_delete_topics,
    22: handle_init_producer_id,
    23: handle_offset_for_leader_epoch,
    32: handle_describe_configs,
    33: handle_alter_configs,
    37: handle_create_partitions,
    44: handle_incremental_alter_configs,
    60: handle_describe_cluster,
}
HANDLED_API_KEYS = frozenset(HANDLERS)
ADVERTISED_API_KEYS = HANDLED_API_KEYS
