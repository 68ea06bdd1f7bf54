"""A broker whose process dies is fenced as soon as its heartbeat connection closes (plus
broker.disconnect.fence.ms), not after broker.session.timeout.ms: real processes, kill -9.

The session timeout here is 60 s, so anything fenced within the test's bounds was fenced by
the closed connection; a fresh controller (the old one killed with its broker) does the same
for a broker that never reaches it. Live brokers are never fenced on the way.
"""

from __future__ import annotations

import pytest
import trio
from cluster_harness import TEST_PROPS, Cluster, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

SESSION_TIMEOUT_MS = 60_000
FENCED_WITHIN_S = 20  # far below the session timeout: only the closed connection explains it


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    monkeypatch.setitem(TEST_PROPS, "broker.session.timeout.ms", SESSION_TIMEOUT_MS)
    cluster = Cluster(tmp_path, 3)
    cluster.start_all()
    yield cluster
    cluster.stop_all()


async def _wait_fenced(cluster: Cluster, reader: int, broker_id: int, fenced: bool = True):
    async def check():
        image = await cluster.image_from(reader)
        broker = image.brokers.get(broker_id)
        return image if broker is not None and broker.fenced == fenced else None

    return await wait_until(check, FENCED_WITHIN_S)


def _fenced_lines(cluster: Cluster, node_ids) -> list[str]:
    return [
        m.group(0)
        for n in node_ids
        for m in cluster.log_matches(n, r"broker fenced node=\d+ broker=\d+ reason=\w+")
    ]


async def test_a_killed_broker_is_fenced_when_its_connection_closes_and_rejoins_at_once(cluster):
    await _wait_fenced(cluster, 1, 3, fenced=False)
    image = await cluster.image_from(1)
    controller = image.controller_id
    victim = next(n for n in (1, 2, 3) if n != controller)
    survivor = next(n for n in (1, 2, 3) if n not in (controller, victim))

    cluster.kill9(victim)
    await _wait_fenced(cluster, controller, victim)

    async def logged() -> list[str]:
        # The controller logs the fence once its commit returns to the fencing task, which
        # may be a moment after the committed image already shows it.
        return _fenced_lines(cluster, [controller])

    assert await wait_until(logged, 5) == [
        f"broker fenced node={controller} broker={victim} reason=controller_connection_lost"
    ]
    # Its old session ended with the connection: a restart registers at once (no
    # DUPLICATE_BROKER_REGISTRATION until a 60 s session expires) and is unfenced.
    cluster.start(victim)
    cluster.wait_ready(victim)
    await _wait_fenced(cluster, controller, victim, fenced=False)

    # Now the active controller's node dies: the new controller has no connection from it
    # and fences it within the grace; the two live brokers reach the new controller in time.
    cluster.kill9(controller)
    live = [victim, survivor]
    image = await _wait_fenced(cluster, survivor, controller)
    assert image.controller_id in live
    assert all(not image.brokers[b].fenced for b in live)
    with trio.move_on_after(2):  # and stay unfenced
        await _wait_fenced(cluster, survivor, victim)
        raise AssertionError(f"live broker {victim} was fenced")
    lines = _fenced_lines(cluster, live)
    assert all(f"broker={controller} " in line for line in lines), lines


