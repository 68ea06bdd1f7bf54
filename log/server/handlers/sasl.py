"""SaslHandshake / SaslAuthenticate where no SASL exchange is due: on a PLAINTEXT or SSL
listener, or on a SASL connection whose exchange the connection loop is not running (the
authenticator answers those: log/security/authenticator.py). Kafka answers ILLEGAL_SASL_STATE."""

from __future__ import annotations

from typing import Any

from log.common.errors import ErrorCode
from log.protocol.connection import Request
from log.protocol.sasl import SASL_AUTHENTICATE_RESPONSE, SASL_HANDSHAKE_RESPONSE
from log.server.broker_context import BrokerContext


async def handle_sasl_handshake(ctx: BrokerContext, request: Request) -> Any:
    return SASL_HANDSHAKE_RESPONSE.cls(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])


async def handle_sasl_authenticate(ctx: BrokerContext, request: Request) -> Any:
    return SASL_AUTHENTICATE_RESPONSE.cls(
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="no SASL authentication on this listener",
        auth_bytes=b"",
    )
