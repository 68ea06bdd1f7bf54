"""Consumer group APIs: JoinGroup (11), SyncGroup (14), Heartbeat (12), LeaveGroup (13),
OffsetCommit (8), OffsetFetch (9), ListGroups (16), DescribeGroups (15), DeleteGroups (42).

JoinGroup v6 is flexible, v7 answers the protocol type (protocol name nullable), v8 carries the
client's reason, v9 answers skip_assignment (KIP-814). SyncGroup v4 is flexible, v5 carries and
answers the protocol type and name (KIP-559). Heartbeat v4 is flexible. LeaveGroup v3 replaces
member_id by a members batch (KIP-345), v4 is flexible, v5 adds each member's reason. DescribeGroups
v5 and DeleteGroups v2 are flexible; DescribeGroups v6 answers a group it does not know with
GROUP_ID_NOT_FOUND and an error message (KIP-1043). OffsetCommit v8 is flexible and v9
carries a KIP-848 member epoch (same fields); OffsetFetch v8 batches groups, v9 adds the member
id and epoch. OffsetCommit v10 and OffsetFetch v10 name topics by topic_id instead of name, in
the request and the response (KIP-848). OffsetCommit v0-1 and OffsetFetch
v0 are declared but refused (see apis.py).

Declarations transcribed from Apache Kafka's JSON message definitions (field, type, versions,
nullableVersions, default); see schema.py for the encodings. Field names are Kafka's in snake_case.
"""

from __future__ import annotations

from log.protocol.schema import (  # noqa: F401
    ARRAY,
    BOOL,
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    STRUCT,
    UUID,
    F,
    message,
)

# fmt: off
JOIN_GROUP_REQUEST = message(
    "JoinGroupRequest",
    api_key=11,
    versions="0-9",
    flexible_versions="6+",
    fields=(
        F("group_id", STRING),
        F("session_timeout_ms", INT32),
        F("rebalance_timeout_ms", INT32, "1+", default=-1),
        F("member_id", STRING),
        F("group_instance_id", STRING, "5+", nullable="5+", default=None),
        F("protocol_type", STRING),
        F("protocols", ARRAY(STRUCT("JoinGroupRequestProtocol",
                F("name", STRING),
                F("metadata", BYTES),
            ))),
        F("reason", STRING, "8+", nullable="8+", default=None),
    ),
)

JOIN_GROUP_RESPONSE = message(
    "JoinGroupResponse",
    api_key=11,
    versions="0-9",
    flexible_versions="6+",
    fields=(
        F("throttle_time_ms", INT32, "2+"),
        F("error_code", INT16),
        F("generation_id", INT32, default=-1),
        F("protocol_type", STRING, "7+", nullable="7+", default=None),
        F("protocol_name", STRING, nullable="7+"),
        F("leader", STRING),
        F("skip_assignment", BOOL, "9+", default=False),
        F("member_id", STRING),
        F("members", ARRAY(STRUCT("JoinGroupResponseMember",
                F("member_id", STRING),
                F("group_instance_id", STRING, "5+", nullable="5+", default=None),
                F("metadata", BYTES),
            ))),
    ),
)

SYNC_GROUP_REQUEST = message(
    "SyncGroupRequest",
    api_key=14,
    versions="0-5",
    flexible_versions="4+",
    fields=(
        F("group_id", STRING),
        F("generation_id", INT32),
        F("member_id", STRING),
        F("group_instance_id", STRING, "3+", nullable="3+", default=None),
        F("protocol_type", STRING, "5+", nullable="5+", default=None),
        F("protocol_name", STRING, "5+", nullable="5+", default=None),
        F("assignments", ARRAY(STRUCT("SyncGroupRequestAssignment",
                F("member_id", STRING),
                F("assignment", BYTES),
            ))),
    ),
)

SYNC_GROUP_RESPONSE = message(
    "SyncGroupResponse",
    api_key=14,
    versions="0-5",
    flexible_versions="4+",
    fields=(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
        F("protocol_type", STRING, "5+", nullable="5+", default=None),
        F("protocol_name", STRING, "5+", nullable="5+", default=None),
        F("assignment", BYTES),
    ),
)

