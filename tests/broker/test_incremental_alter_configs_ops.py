"""IncrementalAlterConfigs APPEND/SUBTRACT (KIP-339) on list-type topic configs, through
confluent-kafka's AdminClient against a real in-process broker; as confluent-kafka-python's own
test_incremental_alter_configs does with cleanup.policy."""

from __future__ import annotations

import trio
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from tests.broker.conftest import start_broker


def alter(bootstrap: str, topic: str, *entries: ConfigEntry) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("topic", topic, incremental_configs=list(entries))
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def entry(name: str, value: str, op: AlterConfigOpType) -> ConfigEntry:
    return ConfigEntry(name, value, incremental_operation=op)


async def test_append_and_subtract_list_configs(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path)
    await broker.create_topic("appended", 1)
    await broker.create_topic("subtracted", 1, **{"cleanup.policy": "delete,compact"})

    def topics(name: str) -> dict[str, str]:
        return broker.server.ctx.replica_manager.sync().topic_configs(name)

    await trio.to_thread.run_sync(alter, broker.bootstrap, "appended",
                                  entry("cleanup.policy", "compact", AlterConfigOpType.APPEND),
                                  entry("retention.ms", "10000", AlterConfigOpType.SET))  # fmt: skip
    assert topics("appended") == {"cleanup.policy": "delete,compact", "retention.ms": "10000"}
    await trio.to_thread.run_sync(alter, broker.bootstrap, "appended",
                                  entry("cleanup.policy", "compact", AlterConfigOpType.APPEND))  # fmt: skip
    assert topics("appended")["cleanup.policy"] == "delete,compact"  # no duplicate

    await trio.to_thread.run_sync(alter, broker.bootstrap, "subtracted",
                                  entry("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT))  # fmt: skip
    assert topics("subtracted") == {"cleanup.policy": "compact"}


async def test_append_to_a_scalar_config_is_invalid_config(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path)
    await broker.create_topic("t", 1)
    try:
        await trio.to_thread.run_sync(alter, broker.bootstrap, "t",
                                      entry("retention.ms", "5", AlterConfigOpType.APPEND))  # fmt: skip
    except KafkaException as exc:
        error = exc.args[0]
    else:
        raise AssertionError("APPEND to retention.ms was accepted")
    assert error.name() == "INVALID_CONFIG" and "append is not allowed" in error.str()
    assert broker.server.ctx.replica_manager.sync().topic_configs("t") == {}
