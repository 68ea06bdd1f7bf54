from pathlib import Path

import pytest

from log.common.node_config import ConfigError, NodeConfig, to_toml
from tools.cluster_layout import ClusterLayout, format_cluster


def test_format_writes_one_valid_config_per_node(tmp_path: Path):
    layout = ClusterLayout(tmp_path, 4, base_port=19092)
    configs = format_cluster(layout)
    assert [c.node_id for c in configs] == [1, 2, 3, 4]
    assert configs[0].roles == {"broker", "controller"}
    assert configs[3].roles == {"broker"}  # past three controllers, brokers only
    assert configs[1].listener("PLAINTEXT").port == 19093
    assert [v.port for v in configs[3].raft_voters] == [19292, 19293, 19294]
    assert len({c.props["cluster.id"] for c in configs}) == 1
    assert (
        layout.bootstrap_servers
        == "127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094,127.0.0.1:19095"
    )


def test_format_is_idempotent_and_keeps_edits(tmp_path: Path):
    layout = ClusterLayout(tmp_path, 3)
    format_cluster(layout)
    path = tmp_path / "node-2" / "node.toml"
    path.write_text(path.read_text() + "log.segment.bytes = 4096\n")
    configs = format_cluster(layout)
    assert configs[1].props["log.segment.bytes"] == 4096  # TOML dotted keys flatten to Kafka names
    assert configs[0].props["cluster.id"] == configs[1].props["cluster.id"]


def test_unknown_key_and_bad_types_are_clear_errors(tmp_path: Path):
    base = ClusterLayout(tmp_path, 1).node_properties(1, "c", "pw")
    with pytest.raises(ConfigError, match="unknown configuration key 'log.segmnet.bytes'"):
        NodeConfig.from_properties(tmp_path, {**base, "log.segmnet.bytes": 1})
    with pytest.raises(ConfigError, match="num.partitions: expected int"):
        NodeConfig.from_properties(tmp_path, {**base, "num.partitions": True})
    with pytest.raises(ConfigError, match="heartbeat"):
        NodeConfig.from_properties(tmp_path, {**base, "broker.heartbeat.interval.ms": 10000})
    with pytest.raises(ConfigError, match="password"):
        NodeConfig.from_properties(tmp_path, {**base, "controller.quorum.password": ""})


def test_toml_round_trip(tmp_path: Path):
    props = ClusterLayout(tmp_path, 1).node_properties(1, 'id"x', "pw")
    (tmp_path / "node.toml").write_text(to_toml({**props, "auto.create.topics.enable": False}))
    config = NodeConfig.load(tmp_path)
    assert config.props["cluster.id"] == 'id"x'
    assert config.props["auto.create.topics.enable"] is False


def test_missing_or_broken_file(tmp_path: Path):
    with pytest.raises(ConfigError, match="no such file"):
        NodeConfig.load(tmp_path)
    (tmp_path / "node.toml").write_text("node.id = = 1")
    with pytest.raises(ConfigError, match="node.toml"):
        NodeConfig.load(tmp_path)


def test_port_range_is_checked(tmp_path: Path):
    with pytest.raises(ValueError, match="outside"):
        ClusterLayout(tmp_path, 3, base_port=65400)
