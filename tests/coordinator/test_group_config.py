"""The group keys of a node's configuration: Kafka's names and defaults, validated."""

from __future__ import annotations

import pytest

from log.common.node_config import ConfigError
from log.coordinator.group_driver import group_config_from
from tests.broker.conftest import node_config


def test_defaults_are_kafkas(tmp_path):
    config = group_config_from(node_config(tmp_path).props)
    assert config.group_initial_rebalance_delay_ms == 3_000
    assert (config.group_min_session_timeout_ms, config.group_max_session_timeout_ms) == (
        6_000, 1_800_000,
    )  # fmt: skip
    assert config.offsets_retention_ms == 604_800_000
    assert config.offsets_retention_check_interval_ms == 600_000


def test_keys_are_read(tmp_path):
    props = node_config(
        tmp_path, **{"group.initial.rebalance.delay.ms": 0, "offsets.retention.ms": 60_000,
                     "offsets.retention.check.interval.ms": 1_000}
    ).props  # fmt: skip
    config = group_config_from(props)
    assert config.group_initial_rebalance_delay_ms == 0
    assert (config.offsets_retention_ms, config.offsets_retention_check_interval_ms) == (
        60_000, 1_000,
    )  # fmt: skip


@pytest.mark.parametrize(
    "bad",
    [
        {"group.initial.rebalance.delay.ms": -1},
        {"offsets.retention.ms": 0},
        {"offsets.retention.check.interval.ms": 0},
        {"group.min.session.timeout.ms": 10_000, "group.max.session.timeout.ms": 9_000},
    ],
)
def test_bad_values_are_config_errors(tmp_path, bad):
    with pytest.raises(ConfigError):
        node_config(tmp_path, **bad)
