"""KIP-848 consumer group APIs (flexible only): ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69).

Declarations transcribed from Apache Kafka's JSON message definitions (field, type, versions,
nullableVersions, default); see schema.py for the encodings. Field names are Kafka's in
snake_case. ConsumerGroupHeartbeat v1 (KIP-1082) has the client make up its member id and adds
subscribed_topic_regex. ConsumerGroupDescribe v1 (KIP-1099, Kafka 4.0) adds each member's
member_type (-1 unknown, 0 classic, 1 consumer).
"""

from __future__ import annotations

from log.protocol.schema import ARRAY, BOOL, INT8, INT16, INT32, STRING, STRUCT, UUID, F, message

# fmt: off
CONSUMER_GROUP_HEARTBEAT_REQUEST = message(
    "ConsumerGroupHeartbeatRequest",
    api_key=68,
    versions="0-1",
    flexible_versions="0+",
    fields=(
        F("group_id", STRING),
        F("member_id", STRING),
        F("member_epoch", INT32),
        F("instance_id", STRING, nullable="0+", default=None),
        F("rack_id", STRING, nullable="0+", default=None),
        F("rebalance_timeout_ms", INT32, default=-1),
        F("subscribed_topic_names", ARRAY(STRING), nullable="0+", default=None),
        F("subscribed_topic_regex", STRING, "1+", nullable="1+", default=None),
        F("server_assignor", STRING, nullable="0+", default=None),
        F("topic_partitions", ARRAY(STRUCT("TopicPartitions",
                F("topic_id", UUID),
                F("partitions", ARRAY(INT32)),
            )), nullable="0+", default=None),
    ),
)

CONSUMER_GROUP_HEARTBEAT_RESPONSE = message(
    "ConsumerGroupHeartbeatResponse",
    api_key=68,
    versions="0-1",
    flexible_versions="0+",
    fields=(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("member_id", STRING, nullable="0+", default=None),
        F("member_epoch", INT32),
        F("heartbeat_interval_ms", INT32),
        F("assignment", STRUCT("Assignment",
                F("topic_partitions", ARRAY(STRUCT("TopicPartitions",
                        F("topic_id", UUID),
                        F("partitions", ARRAY(INT32)),
                    ))),
            ), nullable="0+", default=None),
    ),
)

CONSUMER_GROUP_DESCRIBE_REQUEST = message(
    "ConsumerGroupDescribeRequest",
    api_key=69,
    versions="0-1",
    flexible_versions="0+",
    fields=(
        F("group_ids", ARRAY(STRING)),
        F("include_authorized_operations", BOOL),
    ),
)

_ASSIGNMENT = STRUCT("Assignment",
    F("topic_partitions", ARRAY(STRUCT("TopicPartitions",
            F("topic_id", UUID),
            F("topic_name", STRING),
            F("partitions", ARRAY(INT32)),
        ))),
)

CONSUMER_GROUP_DESCRIBE_RESPONSE = message(
    "ConsumerGroupDescribeResponse",
    api_key=69,
    versions="0-1",
    flexible_versions="0+",
    fields=(
        F("throttle_time_ms", INT32),
        F("groups", ARRAY(STRUCT("DescribedGroup",
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+", default=None),
                F("group_id", STRING),
                F("group_state", STRING),
                F("group_epoch", INT32),
                F("assignment_epoch", INT32),
                F("assignor_name", STRING),
                F("members", ARRAY(STRUCT("Member",
                        F("member_id", STRING),
                        F("instance_id", STRING, nullable="0+", default=None),
                        F("rack_id", STRING, nullable="0+", default=None),
                        F("member_epoch", INT32),
                        F("client_id", STRING),
                        F("client_host", STRING),
                        F("subscribed_topic_names", ARRAY(STRING)),
                        F("subscribed_topic_regex", STRING, nullable="0+", default=None),
                        F("assignment", _ASSIGNMENT),
                        F("target_assignment", _ASSIGNMENT),
                        F("member_type", INT8, "1+", default=-1),
                    ))),
                F("authorized_operations", INT32, default=-2147483648),
            ))),
    ),
)
# fmt: on
