"""`quorumlog up --secure`'s layout on 3 real node processes: every Kafka listener is SASL_SSL,
a SCRAM user added through AlterUserScramCredentials (forwarded to the active controller, in
the metadata log) reads the records back on the survivors;
replica fetchers log in over TLS with SCRAM-SHA-512 as the generated broker user, clients use
DIR/client.properties. acks=all produce completes only if the followers replicate (over the
secure inter-broker listener); the partition leader is killed with -9 and every acknowledged
record is still read afterwards, from the survivors. The nodes run the StandardAuthorizer with
the admin and broker users as super users: the new user reads only once an ACL (CreateAcls,
forwarded to the active controller) lets it, may never write, and the ACL outlives a kill -9
of the active controller: enforced by the survivors, replayed by the restarted node."""

from __future__ import annotations

import pytest
import trio

from log.common.node_config import NODE_CONFIG_FILE, to_toml
from tests.node import cluster_harness
from tests.node.cluster_harness import PASSWORD, TEST_PROPS, Cluster, free_base_port, wait_until
from tools.cluster_layout import ClusterLayout
from tools.secure_cluster import client_settings, secure_properties

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TOPIC = "secure"
N = 100
TXN = 10  # records of the committed transaction


@pytest.fixture(autouse=True)
def _kill_node_processes():
    yield
    cluster_harness.kill_started()


def secure_cluster(tmp_path) -> Cluster:
    layout = ClusterLayout(tmp_path, 3, free_base_port(3), secure=True)
    security = secure_properties(tmp_path, layout.node_ids)
    for node_id in layout.node_ids:
        node_dir = layout.node_dir(node_id)
        node_dir.mkdir(parents=True)
        props = layout.node_properties(node_id, "test-cluster", PASSWORD, security[node_id])
        (node_dir / NODE_CONFIG_FILE).write_text(to_toml({**props, **TEST_PROPS}))
    return Cluster(tmp_path, 3, base_port=layout.base_port)


def _produce(bootstrap: str, settings: dict, start: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **settings})
    failures: list = []
    for i in range(start, start + N):
        producer.produce(TOPIC, value=b"v%d" % i,
                         on_delivery=lambda err, msg: err and failures.append(err))  # fmt: skip
    assert producer.flush(60) == 0 and not failures, failures


def _allow_read(bootstrap: str, settings: dict, principal: str) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap, **settings})
    binding = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, principal, "*",
                         AclOperation.READ, AclPermissionType.ALLOW)  # fmt: skip
    for future in admin.create_acls([binding]).values():
        future.result(timeout=30)


def _write_allowed(bootstrap: str, settings: dict) -> bool:
    from confluent_kafka import Producer

    delivered: list[bool] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 5_000,
                         "enable.idempotence": False, **settings})  # fmt: skip
    producer.produce(TOPIC, b"nope", on_delivery=lambda err, msg: delivered.append(err is None))
    producer.flush(20)
    return delivered == [True]


def _transaction(bootstrap: str, settings: dict) -> None:
    """A committed transaction: the coordinator's markers travel over the secure inter-broker
    listener like replica fetches; a read_committed reader sees its records."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "secure-txn",
                         **settings})  # fmt: skip
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(N, N + TXN):
        producer.produce(TOPIC, value=b"v%d" % i)
    producer.commit_transaction(60)


def _consume(bootstrap: str, settings: dict, count: int, polls: int = 600) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                         "topic.metadata.refresh.interval.ms": 500, **settings})  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    values: list[bytes] = []
    try:
        for _ in range(polls):
            for msg in consumer.consume(500, 0.1):
                if msg.error() is None:
                    values.append(msg.value())
            if len(values) >= count:
                break
    finally:
        consumer.close()
    return values


async def test_secure_cluster_survives_a_leader_kill(tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = secure_cluster(tmp_path)
    cluster.start_all()
    settings = client_settings(tmp_path)
    assert settings["security.protocol"] == "SASL_SSL"
    bootstrap = cluster.layout.bootstrap_servers

    def create() -> None:
        admin = AdminClient({"bootstrap.servers": bootstrap, **settings})
        admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(timeout=30)

    await trio.to_thread.run_sync(create)

    def add_user() -> None:  # AlterUserScramCredentials, forwarded to the active controller
        from confluent_kafka.admin import (
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        admin = AdminClient({"bootstrap.servers": bootstrap, **settings})
        upsert = UserScramCredentialUpsertion(
            "reader", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"reader-pw"
        )
        admin.alter_user_scram_credentials([upsert])["reader"].result(timeout=30)

    await trio.to_thread.run_sync(add_user)
    await trio.to_thread.run_sync(_produce, bootstrap, settings, 0)
    await trio.to_thread.run_sync(_transaction, bootstrap, settings)
    reader = {**settings, "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "reader",
              "sasl.password": "reader-pw", "isolation.level": "read_committed"}  # fmt: skip
    assert await trio.to_thread.run_sync(_consume, bootstrap, reader, 1, 20) == []  # no ACL yet
    await trio.to_thread.run_sync(_allow_read, bootstrap, settings, "User:reader")
    assert not await trio.to_thread.run_sync(_write_allowed, bootstrap, reader)

    image = await cluster.image_from(1)
    state = image.topic(TOPIC).partitions[0]  # type: ignore[union-attr]
    assert sorted(state.isr) == [1, 2, 3]  # the followers fetched over SASL_SSL
    leader = state.leader
    cluster.kill9(leader)
    survivor = next(n for n in (1, 2, 3) if n != leader)

    async def new_leader() -> bool:
        image = await cluster.image_from(survivor)
        return image.topic(TOPIC).partitions[0].leader not in (leader, -1)  # type: ignore[union-attr]

    assert await wait_until(new_leader, 30)
    alive = ",".join(f"127.0.0.1:{cluster.layout.kafka_port(n)}" for n in (1, 2, 3) if n != leader)
    await trio.to_thread.run_sync(_produce, alive, settings, N + TXN)
    values = await trio.to_thread.run_sync(_consume, alive, reader, 2 * N + TXN)
    assert values == [b"v%d" % i for i in range(2 * N + TXN)]

    # The ACL outlives the active controller: restart the killed node, kill -9 the controller
    cluster.start(leader)
    cluster.wait_ready(leader)
    controller_id = (await cluster.image_from(survivor)).controller_id
    cluster.kill9(controller_id)
    others = [n for n in (1, 2, 3) if n != controller_id]

    async def new_controller() -> bool:
        image = await cluster.image_from(others[0])
        return image.controller_id not in (controller_id, -1)

    assert await wait_until(new_controller, 30)
    alive = ",".join(f"127.0.0.1:{cluster.layout.kafka_port(n)}" for n in others)
    values = await trio.to_thread.run_sync(_consume, alive, reader, 2 * N + TXN)
    assert values == [b"v%d" % i for i in range(2 * N + TXN)]
    assert not await trio.to_thread.run_sync(_write_allowed, alive, reader)
    cluster.start(controller_id)
    cluster.wait_ready(controller_id)
    image = await cluster.image_from(controller_id)
    assert [(a.principal, a.resource_name) for a in image.acls.values()] == [("User:reader", TOPIC)]
    for node_id in (1, 2, 3):  # no node refused a broker's login
        assert not cluster.log_matches(node_id, "authentication of .* failed"), node_id
