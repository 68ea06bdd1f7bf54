"""UpdateFeatures (kafka-features.sh upgrade/downgrade): ALTER on the cluster, then the
controller's decision (quorum/features.py `update_features`: all updates or none), then the
answer once this broker's image shows the new levels. v0's allow_downgrade is an unsafe
downgrade when set; every feature of the request gets the request's one error in v0-1's results.
The finalized levels themselves are read with ApiVersions (metadata.py)."""

from __future__ import annotations

from typing import Any

from log.common.acl import AclOperation
from log.common.errors import ErrorCode
from log.protocol.connection import Request
from log.protocol.features import UPDATE_FEATURES_RESPONSE
from log.server.authorization import allowed_cluster
from log.server.broker_context import MAX_ADMIN_WAIT_MS, BrokerContext
from quorum.features import (
    UNSAFE_DOWNGRADE,
    UPGRADE,
    FeatureUpdate,
    UpdateFeaturesRequest,
)
from quorum.image import MetadataImage

U = UPDATE_FEATURES_RESPONSE.cls


async def handle_update_features(ctx: BrokerContext, request: Request) -> object:
    body = request.body
    if not allowed_cluster(ctx, request, AclOperation.ALTER):  # authorization
        return _answer(body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "ALTER on the cluster")
    v0 = request.api_version == 0
    updates = tuple(
        FeatureUpdate(
            u.feature,
            u.max_version_level,
            (UNSAFE_DOWNGRADE if u.allow_downgrade else UPGRADE) if v0 else u.upgrade_type,
        )
        for u in body.feature_updates
    )
    validate_only = getattr(body, "validate_only", False)
    response = await ctx.controller.update_features(UpdateFeaturesRequest(updates, validate_only))
    if response.error_code != ErrorCode.NONE or validate_only:
        return _answer(body, response.error_code, response.error_message)

    def applied(image: MetadataImage) -> bool:
        return all(image.feature_level(u.feature) == max(u.max_version_level, 0) for u in updates)

    if not await ctx.wait_until(applied, MAX_ADMIN_WAIT_MS):
        return _answer(body, ErrorCode.REQUEST_TIMED_OUT, "the new levels are not visible yet")
    return _answer(body, ErrorCode.NONE, None)


def _answer(body: Any, code: int, message: str | None) -> object:
    return U(
        throttle_time_ms=0,
        error_code=code,
        error_message=message,
        results=[
            U.UpdatableFeatureResult(feature=u.feature, error_code=code, error_message=message)
            for u in body.feature_updates
        ],
    )
