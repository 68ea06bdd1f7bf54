"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), v0-3 (v2+ flexible): ACL bindings in
the metadata log (quorum/acls.py decides creations and deletions; log/common/acl.py holds the
codes). v0 has no pattern type: it means LITERAL (the default 3).

Declarations transcribed from Apache Kafka's JSON message definitions (field, type, versions,
nullableVersions, default); see schema.py for the encodings. Field names are Kafka's in snake_case.
"""

from __future__ import annotations

from log.protocol.schema import ARRAY, INT8, INT16, INT32, STRING, STRUCT, F, message

LITERAL = 3  # PatternType.LITERAL: what v0 means

# fmt: off
DESCRIBE_ACLS_REQUEST = message(
    "DescribeAclsRequest",
    api_key=29,
    versions="0-3",
    flexible_versions="2+",
    fields=(
        F("resource_type_filter", INT8),
        F("resource_name_filter", STRING, nullable="0+"),
        F("pattern_type_filter", INT8, "1+", default=LITERAL),
        F("principal_filter", STRING, nullable="0+"),
        F("host_filter", STRING, nullable="0+"),
        F("operation", INT8),
        F("permission_type", INT8),
    ),
)

DESCRIBE_ACLS_RESPONSE = message(
    "DescribeAclsResponse",
    api_key=29,
    versions="0-3",
    flexible_versions="2+",
    fields=(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+"),
        F("resources", ARRAY(STRUCT("DescribeAclsResource",
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("pattern_type", INT8, "1+", default=LITERAL),
            F("acls", ARRAY(STRUCT("AclDescription",
                F("principal", STRING),
                F("host", STRING),
                F("operation", INT8),
                F("permission_type", INT8),
            ))),
        ))),
    ),
)

CREATE_ACLS_REQUEST = message(
    "CreateAclsRequest",
    api_key=30,
    versions="0-3",
    flexible_versions="2+",
    fields=(
        F("creations", ARRAY(STRUCT("AclCreation",
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("resource_pattern_type", INT8, "1+", default=LITERAL),
            F("principal", STRING),
            F("host", STRING),
            F("operation", INT8),
            F("permission_type", INT8),
        ))),
    ),
)

CREATE_ACLS_RESPONSE = message(
    "CreateAclsResponse",
    api_key=30,
    versions="0-3",
    flexible_versions="2+",
    fields=(
        F("throttle_time_ms", INT32),
        F("results", ARRAY(STRUCT("AclCreationResult",
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+"),
        ))),
    ),
)

DELETE_ACLS_REQUEST = message(
    "DeleteAclsRequest",
    api_key=31,
    versions="0-3",
    flexible_versions="2+",
    fields=(
        F("filters", ARRAY(STRUCT("DeleteAclsFilter",
            F("resource_type_filter", INT8),
            F("resource_name_filter", STRING, nullable="0+"),
            F("pattern_type_filter", INT8, "1+", default=LITERAL),
            F("principal_filter", STRING, nullable="0+"),
            F("host_filter", STRING, nullable="0+"),
            F("operation", INT8),
            F("permission_type", INT8),
        ))),
    ),
)

DELETE_ACLS_RESPONSE = message(
    "DeleteAclsResponse",
    api_key=31,
    versions="0-3",
    flexible_versions="2+",
    fields=(
        F("throttle_time_ms", INT32),
        F("filter_results", ARRAY(STRUCT("DeleteAclsFilterResult",
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+"),
            F("matching_acls", ARRAY(STRUCT("DeleteAclsMatchingAcl",
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+"),
                F("resource_type", INT8),
                F("resource_name", STRING),
                F("pattern_type", INT8, "1+", default=LITERAL),
                F("principal", STRING),
                F("host", STRING),
                F("operation", INT8),
                F("permission_type", INT8),
            ))),
        ))),
    ),
)
# fmt: on
