"""ACLs end to end with a real client: confluent-kafka (librdkafka) over SASL_PLAINTEXT against
a broker with `authorizer.class.name` set (StandardAuthorizer semantics), `alice` a super user
and `bob` an ordinary user. ACLs are created, described and deleted with the AdminClient
(CreateAcls / DescribeAcls / DeleteAcls through the metadata log), and each client operation
is allowed or refused with Kafka's error codes as the ACLs change: WRITE/READ on topics (literal,
prefixed, wildcard), DENY over ALLOW, group READ, Metadata hiding what bob may not describe."""

from __future__ import annotations

import pytest
import trio

from tests.security.conftest import USERS, start_secure_broker

pytestmark = pytest.mark.interop

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _conf(bootstrap: str, user: str) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


def _binding(spec: tuple):
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    resource, name, pattern, principal, operation, permission = spec
    return AclBinding(getattr(ResourceType, resource), name, getattr(ResourcePatternType, pattern),
                      principal, "*", getattr(AclOperation, operation),
                      getattr(AclPermissionType, permission))  # fmt: skip


def _create_acls(bootstrap: str, user: str, specs: list[tuple]) -> list[str | None]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(_conf(bootstrap, user))
    futures = admin.create_acls([_binding(spec) for spec in specs], request_timeout=20)
    results = []
    for future in futures.values():
        try:
            future.result(timeout=20)
            results.append(None)
        except Exception as exc:  # KafkaException carrying the broker's error
            results.append(exc.args[0].name())
    return results


def _every_acl_of(principal: str | None):
    """A filter matching every ACL binding of `principal` (None: of anyone)."""
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
                            AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip


def _describe_acls(bootstrap: str, user: str, principal: str | None = None) -> list | str:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(_conf(bootstrap, user))
    acl_filter = _every_acl_of(principal)
    try:
        found = admin.describe_acls(acl_filter, request_timeout=20).result(timeout=20)
    except Exception as exc:
        return exc.args[0].name()
    return sorted(
        (b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.operation.name,
         b.permission_type.name)
        for b in found
    )  # fmt: skip


def _delete_acls(bootstrap: str, user: str, principal: str) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(_conf(bootstrap, user))
    acl_filter = _every_acl_of(principal)
    (future,) = admin.delete_acls([acl_filter], request_timeout=20).values()
    return len(future.result(timeout=20))


