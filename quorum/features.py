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

A new cluster (an empty metadata log) finalizes BOOTSTRAP_LEVELS, Kafka 4.0's defaults for a new
cluster, overridden by the node property `quorumlog.bootstrap.features` ("transaction.version=1",
written by `quorumlog format --feature transaction.version=1`, Kafka's `kafka-storage format
--feature` naming): the active controller writes them in its first activation batch.
"""

from __future__ import annotations

from collections.abc import Mapping

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
