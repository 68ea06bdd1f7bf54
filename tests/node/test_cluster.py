"""Real-process tests of the node runtime: 3 combined nodes (+ a broker-only node).

Heartbeat 200 ms, session 1.5 s (cluster_harness.TEST_PROPS). Controller state is read with
MetadataFetch from a chosen controller; what a broker replayed, from its partition log lines.
The tests that need no cluster of their own share one (3 controllers + broker-only node 4, each
test with topics of its own names); a node one of them stopped is started again, and ready,
before the next one runs. Those that kill the cluster whole or start it in pieces have their own.
"""

from __future__ import annotations

import json
import time

import pytest
import trio
from cluster_harness import SESSION_TIMEOUT_MS, Cluster, wait_until

from log.common.errors import ErrorCode
from quorum import controller as c

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
NODES = (1, 2, 3, 4)  # the shared cluster: controllers 1-3, broker-only node 4


@pytest.fixture(scope="module")
def module_cluster(tmp_path_factory):
    cluster = Cluster(tmp_path_factory.mktemp("cluster"), len(NODES), shared=True)
    try:
        started = time.monotonic()
        cluster.start_all()
        print(f"{len(NODES)} nodes ready in {time.monotonic() - started:.2f}s")
        yield cluster
    finally:
        cluster.stop_all()


@pytest.fixture
def cluster(module_cluster):
    """The shared cluster, every node running (what an earlier test stopped is started again)."""
    stopped = [n for n in module_cluster.layout.node_ids if n not in module_cluster.processes]
    for node_id in stopped:
        module_cluster.start(node_id)
    for node_id in stopped:
        module_cluster.wait_ready(node_id)
    return module_cluster


async def _all_unfenced(cluster: Cluster, node_id: int, broker_ids) -> bool:
    """Whether controller `node_id`'s image shows every broker unfenced (within 5 s: a
    follower controller applies a moment after the leader)."""

    async def check():
        image = await cluster.image_from(node_id)
        return all(b in image.brokers and not image.brokers[b].fenced for b in broker_ids)

    return await wait_until(check, 5)


async def _create_topic(cluster: Cluster, name: str, partitions: int, rf: int):
    client = cluster.client()
    try:
        with trio.fail_after(20):
            response = await client.create_topics(
                c.CreateTopicsRequest((c.CreatableTopic(name, partitions, rf),))
            )
    finally:
        await client.aclose()
    assert response.results[0].error_code == ErrorCode.NONE, response
    return response


def _broker_saw(cluster: Cluster, node_id: int, topic: str, partition: int) -> bool:
    return bool(cluster.log_matches(node_id, rf"partition {topic}-{partition} leader=\d"))