def _produce(bootstrap: str, user: str, topic: str) -> str | None:
    """None when one message is delivered, else the delivery error's name."""
    from confluent_kafka import Producer

    errors: list = []
    producer = Producer({**_conf(bootstrap, user), "message.timeout.ms": 10_000,
                         "enable.idempotence": False})  # fmt: skip
    producer.produce(topic, b"v", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(20)
    assert len(errors) == 1
    return None if errors[0] is None else errors[0].name()


def _consume(bootstrap: str, user: str, topic: str, group: str) -> str | None:
    """None when the group consumer reads a message, else the first error's name."""
    from confluent_kafka import Consumer

    consumer = Consumer({**_conf(bootstrap, user), "group.id": group,
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})  # fmt: skip
    consumer.subscribe([topic])
    try:
        for _ in range(100):
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            return None if msg.error() is None else msg.error().name()
        return "NOTHING"
    finally:
        consumer.close()


def _topics(bootstrap: str, user: str) -> set[str]:
    from confluent_kafka.admin import AdminClient

    return set(AdminClient(_conf(bootstrap, user)).list_topics(timeout=20).topics)


@pytest.fixture
async def broker(nursery, tmp_path, pki):
    return await start_secure_broker(
        nursery, tmp_path, pki, **{"authorizer.class.name": STANDARD, "super.users": "User:alice"}
    )


async def _run(fn, *args):
    return await trio.to_thread.run_sync(fn, *args)


async def test_acls_are_created_described_and_deleted_by_a_super_user_only(broker):
    bootstrap = broker.bootstrap("SASL_PLAINTEXT")
    specs = [("TOPIC", "orders", "LITERAL", "User:bob", "READ", "ALLOW"),
             ("GROUP", "g", "PREFIXED", "User:bob", "READ", "ALLOW")]  # fmt: skip
    assert await _run(_create_acls, bootstrap, "alice", specs) == [None, None]
    assert await _run(_describe_acls, bootstrap, "alice", "User:bob") == sorted(
        [
            ("TOPIC", "orders", "LITERAL", "User:bob", "READ", "ALLOW"),
            ("GROUP", "g", "PREFIXED", "User:bob", "READ", "ALLOW"),
        ]  # fmt: skip
    )
    assert len(broker.quorum.image.acls) == 2
    # bob may not manage ACLs (ALTER / DESCRIBE on the cluster)
    refused = await _run(_create_acls, bootstrap, "bob", [specs[0]])
    assert refused == ["CLUSTER_AUTHORIZATION_FAILED"]
    # (librdkafka answers an empty list for DescribeAcls' top-level error: count the refusal)
    denied = broker.server.ctx.authorization.denied_count
    assert await _run(_describe_acls, bootstrap, "bob") in ([], "CLUSTER_AUTHORIZATION_FAILED")
    assert broker.server.ctx.authorization.denied_count == denied + 1
    # a CLUSTER resource has one name (INVALID_REQUEST otherwise)
    bad = [("BROKER", "c", "LITERAL", "User:bob", "ALTER", "ALLOW")]
    assert await _run(_create_acls, bootstrap, "alice", bad) == ["INVALID_REQUEST"]
    assert await _run(_delete_acls, bootstrap, "alice", "User:bob") == 2
    assert await _run(_describe_acls, bootstrap, "alice") == []
    assert broker.quorum.image.acls == {}


async def test_produce_matrix_literal_prefixed_wildcard_and_deny(broker):
    bootstrap = broker.bootstrap("SASL_PLAINTEXT")
    for topic in ("orders", "pay.in", "other"):
        await broker.create_topic(topic)
    assert await _run(_produce, bootstrap, "alice", "orders") is None  # super user
    assert await _run(_produce, bootstrap, "bob", "orders") == "TOPIC_AUTHORIZATION_FAILED"

    allow = [("TOPIC", "orders", "LITERAL", "User:bob", "WRITE", "ALLOW"),
             ("TOPIC", "pay.", "PREFIXED", "User:bob", "WRITE", "ALLOW")]  # fmt: skip
    assert await _run(_create_acls, bootstrap, "alice", allow) == [None, None]
    assert await _run(_produce, bootstrap, "bob", "orders") is None
    assert await _run(_produce, bootstrap, "bob", "pay.in") is None
    assert await _run(_produce, bootstrap, "bob", "other") == "TOPIC_AUTHORIZATION_FAILED"

    deny = [("TOPIC", "pay.in", "LITERAL", "User:bob", "WRITE", "DENY")]
    assert await _run(_create_acls, bootstrap, "alice", deny) == [None]
    assert await _run(_produce, bootstrap, "bob", "pay.in") == "TOPIC_AUTHORIZATION_FAILED"
    assert await _run(_produce, bootstrap, "bob", "orders") is None

    everyone = [("TOPIC", "*", "LITERAL", "User:*", "WRITE", "ALLOW")]
    assert await _run(_create_acls, bootstrap, "alice", everyone) == [None]
    assert await _run(_produce, bootstrap, "bob", "other") is None
    assert await _run(_produce, bootstrap, "bob", "pay.in") == "TOPIC_AUTHORIZATION_FAILED"
    assert broker.server.ctx.authorization.denied_count >= 4
    exposition = broker.server.metrics.exposition().decode()
    (line,) = [
        x for x in exposition.splitlines() if x.startswith("quorumlog_authorization_denials")
    ]
    assert float(line.split()[-1]) == broker.server.ctx.authorization.denied_count


async def test_consumer_needs_topic_and_group_read_and_metadata_hides_topics(broker):
    bootstrap = broker.bootstrap("SASL_PLAINTEXT")
    for topic in ("orders", "secret"):
        await broker.create_topic(topic)
        assert await _run(_produce, bootstrap, "alice", topic) is None
    assert await _run(_topics, bootstrap, "bob") == set()
    assert {"orders", "secret"} <= await _run(_topics, bootstrap, "alice")

    topic_read = [("TOPIC", "orders", "LITERAL", "User:bob", "READ", "ALLOW")]
    assert await _run(_create_acls, bootstrap, "alice", topic_read) == [None]
    assert await _run(_topics, bootstrap, "bob") == {"orders"}  # READ implies DESCRIBE
    # no READ on the group: the consumer cannot join
    assert await _run(_consume, bootstrap, "bob", "orders", "g1") == "GROUP_AUTHORIZATION_FAILED"

    group_read = [("GROUP", "g", "PREFIXED", "User:bob", "READ", "ALLOW")]
    assert await _run(_create_acls, bootstrap, "alice", group_read) == [None]
    assert await _run(_consume, bootstrap, "bob", "orders", "g1") is None
    assert await _run(_consume, bootstrap, "bob", "secret", "g2") == "TOPIC_AUTHORIZATION_FAILED"


def _idempotent_produce(bootstrap: str, user: str, topic: str) -> bool:
    """Whether an idempotent producer (InitProducerId first) delivers one message. (A refused
    InitProducerId is a fatal error whose KafkaError confluent-kafka cannot even render.)"""
    from confluent_kafka import Producer

    delivered: list[bool] = []
    producer = Producer({**_conf(bootstrap, user), "message.timeout.ms": 5_000,
                         "enable.idempotence": True})  # fmt: skip
    producer.produce(topic, b"v", on_delivery=lambda err, msg: delivered.append(err is None))
    producer.flush(20)
    return delivered == [True]


async def test_idempotent_producer_needs_write_on_some_topic(broker):
    bootstrap = broker.bootstrap("SASL_PLAINTEXT")
    await broker.create_topic("orders")
    denied = broker.server.ctx.authorization.denied_count
    assert not await _run(_idempotent_produce, bootstrap, "bob", "orders")
    assert broker.server.ctx.authorization.denied_count > denied  # InitProducerId refused
    write = [("TOPIC", "orders", "LITERAL", "User:bob", "WRITE", "ALLOW")]
    assert await _run(_create_acls, bootstrap, "alice", write) == [None]
    assert await _run(_idempotent_produce, bootstrap, "bob", "orders")


def _cli(*args: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "tools", "acls", *args],
                          capture_output=True, text=True, timeout=60)  # fmt: skip