HEARTBEAT_REQUEST = message(
    "HeartbeatRequest",
    api_key=12,
    versions="0-4",
    flexible_versions="4+",
    fields=(
        F("group_id", STRING),
        F("generation_id", INT32),
        F("member_id", STRING),
        F("group_instance_id", STRING, "3+", nullable="3+", default=None),
    ),
)

HEARTBEAT_RESPONSE = message(
    "HeartbeatResponse",
    api_key=12,
    versions="0-4",
    flexible_versions="4+",
    fields=(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
    ),
)

LEAVE_GROUP_REQUEST = message(
    "LeaveGroupRequest",
    api_key=13,
    versions="0-5",
    flexible_versions="4+",
    fields=(
        F("group_id", STRING),
        F("member_id", STRING, "0-2"),
        F("members", ARRAY(STRUCT("MemberIdentity",
                F("member_id", STRING),
                F("group_instance_id", STRING, nullable="3+", default=None),
                F("reason", STRING, "5+", nullable="5+", default=None),
            )), "3+"),
    ),
)

LEAVE_GROUP_RESPONSE = message(
    "LeaveGroupResponse",
    api_key=13,
    versions="0-5",
    flexible_versions="4+",
    fields=(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
        F("members", ARRAY(STRUCT("MemberResponse",
                F("member_id", STRING),
                F("group_instance_id", STRING, nullable="3+"),
                F("error_code", INT16),
            )), "3+"),
    ),
)

OFFSET_COMMIT_REQUEST = message(
    "OffsetCommitRequest",
    api_key=8,
    versions="0-10",
    flexible_versions="8+",
    fields=(
        F("group_id", STRING),
        F("generation_id_or_member_epoch", INT32, "1+", default=-1),
        F("member_id", STRING, "1+"),
        F("group_instance_id", STRING, "7+", nullable="7+", default=None),
        F("retention_time_ms", INT64, "2-4", default=-1),
        F("topics", ARRAY(STRUCT("OffsetCommitRequestTopic",
                F("name", STRING, "0-9"),
                F("topic_id", UUID, "10+"),
                F("partitions", ARRAY(STRUCT("OffsetCommitRequestPartition",
                        F("partition_index", INT32),
                        F("committed_offset", INT64),
                        F("committed_leader_epoch", INT32, "6+", default=-1),
                        F("commit_timestamp", INT64, "1-1", default=-1),
                        F("committed_metadata", STRING, nullable="0+"),
                    ))),
            ))),
    ),
)

OFFSET_COMMIT_RESPONSE = message(
    "OffsetCommitResponse",
    api_key=8,
    versions="0-10",
    flexible_versions="8+",
    fields=(
        F("throttle_time_ms", INT32, "3+"),
        F("topics", ARRAY(STRUCT("OffsetCommitResponseTopic",
                F("name", STRING, "0-9"),
                F("topic_id", UUID, "10+"),
                F("partitions", ARRAY(STRUCT("OffsetCommitResponsePartition",
                        F("partition_index", INT32),
                        F("error_code", INT16),
                    ))),
            ))),
    ),
)

OFFSET_FETCH_REQUEST = message(
    "OffsetFetchRequest",
    api_key=9,
    versions="0-10",
    flexible_versions="6+",
    fields=(
        F("group_id", STRING, "0-7"),
        F("topics", ARRAY(STRUCT("OffsetFetchRequestTopic",
                F("name", STRING),
                F("partition_indexes", ARRAY(INT32)),
            )), "0-7", nullable="2-7"),
        # v8 batches groups; v9 adds the KIP-848 member id and epoch
        F("groups", ARRAY(STRUCT("OffsetFetchRequestGroup",
                F("group_id", STRING),
                F("member_id", STRING, "9+", nullable="9+", default=None),
                F("member_epoch", INT32, "9+", default=-1),
                F("topics", ARRAY(STRUCT("OffsetFetchRequestTopics",
                        F("name", STRING, "8-9"),
                        F("topic_id", UUID, "10+"),
                        F("partition_indexes", ARRAY(INT32)),
                    )), nullable="8+"),
            )), "8+"),
        F("require_stable", BOOL, "7+", default=False),  # KIP-447
    ),
)

