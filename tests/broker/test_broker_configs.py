"""Dynamic BROKER-resource configs (issue 19): AlterConfigs / IncrementalAlterConfigs on a broker
id or the cluster default "", through confluent-kafka's AdminClient against a real in-process
broker whose controller stand-in runs the real quorum/broker_configs.py decision; the refusals
Kafka answers; DescribeConfigs sources and synonyms; the log defaults applied live."""

from __future__ import annotations

import functools

import trio
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)

from bench.local_quorum import NODE_ID
from log.common.errors import ErrorCode
from log.protocol.admin import (
    ALTER_CONFIGS_REQUEST,
    DESCRIBE_CONFIGS_REQUEST,
    INCREMENTAL_ALTER_CONFIGS_REQUEST,
)
from tests.broker.conftest import WireClient, start_broker

BROKER = str(NODE_ID)
SET, DELETE, APPEND, SUBTRACT = (
    AlterConfigOpType.SET, AlterConfigOpType.DELETE,
    AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT,
)  # fmt: skip


def incremental(bootstrap: str, kind: str, name: str, *entries: tuple, validate_only=False):
    """One resource's IncrementalAlterConfigs; returns None or the KafkaError."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = [ConfigEntry(key, value, incremental_operation=op) for key, value, op in entries]
    resource = ConfigResource(kind, name, incremental_configs=configs)
    futures = admin.incremental_alter_configs([resource], validate_only=validate_only)
    try:
        for future in futures.values():
            future.result(timeout=30)
    except KafkaException as exc:
        return exc.args[0]
    return None


async def on_wire(
    port: int, name: str, *entries: tuple, legacy: bool = False
) -> tuple[int, str | None]:
    """BROKER resource `name` over the wire (confluent-kafka refuses the empty name "" and
    sends a broker id's request to that broker only): IncrementalAlterConfigs v1 of
    (key, value, op), or AlterConfigs v1 of (key, value)."""
    client = await WireClient.connect(port)
    if legacy:
        A = ALTER_CONFIGS_REQUEST.cls  # noqa: N806
        body = A(validate_only=False, resources=[A.AlterConfigsResource(
            resource_type=4, resource_name=name,
            configs=[A.AlterableConfig(name=k, value=v) for k, v in entries])])  # fmt: skip
        answer = await client.call(33, 1, body)
    else:
        incremental = INCREMENTAL_ALTER_CONFIGS_REQUEST.cls
        body = incremental(validate_only=False, resources=[incremental.AlterConfigsResource(
            resource_type=4, resource_name=name, configs=[
                incremental.AlterableConfig(name=k, value=v, config_operation=int(op.value))
                for k, v, op in entries])])  # fmt: skip
        answer = await client.call(44, 1, body)
    await client.aclose()
    (response,) = answer.responses
    return response.error_code, response.error_message


def describe(bootstrap: str, kind: str, name: str) -> dict[str, ConfigEntry]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.describe_configs([ConfigResource(kind, name)]).values()
    return future.result(timeout=30)


async def test_broker_and_default_configs_are_stored_described_and_applied(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path)
    await broker.create_topic("plain", 1)
    await broker.create_topic("own", 1, **{"retention.ms": "5000"})
    run = trio.to_thread.run_sync

    def image():
        return broker.server.ctx.replica_manager.sync()

    def log_config(topic: str):
        return broker.server.ctx.replica_manager.log_manager.get_log(topic, 0).config

    # librdkafka's 0081 case: a per-broker listener key on this broker's id
    assert await run(incremental, broker.bootstrap, "broker", BROKER,
                     ("sasl.kerberos.min.time.before.relogin", "58000", SET),
                     ("log.retention.ms", "123456", SET)) is None  # fmt: skip
    assert await on_wire(broker.port, "", ("log.retention.ms", "999000", SET),
                            ("log.retention.bytes", "1000000", SET)) == (0, None)  # fmt: skip
    assert image().broker_configs(BROKER) == {
        "sasl.kerberos.min.time.before.relogin": "58000",
        "log.retention.ms": "123456",
    }
    assert image().broker_configs("") == {
        "log.retention.ms": "999000",
        "log.retention.bytes": "1000000",
    }

    # applied live: this broker's value over the cluster default; a topic override wins
    assert (log_config("plain").retention_ms, log_config("plain").retention_bytes) == (
        123456, 1000000)  # fmt: skip
    assert log_config("own").retention_ms == 5000

    described = await run(describe, broker.bootstrap, "broker", BROKER)
    ms, size = described["log.retention.ms"], described["log.retention.bytes"]
    assert (ms.value, ms.source, ms.is_read_only) == (
        "123456", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)  # fmt: skip
    assert (size.value, size.source) == (
        "1000000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
    )
    relogin = described["sasl.kerberos.min.time.before.relogin"]
    assert (relogin.value, relogin.source) == ("58000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    node_id = described["node.id"]
    assert (node_id.source, node_id.is_read_only) == (
        ConfigSource.STATIC_BROKER_CONFIG.value, True)  # fmt: skip

    topic = await run(describe, broker.bootstrap, "topic", "plain")
    assert (topic["retention.ms"].value, topic["retention.ms"].source) == (
        "123456", ConfigSource.DYNAMIC_BROKER_CONFIG.value)  # fmt: skip
    assert topic["retention.bytes"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value

    # synonyms (v1+): this broker's value, the cluster default, then the node's value: its
    # properties do not set log.retention.ms, so Kafka's default (DEFAULT_CONFIG)
    client = await WireClient.connect(broker.port)
    D = DESCRIBE_CONFIGS_REQUEST.cls  # noqa: N806
    answer = await client.call(32, 2, D(include_synonyms=True, resources=[
        D.DescribeConfigsResource(resource_type=4, resource_name=BROKER,
                                  configuration_keys=["log.retention.ms"])]))  # fmt: skip
    (entry,) = answer.results[0].configs
    assert [(s.value, s.source) for s in entry.synonyms] == [
        ("123456", 2), ("999000", 3), (str(7 * 24 * 3600 * 1000), 5)]  # fmt: skip
    # "" describes the cluster-wide dynamic defaults only
    answer = await client.call(
        32,
        2,
        D(
            include_synonyms=False,
            resources=[
                D.DescribeConfigsResource(
                    resource_type=4, resource_name="", configuration_keys=None
                )
            ],
        ),
    )
    await client.aclose()
    assert {(c.name, c.value, c.config_source) for c in answer.results[0].configs} == {
        ("log.retention.ms", "999000", 3), ("log.retention.bytes", "1000000", 3)}  # fmt: skip

    # deleting this broker's value falls back to the cluster default, live
    assert await run(incremental, broker.bootstrap, "broker", BROKER,
                     ("log.retention.ms", None, DELETE)) is None  # fmt: skip
    assert log_config("plain").retention_ms == 999000
    # legacy AlterConfigs replaces the whole set: keys not given are deleted
    assert await on_wire(broker.port, "", ("log.retention.bytes", "2000000"), legacy=True) == (
        0, None)  # fmt: skip
    assert image().broker_configs("") == {"log.retention.bytes": "2000000"}
    assert (log_config("plain").retention_ms, log_config("plain").retention_bytes) == (
        7 * 24 * 3600 * 1000, 2000000)  # fmt: skip
    # APPEND on a list-type broker config starts from the node's value
    assert await on_wire(broker.port, "", ("log.cleanup.policy", "compact", APPEND)) == (0, None)
    assert image().broker_configs("")["log.cleanup.policy"] == "delete,compact"
    assert log_config("plain").compact and log_config("plain").delete


async def test_broker_config_refusals_are_kafkas(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path)
    run = trio.to_thread.run_sync
    cases = [  # (resource name, entries, Kafka's error, words of its message)
        (BROKER, [("auto.create.topics.enable", "false", SET)], "INVALID_REQUEST",
         "Cannot update these configs dynamically"),
        (BROKER, [("log.retention.hours", "5", SET)], "INVALID_REQUEST", "dynamically"),
        (BROKER, [("ssl.keystore.location", "/x", SET)], "INVALID_REQUEST", "listener prefix"),
        (BROKER, [("log.retention.ms", "soon", SET)], "INVALID_REQUEST", "Invalid value"),
        (BROKER, [("log.retention.ms", "5", APPEND)], "INVALID_CONFIG", "append is not allowed"),
    ]  # fmt: skip
    for name, entries, code, words in cases:
        error = await run(incremental, broker.bootstrap, "broker", name, *entries)
        assert error is not None, (name, entries)
        assert (error.name(), words in error.str()) == (code, True), (name, entries, error)
    for name, words in (("7", "Unexpected broker id"), ("x", "must be an integer")):
        code, message = await on_wire(broker.port, name, ("log.retention.ms", "1", SET))
        assert code == ErrorCode.INVALID_REQUEST and words in message
    for key in ("sasl.kerberos.min.time.before.relogin", "listener.name.ext.ssl.keystore.type"):
        code, message = await on_wire(broker.port, "", (key, "1", SET))
        assert code == ErrorCode.INVALID_REQUEST and "broker id must be specified" in message
    code, message = await on_wire(broker.port, BROKER, ("node.id", "3"), legacy=True)
    assert code == ErrorCode.INVALID_REQUEST and "dynamically" in message

    # validate_only checks and stores nothing; a key Kafka does not know is a custom property
    only = functools.partial(incremental, validate_only=True)
    assert await run(only, broker.bootstrap, "broker", BROKER,
                     ("log.retention.ms", "1000", SET)) is None  # fmt: skip
    assert await run(incremental, broker.bootstrap, "broker", BROKER,
                     ("listener.name.external.ssl.keystore.location", "/ks", SET),
                     ("my.custom.key", "x", SET)) is None  # fmt: skip
    assert broker.server.ctx.replica_manager.sync().broker_configs(BROKER) == {
        "listener.name.external.ssl.keystore.location": "/ks",
        "my.custom.key": "x",
    }
    described = await run(describe, broker.bootstrap, "broker", BROKER)
    assert described["listener.name.external.ssl.keystore.location"].is_read_only is False

    client = await WireClient.connect(broker.port)
    D = DESCRIBE_CONFIGS_REQUEST.cls  # noqa: N806
    answer = await client.call(32, 1, D(resources=[D.DescribeConfigsResource(
        resource_type=4, resource_name="7", configuration_keys=None)]))  # fmt: skip
    await client.aclose()
    assert answer.results[0].error_code == ErrorCode.INVALID_REQUEST


async def test_subtract_may_leave_cleanup_policy_empty(nursery, tmp_path):
    """Kafka's ValidList accepts an empty cleanup.policy: neither deleted nor compacted."""
    broker = await start_broker(nursery, tmp_path)
    await broker.create_topic("t", 1)
    error = await trio.to_thread.run_sync(
        incremental, broker.bootstrap, "topic", "t", ("cleanup.policy", "delete", SUBTRACT)
    )
    assert error is None
    assert broker.server.ctx.replica_manager.sync().topic_configs("t") == {"cleanup.policy": ""}
    config = broker.server.ctx.replica_manager.log_manager.get_log("t", 0).config
    assert (config.cleanup_policy, config.delete, config.compact) == ("", False, False)