async def test_acls_cli_add_list_remove(broker, tmp_path):
    properties = tmp_path / "client.properties"
    conf = _conf(broker.bootstrap("SASL_PLAINTEXT"), "alice")
    properties.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    common = ["--bootstrap", conf["bootstrap.servers"], "--command-config", str(properties)]
    added = await _run(lambda: _cli("add", "--allow-principal", "User:bob", "--operation", "Read",
                                    "--operation", "describeconfigs", "--topic", "pay.",
                                    "--resource-pattern-type", "prefixed", *common))  # fmt: skip
    assert added.returncode == 0, added.stderr
    denied = await _run(lambda: _cli("add", "--deny-principal", "User:eve", "--operation", "All",
                                     "--cluster", *common))  # fmt: skip
    assert denied.returncode == 0, denied.stderr
    listed = await _run(lambda: _cli("list", "--json", *common))
    assert listed.returncode == 0, listed.stderr
    import json

    rows = {(r["resource"], r["name"], r["pattern"], r["principal"], r["operation"],
             r["permission"]) for r in json.loads(listed.stdout)}  # fmt: skip
    assert rows == {
        ("TOPIC", "pay.", "PREFIXED", "User:bob", "READ", "ALLOW"),
        ("TOPIC", "pay.", "PREFIXED", "User:bob", "DESCRIBE_CONFIGS", "ALLOW"),
        ("CLUSTER", "kafka-cluster", "LITERAL", "User:eve", "ALL", "DENY"),
    }
    removed = await _run(lambda: _cli("remove", "--topic", "pay.", "--resource-pattern-type",
                                      "prefixed", *common))  # fmt: skip
    assert removed.returncode == 0 and "2 ACL(s) removed" in removed.stdout, removed.stderr
    assert len(broker.quorum.image.acls) == 1
    bob = {**conf, "sasl.username": "bob", "sasl.password": USERS["bob"]}
    properties.write_text("".join(f"{k}={v}\n" for k, v in bob.items()))
    refused = await _run(lambda: _cli("add", "--allow-principal", "User:bob", "--operation",
                                      "All", "--cluster", *common))  # fmt: skip
    assert refused.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr


