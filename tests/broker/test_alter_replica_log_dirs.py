"""AlterReplicaLogDirs (34) on the wire against a real KafkaServer, whose replicas all live in
its one log dir: a move there is done already (NONE), as Kafka answers a move of a replica to
the directory it is in; a path that is not the log dir is LOG_DIR_NOT_FOUND, a partition the
broker does not host REPLICA_NOT_AVAILABLE, a topic name too long for Kafka's future-log
directory INVALID_TOPIC_EXCEPTION; without ALTER on the cluster, CLUSTER_AUTHORIZATION_FAILED
for each partition. And kafka-python's KafkaAdminClient.alter_replica_log_dirs."""

from __future__ import annotations

import os
import uuid

import pytest
import trio

from log.common.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from log.common.errors import ErrorCode
from log.protocol.log_dirs import ALTER_REPLICA_LOG_DIRS_REQUEST
from quorum.acls import CreateAclsRequest
from tests.broker.conftest import WireClient, start_broker

A = ALTER_REPLICA_LOG_DIRS_REQUEST.cls


def move(path: str, topics: dict[str, list[int]]):
    return A.AlterReplicaLogDir(
        path=path,
        topics=[A.AlterReplicaLogDir.AlterReplicaLogDirTopic(name=name, partitions=partitions)
                for name, partitions in topics.items()],
    )  # fmt: skip


def errors_of(body) -> dict[tuple[str, int], int]:
    found = {}
    for topic in body.results:
        for partition in topic.partitions:
            key = (topic.topic_name, partition.partition_index)
            assert key not in found  # each partition answered once
            found[key] = partition.error_code
    return found


@pytest.mark.parametrize("version", [1, 2])
async def test_alter_replica_log_dirs_every_version(broker, version):
    await broker.create_topic("mv", 2)
    log_dir = broker.server.ctx.log_manager.log_dir
    described = str(log_dir.resolve())  # as DescribeLogDirs names it
    long_topic = "t" * 220  # "<topic>-0.<32 hex>-future" is 262 characters, past 255
    client = await WireClient.connect(broker.port)
    body = await client.call(34, version, A(dirs=[
        move(described, {"mv": [0], "gone": [0], long_topic: [0]}),
        move(os.path.abspath(log_dir), {"mv": [1]}),
        move("/no/such/dir", {"mv": [5]}),
        move("/no/such/dir", {"mv": [0]}),  # named again: the last path wins
    ]))  # fmt: skip
    assert errors_of(body) == {
        ("mv", 0): ErrorCode.LOG_DIR_NOT_FOUND,
        ("mv", 1): ErrorCode.NONE,
        ("mv", 5): ErrorCode.LOG_DIR_NOT_FOUND,
        ("gone", 0): ErrorCode.REPLICA_NOT_AVAILABLE,
        (long_topic, 0): ErrorCode.INVALID_TOPIC_EXCEPTION,
    }
    body = await client.call(34, version, A(dirs=[move(described, {"mv": [0, 1, 2]})]))
    assert errors_of(body) == {("mv", 0): ErrorCode.NONE, ("mv", 1): ErrorCode.NONE,
                               ("mv", 2): ErrorCode.REPLICA_NOT_AVAILABLE}  # fmt: skip
    await client.aclose()


async def test_alter_replica_log_dirs_needs_alter_on_the_cluster(nursery, tmp_path):
    broker = await start_broker(
        nursery, tmp_path,
        **{"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"},
    )  # fmt: skip
    await broker.create_topic("mv", 1)
    path = str(broker.server.ctx.log_manager.log_dir.resolve())
    client = await WireClient.connect(broker.port)
    request = A(dirs=[move(path, {"mv": [0], "other": [3]})])
    body = await client.call(34, 2, request)
    assert errors_of(body) == {("mv", 0): ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                               ("other", 3): ErrorCode.CLUSTER_AUTHORIZATION_FAILED}  # fmt: skip
    binding = AclBinding(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL,
                         "User:ANONYMOUS", "*", AclOperation.ALTER, AclPermissionType.ALLOW)  # fmt: skip
    response = await broker.quorum.create_acls(CreateAclsRequest((binding,), (uuid.uuid4(),)))
    assert [r.error_code for r in response.results] == [ErrorCode.NONE]
    body = await client.call(34, 2, request)
    assert errors_of(body) == {("mv", 0): ErrorCode.NONE,
                               ("other", 3): ErrorCode.REPLICA_NOT_AVAILABLE}  # fmt: skip
    await client.aclose()


def _kafka_python_move(bootstrap: str, topic: str) -> dict:
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartitionReplica

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        [described] = admin.describe_log_dirs()
        target = described["log_dirs"][0]["log_dir"]
        replica = TopicPartitionReplica(topic, 0, described["broker"])
        return {"result": admin.alter_replica_log_dirs({replica: target}), "replica": replica}
    finally:
        admin.close()


@pytest.mark.interop
async def test_kafka_python_alter_replica_log_dirs(broker):
    from kafka.errors import NoError

    await broker.create_topic("kpm", 1)
    answer = await trio.to_thread.run_sync(_kafka_python_move, broker.bootstrap, "kpm")
    assert answer["result"] == {answer["replica"]: NoError}
