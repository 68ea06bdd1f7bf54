"""`up`/`demo` clusters expose /metrics: one port per node, base_port + 300 + i - 1."""

from __future__ import annotations

from log.common.node_config import NodeConfig
from tools.cluster_layout import ClusterLayout, format_cluster


def test_each_node_gets_its_metrics_port_and_extra_properties(tmp_path):
    layout = ClusterLayout(
        tmp_path,
        3,
        base_port=19092,
        extra_properties=(
            ("broker.session.timeout.ms", 1500),
            ("broker.heartbeat.interval.ms", 300),
        ),
    )
    configs = format_cluster(layout)
    assert [c.props["metrics.port"] for c in configs] == [19392, 19393, 19394]
    assert all(c.props["broker.session.timeout.ms"] == 1500 for c in configs)
    assert NodeConfig.load(layout.node_dir(2)).props["metrics.port"] == 19393
    explicit = ClusterLayout(tmp_path, 2, base_port=19092, metrics_base_port=29000)
    assert explicit.metrics_port(2) == 29001
