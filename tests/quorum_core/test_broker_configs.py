"""quorum/broker_configs.py: the controller's decision on BROKER-resource configs (sans-IO); its
request's trip through controller_codec is in tests/node/test_service_in_process.py."""

from __future__ import annotations

from log.common.errors import ErrorCode
from quorum.broker_configs import (
    AlterBrokerConfigsRequest,
    AlterBrokerConfigsResponse,
    alter_broker_configs,
    is_dynamic,
)
from quorum.image import MetadataImage
from quorum.records import CONFIG_RESOURCE_BROKER, ConfigRecord


def test_records_for_a_broker_id_and_the_cluster_default():
    request = AlterBrokerConfigsRequest("2", {"log.retention.ms": "5", "num.io.threads": None})
    records, response = alter_broker_configs(MetadataImage(), request)
    assert response == AlterBrokerConfigsResponse(ErrorCode.NONE)
    assert records == [
        ConfigRecord(CONFIG_RESOURCE_BROKER, "2", "log.retention.ms", "5"),
        ConfigRecord(CONFIG_RESOURCE_BROKER, "2", "num.io.threads", None),
    ]
    records, response = alter_broker_configs(
        MetadataImage(), AlterBrokerConfigsRequest("", {"min.insync.replicas": "2"})
    )
    assert response.error_code == ErrorCode.NONE and records[0].resource_name == ""


def test_the_controller_refuses_what_kafkas_controller_and_brokers_refuse():
    for broker, changes, words in [
        ("abc", {"log.retention.ms": "5"}, "base 10"),
        ("-1", {"log.retention.ms": "5"}, "negative"),
        ("1", {"log.dirs": "/elsewhere"}, "dynamically"),
        ("1", {"min.insync.replicas": "0"}, "Invalid value"),
        ("", {"listeners": "PLAINTEXT://:1"}, "broker id must be specified"),
    ]:
        records, response = alter_broker_configs(
            MetadataImage(), AlterBrokerConfigsRequest(broker, changes)
        )
        assert records == [] and response.error_code == ErrorCode.INVALID_REQUEST
        assert response.error_message is not None and words in response.error_message
    # deleting a key is never refused, even one that could not be set
    _, response = alter_broker_configs(
        MetadataImage(), AlterBrokerConfigsRequest("1", {"log.dirs": None})
    )
    assert response.error_code == ErrorCode.NONE


def test_read_only_follows_kafkas_dynamic_set():
    assert is_dynamic("log.retention.ms") and is_dynamic("listener.name.x.ssl.keystore.type")
    assert not is_dynamic("log.dirs") and not is_dynamic("node.id")