async def test_restart_all_keeps_image_and_producer_ids_move_on(tmp_path):
    cluster = Cluster(tmp_path, 3)
    cluster.start_all()
    await _create_topic(cluster, "events", 2, 3)
    handed_out = []
    client = cluster.client()
    try:
        for _ in range(12):  # > metadata.log.max.record.count.between.snapshots: checkpoints
            image = await cluster.image_from(1)
            broker = image.brokers[2]
            with trio.fail_after(20):
                r = await client.allocate_producer_ids(
                    c.AllocateProducerIdsRequest(2, broker.broker_epoch)
                )
            assert r.error_code == ErrorCode.NONE, r
            handed_out.append((r.producer_id_start, r.producer_id_len))
    finally:
        await client.aclose()
    starts = [s for s, _ in handed_out]
    assert starts == sorted(set(starts))

    # Restart one controller from its journal + checkpoint: it rebuilds the same image as
    # the others (its re-registration as a new incarnation changes ISRs, on every node alike).
    assert (tmp_path / "node-3" / "metadata" / "raft.checkpoint").exists()
    cluster.kill9(3)
    cluster.start(3)
    cluster.wait_ready(3)

    async def same_image():
        one, three = await cluster.image_from(1), await cluster.image_from(3)
        return one if one == three and not one.brokers[3].fenced else None

    image_before = await wait_until(same_image, 10)
    assert (tmp_path / "node-3" / "metadata" / "raft.checkpoint").exists()

    # kill -9 everything, restart: same image, producer ids continue above every block.
    cluster.stop_all()
    cluster.start_all()
    image_after = await cluster.image_from(1)
    topic_before, topic_after = image_before.topic("events"), image_after.topic("events")
    assert topic_after.topic_id == topic_before.topic_id
    for p, state in topic_after.partitions.items():
        assert state.replicas == topic_before.partitions[p].replicas
        assert state.leader_epoch >= topic_before.partitions[p].leader_epoch
    assert image_after.next_producer_id == image_before.next_producer_id
    client = cluster.client()
    try:
        broker = image_after.brokers[1]
        with trio.fail_after(20):
            r = await client.allocate_producer_ids(
                c.AllocateProducerIdsRequest(1, broker.broker_epoch)
            )
    finally:
        await client.aclose()
    assert r.error_code == ErrorCode.NONE
    assert r.producer_id_start >= max(s + n for s, n in handed_out)

    # SIGTERM one node after the other, restart: each node registers on its first try. The
    # last one stopped could not reach a quorum for its controlled shutdown, so the image
    # still shows it unfenced, and a controller that just took over counts its old session
    # alive; its clean-shutdown marker names the broker epoch it ended, which the controller
    # accepts as the end of that session (KIP-966's previous broker epoch).
    image = await cluster.image_from(1)
    ended = {node_id: image.brokers[node_id].broker_epoch for node_id in cluster.layout.node_ids}
    for node_id in cluster.layout.node_ids:
        assert cluster.terminate(node_id, timeout_s=30) == 0
    refused_before = {
        n: len(cluster.log_matches(n, "DUPLICATE_BROKER_REGISTRATION")) for n in ended
    }
    for node_id, broker_epoch in ended.items():
        marker = tmp_path / f"node-{node_id}" / "kafka-logs" / ".kafka_cleanshutdown"
        assert json.loads(marker.read_text())["broker_epoch"] == broker_epoch
        # Kafka's 9 s session from here on: the last node to stop could not reach a quorum for
        # its controlled shutdown, so it is still unfenced in the image, and a new controller
        # counts its old session alive for a whole session timeout after taking over.
        config = tmp_path / f"node-{node_id}" / "node.toml"
        config.write_text(config.read_text().replace(
            f'"broker.session.timeout.ms" = {SESSION_TIMEOUT_MS}',
            '"broker.session.timeout.ms" = 9000',
        ))  # fmt: skip
    cluster.start_all()
    for node_id in ended:
        refused = len(cluster.log_matches(node_id, "DUPLICATE_BROKER_REGISTRATION"))
        assert refused == refused_before[node_id], cluster.log(node_id)[-3000:]