async def _metadata_twice(port: int, topic: str):
    """Two Metadata answers about `topic` on one connection."""
    from log.protocol.metadata import METADATA_REQUEST
    from tests.broker.conftest import WireClient

    M = METADATA_REQUEST.cls
    client = await WireClient.connect(port)
    try:
        ask = M(topics=[M.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)
        answers = []
        for _ in range(2):
            await client.send(3, 12, ask)
            with trio.fail_after(FENCED_WITHIN_S):
                answers.append(await client.receive())
        return answers
    finally:
        await client.aclose()


async def test_after_a_leader_kill_metadata_names_the_new_leader_and_producers_send_on(
    tmp_path, monkeypatch
):
    """kill -9 of a partition leader, with the fence 2 s after its connection closed so the
    questions below come first. A survivor's Metadata answer waits for the new leader instead
    of naming the dead one (its fetcher lost the leader at once), and still lists the dead
    broker, once on a connection (so librdkafka moves the partition before it decommissions
    the broker); DescribeCluster lists only live brokers. Our producer with
    every default (request.timeout.ms 30 s, metadata.max.age.ms 5 min) sends on: before,
    its metadata refresh retried the dead node until request.timeout.ms and nothing asked for
    a refresh when the leader's connection was refused, so a record waited 30 s or more."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from log.protocol.admin import DESCRIBE_CLUSTER_REQUEST
    from producer.producer import Producer
    from tests.broker.conftest import WireClient

    monkeypatch.setitem(TEST_PROPS, "broker.session.timeout.ms", SESSION_TIMEOUT_MS)
    monkeypatch.setitem(TEST_PROPS, "broker.disconnect.fence.ms", 2000)
    cluster = Cluster(tmp_path, 3)
    try:
        cluster.start_all()
        bootstrap = cluster.layout.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = NewTopic("orders", 1, 3, config={"min.insync.replicas": "2"})
        await trio.to_thread.run_sync(lambda: admin.create_topics([topic])["orders"].result(30))
        async with Producer(bootstrap) as producer:
            await producer.send("orders", b"before", partition=0)
            with trio.fail_after(30):
                await producer.flush()
            image = await cluster.image_from(1)
            leader = image.topic("orders").partitions[0].leader
            survivor = next(n for n in (1, 2, 3) if n != leader)
            cluster.kill9(leader)
            handle = await producer.send("orders", b"after", partition=0)
            await trio.sleep(0.2)  # the survivors' fetchers saw the connection go; no fence yet
            first, second = await _metadata_twice(cluster.layout.kafka_port(survivor), "orders")
            (partition,) = first.topics[0].partitions
            assert partition.leader_id not in (leader, -1), partition
            assert leader in {b.node_id for b in first.brokers}
            assert leader not in {b.node_id for b in second.brokers}
            client = await WireClient.connect(cluster.layout.kafka_port(survivor))
            described = await client.call(60, 0, DESCRIBE_CLUSTER_REQUEST.cls())
            await client.aclose()
            assert sorted(b.broker_id for b in described.brokers) == sorted(
                n for n in (1, 2, 3) if n != leader
            )
            with trio.fail_after(FENCED_WITHIN_S):
                await producer.flush()
            assert handle.error is None, handle.error
    finally:
        cluster.stop_all()


async def test_a_lone_node_killed_with_9_registers_again_at_once(tmp_path, monkeypatch):
    """One combined node, kill -9, restart: the new controller counts every broker's session
    alive for a session timeout after taking over, except its own node's broker, whose old
    incarnation lived in the process that died: it registers on its first try."""
    monkeypatch.setitem(TEST_PROPS, "broker.session.timeout.ms", SESSION_TIMEOUT_MS)
    cluster = Cluster(tmp_path, 1)
    try:
        cluster.start_all()
        cluster.kill9(1)
        cluster.start(1)
        with trio.fail_after(FENCED_WITHIN_S):
            await trio.to_thread.run_sync(cluster.wait_ready, 1)
        assert cluster.log_matches(1, "DUPLICATE_BROKER_REGISTRATION") == []
    finally:
        cluster.stop_all()


async def test_a_controller_whose_journal_disk_fills_stops_its_node(tmp_path):
    """The metadata directory on a 4 MiB tmpfs that fills up: the next metadata commit cannot
    be journaled, so the node exits (non-zero, the reason logged) instead of serving on."""
    import contextlib

    from tests.disk_faults import fill_up, small_tmpfs
    from tools.admin_client import AdminClient

    cluster = Cluster(tmp_path, 1)
    metadata = cluster.config(1).metadata_dir
    with small_tmpfs(metadata, "4m"):
        try:
            cluster.start_all()
            fill_up(metadata)
            with contextlib.suppress(Exception), trio.move_on_after(10):
                async with AdminClient(cluster.layout.bootstrap_servers) as admin:
                    await admin.create_topic("t", 1, 1)
            process = cluster.processes[1]
            with trio.fail_after(30):
                while process.poll() is None:
                    await trio.sleep(0.1)
            assert process.returncode != 0
            assert "raft node stops" in cluster.log(1), cluster.log(1)[-2000:]
        finally:
            cluster.stop_all()