def _commit(bootstrap: str, user: str, group: str, offsets: dict[str, int]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**_conf(bootstrap, user), "group.id": group})
    try:
        partitions = [TopicPartition(t, 0, o) for t, o in offsets.items()]
        consumer.commit(offsets=partitions, asynchronous=False)
    finally:
        consumer.close()


def _group_offsets(bootstrap: str, user: str, group: str) -> dict[str, int] | str:
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(_conf(bootstrap, user))
    (future,) = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    try:
        result = future.result(timeout=20)
    except Exception as exc:
        return exc.args[0].name()
    return {tp.topic: tp.offset for tp in result.topic_partitions}


async def test_offset_fetch_needs_group_describe_and_leaves_out_hidden_topics(broker):
    bootstrap = broker.bootstrap("SASL_PLAINTEXT")
    for topic in ("orders", "secret"):
        await broker.create_topic(topic)
        assert await _run(_produce, bootstrap, "alice", topic) is None
    await _run(_commit, bootstrap, "alice", "gx", {"orders": 1, "secret": 1})
    assert await _run(_group_offsets, bootstrap, "alice", "gx") == {"orders": 1, "secret": 1}
    assert await _run(_group_offsets, bootstrap, "bob", "gx") == "GROUP_AUTHORIZATION_FAILED"
    acls = [("GROUP", "gx", "LITERAL", "User:bob", "DESCRIBE", "ALLOW"),
            ("TOPIC", "orders", "LITERAL", "User:bob", "DESCRIBE", "ALLOW")]  # fmt: skip
    assert await _run(_create_acls, bootstrap, "alice", acls) == [None, None]
    assert await _run(_group_offsets, bootstrap, "bob", "gx") == {"orders": 1}


def _authorized_operations(bootstrap: str, user: str) -> tuple[set[str], set[str]]:
    """(cluster operations, operations on topic `orders`) as confluent-kafka reports them."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(_conf(bootstrap, user))
    cluster = admin.describe_cluster(include_authorized_operations=True).result(timeout=20)
    (topic,) = admin.describe_topics(
        TopicCollection(["orders"]), include_authorized_operations=True
    ).values()
    described = topic.result(timeout=20)
    return ({op.name for op in cluster.authorized_operations or ()},
            {op.name for op in described.authorized_operations or ()})  # fmt: skip


async def test_authorized_operations_kip_430(broker):
    bootstrap = broker.bootstrap("SASL_PLAINTEXT")
    await broker.create_topic("orders")
    cluster_ops, topic_ops = await _run(_authorized_operations, bootstrap, "alice")
    assert {"ALTER", "DESCRIBE", "CLUSTER_ACTION", "IDEMPOTENT_WRITE"} <= cluster_ops
    assert {"READ", "WRITE", "DELETE", "DESCRIBE_CONFIGS"} <= topic_ops
    read = [("TOPIC", "orders", "LITERAL", "User:bob", "READ", "ALLOW")]
    assert await _run(_create_acls, bootstrap, "alice", read) == [None]
    assert await _run(_authorized_operations, bootstrap, "bob") == (set(), {"READ", "DESCRIBE"})


def _transaction(bootstrap: str, user: str, topic: str) -> str | None:
    """A committed transaction by `user` with transactional id "tx-bob": None, or the error."""
    from confluent_kafka import KafkaException, Producer

    producer = Producer({**_conf(bootstrap, user), "transactional.id": "tx-bob"})
    try:
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.produce(topic, b"t")
        producer.commit_transaction(15)
    except KafkaException as exc:
        return exc.args[0].name()
    return None


async def test_transactions_need_write_on_the_transactional_id_and_the_topic(broker):
    bootstrap = broker.bootstrap("SASL_PLAINTEXT")
    await broker.create_topic("orders")
    write = [("TOPIC", "orders", "LITERAL", "User:bob", "WRITE", "ALLOW")]
    assert await _run(_create_acls, bootstrap, "alice", write) == [None]
    # no ACL on the transactional id: FindCoordinator / InitProducerId refuse it
    assert await _run(_transaction, bootstrap, "bob", "orders") == (
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    )
    txn_id = [("TRANSACTIONAL_ID", "tx-", "PREFIXED", "User:bob", "WRITE", "ALLOW")]
    assert await _run(_create_acls, bootstrap, "alice", txn_id) == [None]
    assert await _run(_transaction, bootstrap, "bob", "orders") is None  # WRITE implies DESCRIBE