async def test_kafka_client_produces_and_consumes_through_the_cluster(cluster):
    """confluent-kafka against 3 real nodes: CreateTopics forwarded to the controller, an
    (rf=1: partition replication is not in the broker yet)
    idempotent acks=all producer (InitProducerId -> AllocateProducerIds), a consumer."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = cluster.layout.bootstrap_servers

    def produce_and_consume() -> list[bytes]:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_topics([NewTopic("clicks", num_partitions=2, replication_factor=1)])
        futures["clicks"].result(timeout=30)
        t0 = time.monotonic()
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"}
        )
        for i in range(20):
            producer.produce("clicks", value=b"v%d" % i, key=b"k%d" % i)
        assert producer.flush(30) == 0
        print(f"produced 20 records (idempotent, acks=all) in {time.monotonic() - t0:.2f}s")
        t0 = time.monotonic()
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "g",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        consumer.assign([confluent_kafka.TopicPartition("clicks", p, 0) for p in (0, 1)])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < 20 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        print(f"consumed {len(values)} records in {time.monotonic() - t0:.2f}s")
        t0 = time.monotonic()
        consumer.close()
        print(f"consumer closed in {time.monotonic() - t0:.2f}s")
        return values

    t0 = time.monotonic()
    values = await trio.to_thread.run_sync(produce_and_consume)
    print(f"client part {time.monotonic() - t0:.2f}s")
    assert sorted(values) == sorted(b"v%d" % i for i in range(20))

    async def allocated():
        image = await cluster.image_from(1)
        return image.topic("clicks") is not None and image.next_producer_id >= 1000

    assert await wait_until(allocated, 5)


async def test_a_reading_client_waits_out_a_leader_that_is_down_for_seconds(cluster):
    """FetchClient (the Spark data source's reads, the exactly-once intent checks) retries a
    dead leader until Kafka's default.api.timeout.ms, not for a fixed ~1.5 s of attempts: a
    partition whose only replica (broker-only node 4) is killed and back ~3 s later is read.
    A fail-over on a loaded box took longer than those attempts and failed the demo's job."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from producer.fetch_client import FetchClient

    bootstrap = cluster.layout.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("on-four", 1, replica_assignment=[[4]])])["on-four"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce("on-four", b"kept")
    assert producer.flush(30) == 0
    cluster.kill9(4)
    answers: list[int] = []

    async def read() -> None:
        async with FetchClient(bootstrap, request_timeout_ms=5000) as client:
            answers.append(await client.latest_offset("on-four", 0))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        await trio.sleep(3)  # twice the old attempts' whole backoff
        assert not answers
        await trio.to_thread.run_sync(cluster.start, 4)
        await trio.to_thread.run_sync(cluster.wait_ready, 4)
    assert answers == [1]


async def test_list_transactions_asks_again_past_a_dead_broker(cluster):
    """ListTransactions goes to every broker the client's metadata names (the Spark commit
    lists the job's open transactions this way): one killed since is asked again after a
    metadata refresh, which no longer names it once it is fenced, instead of failing the
    call ('cannot connect to node 1' failed the demo's commit after its leader kill)."""
    from producer.transaction_client import TransactionClient

    async with TransactionClient.open(cluster.layout.bootstrap_servers) as client:
        await client.list_transactions()
        assert 4 in client.metadata.brokers
        cluster.kill9(4)
        assert isinstance(await client.list_transactions(["Ongoing"]), list)
        assert 4 not in client.metadata.brokers  # the next test's fixture starts node 4 again


async def test_sigterm_during_startup_without_quorum_exits_cleanly(tmp_path):
    cluster = Cluster(tmp_path, 3)
    cluster.start(1)  # alone: no quorum, never registers, never READY

    async def listening():
        return cluster.log_matches(1, "controller listening")

    await wait_until(listening, 20)
    assert cluster.terminate(1) == 0
    assert "node 1: stopped" in cluster.log(1)


async def test_non_leader_answers_not_controller_with_the_leader_id(cluster):
    from cluster_harness import PASSWORD

    from log.protocol import controller_extra as extra
    from quorum import controller_auth, controller_codec

    leader = (await cluster.image_from(1)).controller_id
    follower = next(n for n in (1, 2, 3) if n != leader)
    body = extra.CONTROLLER_FORWARD_REQUEST.cls(
        operation="delete_topics",
        payload=controller_codec.encode(c.DeleteTopicsRequest(("nope",))),
    )
    frame = extra.encode_request_frame(extra.CONTROLLER_FORWARD_KEY, 1, "test", body)
    with trio.fail_after(10):
        port = cluster.layout.controller_port(follower)
        async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
            await controller_auth.connect(stream, PASSWORD)
            await stream.send_all(frame)
            data = b""
            while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
                data += await stream.receive_some(65536)
    _, response = extra.decode_response_frame(data[4:], extra.CONTROLLER_FORWARD_KEY)
    assert (response.error_code, response.leader_id) == (ErrorCode.NOT_CONTROLLER, leader)


async def test_a_second_node_on_the_same_directory_is_refused_before_touching_it(cluster):
    """Two processes on one data directory would corrupt it: the second `quorumlog node`
    exits at once with a one-line error (exit 2), and the running node serves on."""
    import subprocess
    import sys

    from cluster_harness import REPO

    node_dir = cluster.layout.node_dir(1)
    second = subprocess.run(
        [sys.executable, "-m", "tools", "node", "--data-dir", str(node_dir)],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert second.returncode == 2, second.stderr
    assert "in use by another process" in second.stderr
    assert len(second.stderr.strip().splitlines()) == 1, second.stderr  # logged nothing else
    assert cluster.processes[1].poll() is None
    assert await _all_unfenced(cluster, 1, (1,))


async def test_broker_only_node_follows_metadata_over_tcp(cluster):
    assert "controller" not in cluster.config(4).roles
    assert await _all_unfenced(cluster, 1, NODES)
    await _create_topic(cluster, "wide", 4, 1)

    async def followed():
        return all(_broker_saw(cluster, 4, "wide", p) for p in range(4))

    await wait_until(followed, 10)
    # Clean stop of the broker-only node: controlled shutdown fences it at once.
    assert cluster.terminate(4) == 0

    async def fenced():
        image = await cluster.image_from(1)
        return image if image.brokers[4].fenced else None

    image = await wait_until(fenced, 5)
    # rf=1: partitions whose only replica was 4 go leaderless (and keep their last ISR member).
    assert all(s.leader != 4 for _, _, s in image.iter_partitions())
    assert any(s.replicas == (4,) and s.leader == -1 for _, _, s in image.iter_partitions())
    assert (cluster.layout.node_dir(4) / "kafka-logs" / ".kafka_cleanshutdown").exists()


async def test_three_nodes_register_create_topic_and_survive_leader_kill(cluster):
    for node_id in (1, 2, 3):
        assert await _all_unfenced(cluster, node_id, NODES)

    await _create_topic(cluster, "orders", 3, 3)
    for node_id in (1, 2, 3):  # followers apply a moment after the leader answered

        async def has_orders(node_id=node_id):
            return (await cluster.image_from(node_id)).topic("orders")

        topic = await wait_until(has_orders, 5)
        assert sorted(topic.partitions) == [0, 1, 2]
        assert all(p.leader in NODES for p in topic.partitions.values())

    async def brokers_followed():
        return all(_broker_saw(cluster, n, "orders", p) for n in NODES for p in range(3))

    await wait_until(brokers_followed, 10)

    # kill -9 the Raft leader: a new controller activates and commits.
    leader = (await cluster.image_from(1)).controller_id
    old_epoch = (await cluster.image_from(1)).controller_epoch
    killed_at = time.monotonic()
    cluster.kill9(leader)
    survivors = [n for n in (1, 2, 3) if n != leader]  # the controllers left
    live_brokers = [n for n in NODES if n != leader]
    await _create_topic(cluster, "after-failover", 1, 2)
    commit_s = time.monotonic() - killed_at
    print(f"new controller committed {commit_s:.2f}s after kill -9 of the leader")
    assert commit_s < 5
    image = await cluster.image_from(survivors[0])
    assert image.controller_id in survivors and image.controller_epoch > old_epoch

    async def survivors_followed():
        return all(_broker_saw(cluster, n, "after-failover", 0) for n in live_brokers)

    await wait_until(survivors_followed, 10)

    # The killed broker's session expires: it is fenced and its leaderships move
    # (first live ISR member, leader_epoch + 1).
    before = image

    async def fenced():
        image = await cluster.image_from(survivors[0])
        return image if image.brokers[leader].fenced else None

    fenced_image = await wait_until(fenced, SESSION_TIMEOUT_MS / 1000 + 5)
    print(f"killed broker fenced {time.monotonic() - killed_at:.2f}s after kill -9")
    topic_id = fenced_image.topic_ids_by_name["orders"]
    for p, state in fenced_image.topics[topic_id].partitions.items():
        old = before.topics[topic_id].partitions[p]
        assert leader not in state.isr
        assert state.leader != leader and state.leader in live_brokers
        if old.leader == leader:
            expected = next(b for b in old.isr if b != leader)
            assert state.leader == expected and state.leader_epoch == old.leader_epoch + 1
