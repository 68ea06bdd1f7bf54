"""`up --secure`'s formatting: SASL_SSL listeners with the node certificates, the client settings
file (mode 0600), and a restart that reuses everything (no second CA, same passwords)."""

from __future__ import annotations

import stat

from tools.cluster_layout import ClusterLayout, format_cluster
from tools.secure_cluster import CLIENT_PROPERTIES, client_settings


def test_secure_format_then_reformat(tmp_path):
    layout = ClusterLayout(tmp_path, 2, 19092, secure=True)
    configs = format_cluster(layout)
    for config in configs:
        assert [str(e) for e in config.broker_listeners] == [
            f"SASL_SSL://127.0.0.1:{layout.kafka_port(config.node_id)}"
        ]
        assert config.inter_broker_listener_name == "SASL_SSL"
        assert config.props["ssl.certificate.location"].endswith(f"node-{config.node_id}.pem")
    settings = client_settings(tmp_path)
    assert settings["security.protocol"] == "SASL_SSL" and settings["sasl.username"] == "admin"
    path = tmp_path / CLIENT_PROPERTIES
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    ca = (tmp_path / "certs" / "ca.pem").read_bytes()
    format_cluster(layout)  # a restart
    assert client_settings(tmp_path) == settings
    assert (tmp_path / "certs" / "ca.pem").read_bytes() == ca
    assert client_settings(tmp_path / "elsewhere") == {}


def test_plain_layout_is_unchanged(tmp_path):
    config = format_cluster(ClusterLayout(tmp_path, 1, 19092))[0]
    assert [e.listener for e in config.listeners] == ["PLAINTEXT", "CONTROLLER"]
    assert not (tmp_path / CLIENT_PROPERTIES).exists()