OFFSET_FETCH_RESPONSE = message(
    "OffsetFetchResponse",
    api_key=9,
    versions="0-10",
    flexible_versions="6+",
    fields=(
        F("throttle_time_ms", INT32, "3+"),
        F("topics", ARRAY(STRUCT("OffsetFetchResponseTopic",
                F("name", STRING),
                F("partitions", ARRAY(STRUCT("OffsetFetchResponsePartition",
                        F("partition_index", INT32),
                        F("committed_offset", INT64),
                        F("committed_leader_epoch", INT32, "5+", default=-1),
                        F("metadata", STRING, nullable="0+"),
                        F("error_code", INT16),
                    ))),
            )), "0-7"),
        F("error_code", INT16, "2-7"),
        F("groups", ARRAY(STRUCT("OffsetFetchResponseGroup",
                F("group_id", STRING),
                F("topics", ARRAY(STRUCT("OffsetFetchResponseTopics",
                        F("name", STRING, "8-9"),
                        F("topic_id", UUID, "10+"),
                        F("partitions", ARRAY(STRUCT("OffsetFetchResponsePartitions",
                                F("partition_index", INT32),
                                F("committed_offset", INT64),
                                F("committed_leader_epoch", INT32, default=-1),
                                F("metadata", STRING, nullable="0+"),
                                F("error_code", INT16),
                            ))),
                    ))),
                F("error_code", INT16),
            )), "8+"),
    ),
)

LIST_GROUPS_REQUEST = message(
    "ListGroupsRequest",
    api_key=16,
    versions="0-5",
    flexible_versions="3+",
    fields=(
        F("states_filter", ARRAY(STRING), "4+"),  # KIP-518
        F("types_filter", ARRAY(STRING), "5+"),  # KIP-848
    ),
)

LIST_GROUPS_RESPONSE = message(
    "ListGroupsResponse",
    api_key=16,
    versions="0-5",
    flexible_versions="3+",
    fields=(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
        F("groups", ARRAY(STRUCT("ListedGroup",
                F("group_id", STRING),
                F("protocol_type", STRING),
                F("group_state", STRING, "4+"),
                F("group_type", STRING, "5+"),
            ))),
    ),
)

DESCRIBE_GROUPS_REQUEST = message(
    "DescribeGroupsRequest",
    api_key=15,
    versions="0-6",
    flexible_versions="5+",
    fields=(
        F("groups", ARRAY(STRING)),
        F("include_authorized_operations", BOOL, "3+"),
    ),
)

DESCRIBE_GROUPS_RESPONSE = message(
    "DescribeGroupsResponse",
    api_key=15,
    versions="0-6",
    flexible_versions="5+",
    fields=(
        F("throttle_time_ms", INT32, "1+"),
        F("groups", ARRAY(STRUCT("DescribedGroup",
                F("error_code", INT16),
                F("error_message", STRING, "6+", nullable="6+", default=None),
                F("group_id", STRING),
                F("group_state", STRING),
                F("protocol_type", STRING),
                F("protocol_data", STRING),
                F("members", ARRAY(STRUCT("DescribedGroupMember",
                        F("member_id", STRING),
                        F("group_instance_id", STRING, "4+", nullable="4+", default=None),
                        F("client_id", STRING),
                        F("client_host", STRING),
                        F("member_metadata", BYTES),
                        F("member_assignment", BYTES),
                    ))),
                F("authorized_operations", INT32, "3+", default=-2147483648),
            ))),
    ),
)

DELETE_GROUPS_REQUEST = message(
    "DeleteGroupsRequest",
    api_key=42,
    versions="0-2",
    flexible_versions="2+",
    fields=(
        F("groups_names", ARRAY(STRING)),
    ),
)

DELETE_GROUPS_RESPONSE = message(
    "DeleteGroupsResponse",
    api_key=42,
    versions="0-2",
    flexible_versions="2+",
    fields=(
        F("throttle_time_ms", INT32),
        F("results", ARRAY(STRUCT("DeletableGroupResult",
                F("group_id", STRING),
                F("error_code", INT16),
            ))),
    ),
)
# fmt: on
