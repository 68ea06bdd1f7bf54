"""Request handlers, one module per API family: `async def handle_x(ctx, request) -> body`.

HANDLERS maps api_key -> handler; ADVERTISED_API_KEYS is what ApiVersions reports: everything
handled (FindCoordinator, the group and transaction APIs included), except the APIs of a family
(log/protocol/apis.py) not handled whole (a client must not see half of one) and the
inter-broker WriteTxnMarkers (served to the brokers' transaction coordinators, which send it at
v1 without asking ApiVersions). FindCoordinator must be advertised in any
case: librdkafka before 2.11.1 enables LZ4 only when FindCoordinator v0 is in range and otherwise
silently produces uncompressed batches (tests/broker/test_old_librdkafka.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from log.protocol.apis import (
    ACL_APIS,
    ADMIN_EXTRA_APIS,
    CONSUMER_GROUP_APIS,
    CORE_APIS,
    GROUP_APIS,
    LOG_DIR_APIS,
    REPLICATION_APIS,
    TRANSACTION_APIS,
)
from log.server.handlers.acls import handle_create_acls, handle_delete_acls, handle_describe_acls
from log.server.handlers.admin import (
    handle_alter_configs,
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from log.server.handlers.consumer_groups import (
    handle_consumer_group_describe,
    handle_consumer_group_heartbeat,
)
from log.server.handlers.delete_records import handle_delete_records
from log.server.handlers.describe_producers import handle_describe_producers
from log.server.handlers.describe_topic_partitions import handle_describe_topic_partitions
from log.server.handlers.elect_leaders import handle_elect_leaders
from log.server.handlers.features import handle_update_features
from log.server.handlers.fetch import handle_fetch
from log.server.handlers.groups import (
    handle_delete_groups,
    handle_describe_groups,
    handle_find_coordinator,
    handle_heartbeat,
    handle_join_group,
    handle_leave_group,
    handle_list_groups,
    handle_offset_commit,
    handle_offset_delete,
    handle_offset_fetch,
    handle_sync_group,
)
from log.server.handlers.log_dirs import handle_alter_replica_log_dirs, handle_describe_log_dirs
from log.server.handlers.metadata import (
    handle_api_versions,
    handle_describe_cluster,
    handle_metadata,
)
from log.server.handlers.metadata_quorum import handle_describe_quorum
from log.server.handlers.offsets import handle_list_offsets, handle_offset_for_leader_epoch
from log.server.handlers.produce import handle_produce
from log.server.handlers.producer_id import handle_init_producer_id
from log.server.handlers.reassignments import (
    handle_alter_partition_reassignments,
    handle_list_partition_reassignments,
)
from log.server.handlers.sasl import handle_sasl_authenticate, handle_sasl_handshake
from log.server.handlers.scram_credentials import (
    handle_alter_user_scram_credentials,
    handle_describe_user_scram_credentials,
)
from log.server.handlers.transactions import (
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
    handle_describe_transactions,
    handle_end_txn,
    handle_list_transactions,
    handle_txn_offset_commit,
)
from log.server.handlers.txn_markers import handle_write_txn_markers

Handler = Callable[[Any, Any], Awaitable[Any]]

HANDLERS: dict[int, Handler] = {
    0: handle_produce,
    1: handle_fetch,
    2: handle_list_offsets,
    3: handle_metadata,
    8: handle_offset_commit,
    9: handle_offset_fetch,
    10: handle_find_coordinator,
    11: handle_join_group,
    12: handle_heartbeat,
    13: handle_leave_group,
    14: handle_sync_group,
    15: handle_describe_groups,
    16: handle_list_groups,
    17: handle_sasl_handshake,
    18: handle_api_versions,
    19: handle_create_topics,
    20: handle_delete_topics,
    21: handle_delete_records,
    22: handle_init_producer_id,
    23: handle_offset_for_leader_epoch,
    24: handle_add_partitions_to_txn,
    25: handle_add_offsets_to_txn,
    26: handle_end_txn,
    27: handle_write_txn_markers,
    28: handle_txn_offset_commit,
    29: handle_describe_acls,
    30: handle_create_acls,
    31: handle_delete_acls,
    32: handle_describe_configs,
    33: handle_alter_configs,
    34: handle_alter_replica_log_dirs,
    35: handle_describe_log_dirs,
    36: handle_sasl_authenticate,
    37: handle_create_partitions,
    44: handle_incremental_alter_configs,
    45: handle_alter_partition_reassignments,
    46: handle_list_partition_reassignments,
    47: handle_offset_delete,
    50: handle_describe_user_scram_credentials,
    51: handle_alter_user_scram_credentials,
    55: handle_describe_quorum,
    42: handle_delete_groups,
    43: handle_elect_leaders,
    60: handle_describe_cluster,
    61: handle_describe_producers,
    65: handle_describe_transactions,
    66: handle_list_transactions,
    68: handle_consumer_group_heartbeat,
    69: handle_consumer_group_describe,
    75: handle_describe_topic_partitions,
    57: handle_update_features,
}
HANDLED_API_KEYS = frozenset(HANDLERS)
_FAMILIES = (CORE_APIS, GROUP_APIS, CONSUMER_GROUP_APIS, REPLICATION_APIS, TRANSACTION_APIS, ADMIN_EXTRA_APIS,
             LOG_DIR_APIS, ACL_APIS)  # fmt: skip
PARTLY_HANDLED_API_KEYS: frozenset[int] = frozenset().union(
    *(family for family in _FAMILIES if not family <= HANDLED_API_KEYS)
)
INTER_BROKER_API_KEYS = frozenset({27})  # WriteTxnMarkers: never offered to clients
ADVERTISED_API_KEYS = HANDLED_API_KEYS - PARTLY_HANDLED_API_KEYS - INTER_BROKER_API_KEYS
