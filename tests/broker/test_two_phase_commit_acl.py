"""The TWO_PHASE_COMMIT ACL (KIP-939, operation 15 on a TransactionalId): with an authorizer,
InitProducerId with enable_2pc needs it besides WRITE on the transactional id; without it the
answer is TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and the same principal's plain transactional
InitProducerId still succeeds. One in-process broker (PLAINTEXT: principal User:ANONYMOUS),
ACLs created through its metadata quorum as CreateAcls would."""

from __future__ import annotations

import uuid

from log.common.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from log.common.errors import ErrorCode
from quorum.acls import CreateAclsRequest
from tests.broker.conftest import WireClient, start_broker
from tests.broker.test_two_phase_commit import TWO_PC, init_v6
from tests.broker.test_txn_coordinator import FC, find_coordinator

STANDARD = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}


async def _allow(broker, operation: int, principal: str = "User:ANONYMOUS") -> None:
    binding = AclBinding(ResourceType.TRANSACTIONAL_ID, "spark-", PatternType.PREFIXED,
                         principal, "*", operation, AclPermissionType.ALLOW)  # fmt: skip
    response = await broker.quorum.create_acls(CreateAclsRequest((binding,), (uuid.uuid4(),)))
    assert [r.error_code for r in response.results] == [ErrorCode.NONE]


async def test_enable_2pc_needs_two_phase_commit_on_the_transactional_id(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path, **TWO_PC, **STANDARD)
    client = await WireClient.connect(broker.port)
    # No ACL at all: not even the coordinator may be looked up.
    body = await client.call(10, 2, FC(key="spark-0", key_type=1))
    assert body.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    # TWO_PHASE_COMMIT alone is not enough: WRITE on the transactional id comes first.
    await _allow(broker, AclOperation.TWO_PHASE_COMMIT, principal="User:someone-else")
    await _allow(broker, AclOperation.WRITE)
    assert (await find_coordinator(client, "spark-0")).error_code == ErrorCode.NONE
    refused = await init_v6(client, "spark-0", enable_2pc=True)
    assert refused.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert (refused.producer_id, refused.producer_epoch) == (-1, -1)
    # the same principal's plain transactional producer is allowed (WRITE)
    assert (await init_v6(client, "spark-0", enable_2pc=False)).error_code == ErrorCode.NONE

    await _allow(broker, AclOperation.TWO_PHASE_COMMIT)
    granted = await init_v6(client, "spark-0", enable_2pc=True)
    assert granted.error_code == ErrorCode.NONE and granted.producer_id >= 0
    await client.aclose()
