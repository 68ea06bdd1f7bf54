"""Features: the cluster-wide feature levels every node agrees on (Kafka's KIP-584/KIP-1022).

A feature is a name with a level; the metadata log finalizes it (FeatureLevelRecord, replayed
into `MetadataImage.features`), so every broker answers the same level in ApiVersions and acts
on it. A feature absent from the image is at level 0, its oldest behaviour (a cluster whose log
predates the feature stays there until it is upgraded).

SUPPORTED lists the features this software implements, with the range of levels it supports
(ApiVersions' supported_features); only what is true of us is listed:

    transaction.version  0-2   0: KIP-98 transactions; 1: the same, __transaction_state values
                               written in their flexible version; 2: KIP-890 part 2 (an epoch
                               bump per transaction, implicit partition adds: Produce v12,
                               TxnOffsetCommit v5, EndTxn v5). KIP-890 part 1's verification runs
                               at every level here.
    group.version        0-1   1: KIP-848 consumer groups (ConsumerGroupHeartbeat); always served
                               here, so it is finalized at 1 and not configurable

UpdateFeatures (Kafka's API 57, `quorumlog features upgrade|downgrade`, kafka-features.sh's
shape) changes a running cluster's level: `update_features` is the controller's decision, all
updates or none, one error (Kafka's FeatureControlManager): an unknown feature, a level outside
the supported range, a feature fixed here, a lower level without a downgrade type, or a higher
one with it, is INVALID_UPDATE_VERSION. The new level applies to what starts after it: open
transactions keep the version they started with.

A new cluster (an empty metadata log) finalizes BOOTSTRAP_LEVELS, Kafka 4.0's defaults for a new
cluster, overridden by the node property `quorumlog.bootstrap.features` ("transaction.version=1",
written by `quorumlog format --feature transaction.version=1`, Kafka's `kafka-storage format
--feature` naming): the active controller writes them in its first activation batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from log.common.errors import ErrorCode
from quorum.image import MetadataImage
from quorum.records import FeatureLevelRecord, MetadataRecord

TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"

# name -> (min supported level, max supported level)
SUPPORTED: Mapping[str, tuple[int, int]] = {
    TRANSACTION_VERSION: (0, 2),
    GROUP_VERSION: (0, 1),
}
# Kafka 4.0's levels for a new cluster.
BOOTSTRAP_LEVELS: Mapping[str, int] = {TRANSACTION_VERSION: 2, GROUP_VERSION: 1}
# Levels an operator may choose at format time; the others are fixed by what we implement.
CONFIGURABLE = frozenset({TRANSACTION_VERSION})


class FeatureError(ValueError):
    """A feature setting names an unknown feature or a level outside its supported range."""


def parse_feature_levels(text: str) -> dict[str, int]:
    """'name=level,name=level' -> {name: level}, checked against SUPPORTED and CONFIGURABLE."""
    levels: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not value.strip().lstrip("-").isdigit():
            raise FeatureError(f"{item!r} is not NAME=LEVEL")
        levels[name] = int(value)
    for name, level in levels.items():
        check_level(name, level)
        if name not in CONFIGURABLE:
            raise FeatureError(f"{name} is fixed at {BOOTSTRAP_LEVELS[name]} here")
    return levels


def check_level(name: str, level: int) -> None:
    supported = SUPPORTED.get(name)
    if supported is None:
        raise FeatureError(f"unknown feature {name!r} (known: {', '.join(sorted(SUPPORTED))})")
    low, high = supported
    if not low <= level <= high:
        raise FeatureError(f"{name}={level} is outside the supported levels {low}-{high}")


def bootstrap_levels(configured: str) -> dict[str, int]:
    """The levels a new cluster finalizes: BOOTSTRAP_LEVELS overridden by the node property."""
    return {**BOOTSTRAP_LEVELS, **parse_feature_levels(configured)}


# UpdateFeatures' upgrade_type (Kafka's FeatureUpdate.UpgradeType)
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


@dataclass(frozen=True)
class FeatureUpdate:
    feature: str
    max_version_level: int  # 0 (or below): back to the oldest behaviour (Kafka: delete it)
    upgrade_type: int = UPGRADE


@dataclass(frozen=True)
class UpdateFeaturesRequest:
    updates: tuple[FeatureUpdate, ...]
    validate_only: bool = False


@dataclass(frozen=True)
class UpdateFeaturesResponse:
    error_code: ErrorCode
    error_message: str | None = None


def update_features(
    image: MetadataImage, request: UpdateFeaturesRequest
) -> tuple[list[MetadataRecord], UpdateFeaturesResponse]:
    """The controller's decision: FeatureLevelRecords for every update, or none and the error."""
    records: list[MetadataRecord] = []
    seen: set[str] = set()
    for update in request.updates:
        error = _update_error(image, update, seen)
        if error is not None:
            return [], UpdateFeaturesResponse(ErrorCode.INVALID_UPDATE_VERSION, error)
        seen.add(update.feature)
        level = max(update.max_version_level, 0)
        if level != image.feature_level(update.feature):
            records.append(FeatureLevelRecord(update.feature, level))
    if request.validate_only:
        records = []
    return records, UpdateFeaturesResponse(ErrorCode.NONE)


def _update_error(image: MetadataImage, update: FeatureUpdate, seen: set[str]) -> str | None:
    name, level = update.feature, max(update.max_version_level, 0)
    if name in seen:
        return f"{name} is named twice"
    try:
        check_level(name, level)
    except FeatureError as exc:
        return str(exc)
    if name not in CONFIGURABLE and level != BOOTSTRAP_LEVELS[name]:
        return f"{name} is fixed at {BOOTSTRAP_LEVELS[name]} here"
    if update.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return f"unknown upgrade type {update.upgrade_type}"
    current = image.feature_level(name)
    if update.upgrade_type == UPGRADE and level < current:
        return (
            f"can't downgrade {name} from {current} to {level} without setting the upgrade "
            "type to safe or unsafe downgrade"
        )
    if update.upgrade_type != UPGRADE and level > current:
        return f"can't upgrade {name} from {current} to {level} with a downgrade type"
    return None
