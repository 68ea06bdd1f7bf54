"""CreateAcls / DescribeAcls / DeleteAcls through the wire (our ClientCodec) on a broker without
an authorizer: every version decodes and is answered SECURITY_DISABLED, as Kafka does, and no ACL
reaches the metadata log."""

from __future__ import annotations

import pytest

from log.common.errors import ErrorCode
from log.protocol.acls import CREATE_ACLS_REQUEST, DELETE_ACLS_REQUEST, DESCRIBE_ACLS_REQUEST
from tests.broker.conftest import WireClient


@pytest.mark.parametrize("version", [1, 2, 3])  # v0: removed by Kafka 4 (test_kip896.py)
async def test_acl_apis_without_an_authorizer_answer_security_disabled(broker, version):
    client = await WireClient.connect(broker.port)
    C = CREATE_ACLS_REQUEST.cls
    creation = C.AclCreation(resource_type=2, resource_name="t", resource_pattern_type=3,
                             principal="User:bob", host="*", operation=3, permission_type=3)  # fmt: skip
    body = await client.call(30, version, C(creations=[creation]))
    assert [r.error_code for r in body.results] == [ErrorCode.SECURITY_DISABLED]

    D = DESCRIBE_ACLS_REQUEST.cls
    body = await client.call(29, version, D(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1,
    ))  # fmt: skip
    assert body.error_code == ErrorCode.SECURITY_DISABLED and body.resources == []

    X = DELETE_ACLS_REQUEST.cls
    acl_filter = X.DeleteAclsFilter(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1,
    )  # fmt: skip
    body = await client.call(31, version, X(filters=[acl_filter]))
    assert [r.error_code for r in body.filter_results] == [ErrorCode.SECURITY_DISABLED]
    assert broker.quorum.image.acls == {}
    await client.aclose()
