"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51): SCRAM users in the
metadata log (quorum/scram_credentials.py decides; this broker forwards).

Describe reads this broker's image: every user with a credential (users null or empty) or the named ones
(RESOURCE_NOT_FOUND for one without any, DUPLICATE_RESOURCE for a name given twice). Alter turns
each upsertion's salted password into the stored key and server key here (RFC 5802), so only
those reach the controller and the log; an unknown mechanism is left for the controller to
refuse (UNSUPPORTED_SASL_MECHANISM). With an authorizer, describing needs DESCRIBE and altering
ALTER on the CLUSTER (Kafka's); without one any authenticated client may call them.
"""

from __future__ import annotations

import base64
from typing import Any

from log.common.acl import AclOperation
from log.common.errors import ErrorCode
from log.protocol.connection import Request
from log.protocol.sasl import (
    ALTER_USER_SCRAM_CREDENTIALS_RESPONSE,
    DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE,
)
from log.security.scram import SCRAM_MECHANISMS
from log.server.authorization import require_cluster
from log.server.broker_context import BrokerContext
from quorum.scram_credentials import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)

D: Any = DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE.cls  # made at run time by schema.py: untyped
A: Any = ALTER_USER_SCRAM_CREDENTIALS_RESPONSE.cls  # made at run time by schema.py: untyped
_BY_TYPE = {m.mechanism_type: m for m in SCRAM_MECHANISMS.values()}


async def handle_describe_user_scram_credentials(ctx: BrokerContext, request: Request) -> object:
    require_cluster(ctx, request, AclOperation.DESCRIBE)  # authorization
    credentials = ctx.image.scram_credentials
    infos: dict[str, list[Any]] = {}
    for (user, mechanism), record in sorted(credentials.items()):
        infos.setdefault(user, []).append(
            D.CredentialInfo(mechanism=mechanism, iterations=record.iterations)
        )
    if not request.body.users:  # null or empty: every user (Kafka's rule)
        names = sorted(infos)
    else:
        names = [u.name for u in request.body.users]
    results = []
    for name in dict.fromkeys(names):
        if names.count(name) > 1:
            results.append(D.DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.DUPLICATE_RESOURCE,
                error_message="Cannot describe SCRAM credentials for the same user twice in a "
                "single request", credential_infos=[],
            ))  # fmt: skip
        elif name not in infos:
            results.append(D.DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                error_message="Attempt to describe a user credential that does not exist",
                credential_infos=[],
            ))  # fmt: skip
        else:
            results.append(D.DescribeUserScramCredentialsResult(
                user=name, error_code=0, error_message=None, credential_infos=infos[name]
            ))  # fmt: skip
    return D(error_code=0, error_message=None, results=results)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _upsertion(item: Any) -> ScramCredentialUpsertion:
    mechanism = _BY_TYPE.get(item.mechanism)
    salt = bytes(item.salt or b"")
    salted = bytes(item.salted_password or b"")
    stored_key = server_key = b""
    if mechanism is not None and salted:
        stored_key = mechanism.h(mechanism.hmac(salted, b"Client Key"))
        server_key = mechanism.hmac(salted, b"Server Key")
    return ScramCredentialUpsertion(item.name, item.mechanism, item.iterations, _b64(salt),
                                    _b64(stored_key), _b64(server_key))  # fmt: skip


async def handle_alter_user_scram_credentials(ctx: BrokerContext, request: Request) -> object:
    require_cluster(ctx, request, AclOperation.ALTER)  # authorization
    body = request.body
    alter = AlterUserScramCredentialsRequest(
        tuple(ScramCredentialDeletion(d.name, d.mechanism) for d in body.deletions),
        tuple(_upsertion(u) for u in body.upsertions),
    )
    response = await ctx.controller.alter_user_scram_credentials(alter)
    return A(results=[
        A.AlterUserScramCredentialsResult(
            user=r.user, error_code=r.error_code, error_message=r.error_message
        )
        for r in response.results
    ])  # fmt: skip
