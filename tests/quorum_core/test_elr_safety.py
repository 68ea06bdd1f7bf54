"""KIP-966's one cluster-wide min.insync.replicas (quorum/broker_configs.py, sans-IO): Kafka's
ELR safety records (the cluster default from the controller's static value when absent, every
broker-level one removed, nothing once both hold), and INVALID_CONFIG for a broker-level
min.insync.replicas or for removing the cluster default (a legacy AlterConfigs of the cluster
resource that leaves it out reaches the controller as such a removal)."""

from __future__ import annotations

from quorum_core_harness import Cluster

from log.common.errors import ErrorCode
from quorum.broker_configs import (
    AlterBrokerConfigsRequest,
    alter_broker_configs,
    elr_safety_records,
)
from quorum.records import CONFIG_RESOURCE_BROKER, ConfigRecord

MIN_ISR = "min.insync.replicas"


def test_the_safety_records_set_the_cluster_default_and_remove_broker_level_ones():
    cluster = Cluster()
    cluster.commit([ConfigRecord(CONFIG_RESOURCE_BROKER, "1", MIN_ISR, "2"),
                    ConfigRecord(CONFIG_RESOURCE_BROKER, "7", MIN_ISR, "3"),  # never registered
                    ConfigRecord(CONFIG_RESOURCE_BROKER, "1", "log.retention.ms", "5")])  # fmt: skip
    records = elr_safety_records(cluster.image, 2)
    assert records == [
        ConfigRecord(CONFIG_RESOURCE_BROKER, "", MIN_ISR, "2"),
        ConfigRecord(CONFIG_RESOURCE_BROKER, "1", MIN_ISR, None),
        ConfigRecord(CONFIG_RESOURCE_BROKER, "7", MIN_ISR, None),
    ]
    cluster.commit(records)
    assert cluster.image.broker_configs("") == {MIN_ISR: "2"}
    assert cluster.image.broker_configs("1") == {"log.retention.ms": "5"}
    assert elr_safety_records(cluster.image, 1) == []  # an operator's value is kept


def test_broker_level_min_isr_and_removing_the_cluster_default_are_invalid_config():
    cluster = Cluster()
    cluster.commit(elr_safety_records(cluster.image, 1))
    for broker, changes, words in [
        ("1", {MIN_ISR: "2"}, "Broker-level min.insync.replicas cannot be altered"),
        ("1", {MIN_ISR: None}, "Broker-level min.insync.replicas cannot be altered"),
        ("", {MIN_ISR: None}, "Cluster-level min.insync.replicas cannot be removed"),
    ]:
        records, response = alter_broker_configs(
            cluster.image, AlterBrokerConfigsRequest(broker, changes)
        )
        assert records == [] and response.error_code == ErrorCode.INVALID_CONFIG
        assert words in (response.error_message or "")
    records, response = alter_broker_configs(
        cluster.image, AlterBrokerConfigsRequest("", {MIN_ISR: "2"})
    )
    assert response.error_code == ErrorCode.NONE
    assert records == [ConfigRecord(CONFIG_RESOURCE_BROKER, "", MIN_ISR, "2")]
