"""Transactions on real nodes with unmodified clients: confluent-kafka's transactional
producer (commit, abort, send_offsets_to_transaction with a consumer group) read back by a
read_committed consumer; kill -9 of the transaction coordinator mid-transaction; a producer
killed mid-transaction is aborted after its timeout.

The tests share one cluster (3 controllers + broker 4, which the prepared-commit test needs as a
non-controller): each uses its own topic and transactional ids, and every node a test killed is
started again, and ready, before the next one runs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest
import trio
from cluster_harness import REPO, Cluster, wait_until
from committed_read import read_committed

from log.coordinator.transaction_driver import TRANSACTION_STATE_TOPIC
from log.coordinator.transaction_log import partition_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SOURCE = "txn-in"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # timed-out transactions looked for every second (Kafka's default: 10 s)
    cleanup = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000}
    cluster = Cluster(tmp_path_factory.mktemp("txn-cluster"), 4, extra_props=cleanup, shared=True)
    try:
        cluster.start_all()
        yield cluster
    finally:
        cluster.stop_all()


@pytest.fixture(autouse=True)
def _restart_killed_nodes(cluster):
    """What a test killed is started again after it (the cluster lives for the module)."""
    yield
    for node_id in cluster.layout.node_ids:
        if node_id not in cluster.processes:
            cluster.start(node_id)
            cluster.wait_ready(node_id)


@pytest.fixture
def topic(request) -> str:
    """A topic name of the test's own (the tests share the cluster)."""
    return "txn-" + request.node.name.removeprefix("test_")[:40].replace("_", "-")


def _producer(bootstrap: str, transactional_id: str, timeout_ms: int = 60_000):
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": timeout_ms,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )


def _read_committed(
    bootstrap: str, topic: str, expected: int, timeout_s: float = 60, partitions=None
) -> list:
    """Every value a read_committed consumer sees in `topic` (all partitions, or `partitions`):
    at least `expected` of them, read to the end of the settled log (committed_read.py)."""
    by_partition = read_committed(bootstrap, topic, expected, timeout_s, partitions)
    return [value for values in by_partition.values() for value in values]


def _open_transaction(bootstrap: str, topic: str, transactional_id: str):
    """The topic created and a producer with a transaction open: v0..v19 written, not ended."""
    _create_topics(bootstrap, topic)
    producer = _producer(bootstrap, transactional_id)
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(20):
        producer.produce(topic, value=b"v%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    return producer


def _create_topics(bootstrap: str, *names: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(n, num_partitions=2, replication_factor=3) for n in names]
    )
    for future in futures.values():
        future.result(timeout=30)


async def test_commit_abort_and_offsets_with_confluent_kafka(cluster, topic):
    from confluent_kafka import Consumer, TopicPartition

    bootstrap = cluster.layout.bootstrap_servers

    def run() -> tuple[list, dict]:
        _create_topics(bootstrap, topic, SOURCE)
        producer = _producer(bootstrap, "copier-1")
        producer.init_transactions(60)
        producer.begin_transaction()
        for i in range(10):
            producer.produce(topic, value=b"c%d" % i, partition=i % 2)
        producer.commit_transaction(60)
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, value=b"a%d" % i, partition=i % 2)
        producer.flush(30)
        producer.abort_transaction(60)
        # consume-transform-produce: offsets committed with the transaction
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "copier-group",
                             "enable.auto.commit": False})  # fmt: skip
        producer.begin_transaction()
        producer.produce(topic, value=b"o0", partition=0)
        offsets = [TopicPartition(SOURCE, 0, 7), TopicPartition(SOURCE, 1, 3)]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 60)
        producer.commit_transaction(60)
        # commit_transaction returns once PrepareCommit is written; the offsets become visible
        # when the COMMIT marker lands on __consumer_offsets, a moment later (as in Kafka:
        # OffsetFetch v7's require_stable, which we do not advertise, would wait for it).
        deadline = time.monotonic() + 30
        while True:
            committed = consumer.committed([TopicPartition(SOURCE, p) for p in (0, 1)], 30)
            if all(tp.offset >= 0 for tp in committed) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        consumer.close()
        # an aborted send_offsets_to_transaction leaves the committed offsets alone
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "copier-group",
                             "enable.auto.commit": False})  # fmt: skip
        producer.begin_transaction()
        producer.produce(topic, value=b"a-offsets", partition=1)
        producer.send_offsets_to_transaction(
            [TopicPartition(SOURCE, 0, 99)], consumer.consumer_group_metadata(), 60
        )
        producer.abort_transaction(60)
        after_abort = consumer.committed([TopicPartition(SOURCE, 0)], 30)
        consumer.close()
        values = _read_committed(bootstrap, topic, 11)
        return values, {
            "committed": {tp.partition: tp.offset for tp in committed},
            "after_abort": after_abort[0].offset,
        }

    values, offsets = await trio.to_thread.run_sync(run)
    assert offsets == {"committed": {0: 7, 1: 3}, "after_abort": 7}
    assert sorted(values) == sorted([b"c%d" % i for i in range(10)] + [b"o0"])


async def test_coordinator_killed_mid_transaction_client_recovers(cluster, topic):
    """kill -9 the leader of the transactional id's __transaction_state partition while the
    transaction is open: the client finds the new coordinator (which replayed the partition)
    and commits; a read_committed consumer sees every record once."""
    bootstrap = cluster.layout.bootstrap_servers
    num_partitions = cluster.config(1).props["transaction.state.log.num.partitions"]
    tid = "failover-txn"
    producer = await trio.to_thread.run_sync(_open_transaction, bootstrap, topic, tid)
    image = await cluster.image_from(1)
    txn_state = image.topic(TRANSACTION_STATE_TOPIC)
    assert txn_state is not None and len(txn_state.partitions) == num_partitions == 5  # local
    assert {len(p.replicas) for p in txn_state.partitions.values()} == {3}
    assert image.topic_configs(TRANSACTION_STATE_TOPIC)["min.insync.replicas"] == "2"
    coordinator = txn_state.partitions[partition_for(tid, num_partitions)].leader
    cluster.kill9(coordinator)
    survivor = next(i for i in (1, 2, 3) if i != coordinator)

    async def moved() -> bool:
        state = (await cluster.image_from(survivor)).topic(TRANSACTION_STATE_TOPIC)
        part = state.partitions[partition_for(tid, num_partitions)]
        return part.leader not in (coordinator, -1)

    await wait_until(moved, 60)

    def second_half() -> list:
        for i in range(20, 30):
            producer.produce(topic, value=b"v%d" % i, partition=i % 2)
        producer.commit_transaction(90)
        return _read_committed(bootstrap, topic, 30)

    values = await trio.to_thread.run_sync(second_half)
    assert sorted(values) == sorted(b"v%d" % i for i in range(30))
    # The tools see it on the new coordinator, completed.
    described = json.loads(_quorumlog(bootstrap, "transactions", "describe", tid, "--json"))
    assert described["coordinator"] != coordinator
    assert described["state"] == "CompleteCommit" and described["partitions"] == []
    listed = json.loads(_quorumlog(bootstrap, "transactions", "list", "--json"))
    assert [t["state"] for t in listed if t["transactional_id"] == tid] == ["CompleteCommit"]


def _quorumlog(bootstrap: str, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "tools", *args, "--bootstrap", bootstrap],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


PRODUCER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "doomed",
                  "transaction.timeout.ms": 3000})
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(5):
        p.produce(sys.argv[2], value=b"doomed-%d" % i, partition=0)
    p.flush(30)
    print("OPEN", flush=True)
    time.sleep(600)
    """
)


async def test_killed_producer_transaction_is_aborted_after_its_timeout(cluster, topic):
    bootstrap = cluster.layout.bootstrap_servers
    await trio.to_thread.run_sync(_create_topics, bootstrap, topic)
    process = subprocess.Popen(
        [sys.executable, "-c", PRODUCER_SCRIPT, bootstrap, topic],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        line = await trio.to_thread.run_sync(process.stdout.readline)
        assert line.strip() == b"OPEN"
    finally:
        process.kill()
        process.wait()

    async def aborted() -> bool:
        return any(
            cluster.log_matches(i, "aborting timed-out transaction doomed")
            for i in cluster.layout.node_ids
        )

    # transaction.timeout.ms 3 s, checked every second (the module cluster's interval)
    await wait_until(aborted, 60)

    def after() -> list:
        # A later transaction on the same partition commits; read_committed reaches it only once
        # the dead producer's transaction is aborted (the LSO moves past it), never its records.
        producer = _producer(bootstrap, "survivor")
        producer.init_transactions(60)
        producer.begin_transaction()
        producer.produce(topic, value=b"after", partition=0)
        producer.commit_transaction(60)
        return _read_committed(bootstrap, topic, 1, timeout_s=90)

    values = await trio.to_thread.run_sync(after)
    assert values == [b"after"]


async def test_partition_leader_killed_before_commit_markers_reach_the_new_leader(cluster, topic):
    """kill -9 the leader of a partition of an open transaction (not the coordinator): the
    client's commit is answered and the coordinator's markers go to the partition's new leader,
    so read_committed readers see the records."""
    bootstrap = cluster.layout.bootstrap_servers
    num_partitions = cluster.config(1).props["transaction.state.log.num.partitions"]
    tid = "leader-bounce"
    producer = await trio.to_thread.run_sync(_open_transaction, bootstrap, topic, tid)
    image = await cluster.image_from(1)
    coordinator = (
        image.topic(TRANSACTION_STATE_TOPIC).partitions[partition_for(tid, num_partitions)].leader
    )
    leaders = {p: state.leader for p, state in image.topic(topic).partitions.items()}
    victim = next((leader for leader in leaders.values() if leader != coordinator), None)
    if victim is None:  # the coordinator leads both partitions: kill it instead
        victim = coordinator
    cluster.kill9(victim)
    survivor = next(i for i in (1, 2, 3) if i != victim)

    async def moved() -> bool:
        partitions = (await cluster.image_from(survivor)).topic(topic).partitions
        return all(state.leader not in (victim, -1) for state in partitions.values())

    await wait_until(moved, 60)

    def commit() -> list:
        producer.commit_transaction(90)
        return _read_committed(bootstrap, topic, 20)

    values = await trio.to_thread.run_sync(commit)
    assert sorted(values) == sorted(b"v%d" % i for i in range(20))


async def test_prepared_commit_completes_on_the_new_coordinator(cluster, topic):
    """A commit is prepared (PrepareCommit replicated, the client answered) but its marker
    cannot be written: the only replica of the partition (broker 4, not a controller) is down.
    Then the coordinator is killed: the new one replays PrepareCommit and, once broker 4 is
    back, writes the marker and completes the transaction; read_committed sees the records."""
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = cluster.layout.bootstrap_servers
    num_partitions = cluster.config(1).props["transaction.state.log.num.partitions"]
    rf1 = "rf1"

    def create() -> None:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(rf1, num_partitions=8, replication_factor=1)])[rf1].result(30)
        warm = _producer(bootstrap, "warm-up")  # creates __transaction_state
        warm.init_transactions(60)

    await trio.to_thread.run_sync(create)
    image = await cluster.image_from(1)
    partition = next(p for p, s in sorted(image.topic(rf1).partitions.items()) if s.leader == 4)
    txn_leaders = {p: s.leader for p, s in image.topic(TRANSACTION_STATE_TOPIC).partitions.items()}
    tid = next(f"prep-{i}" for i in range(1000)
               if txn_leaders[partition_for(f"prep-{i}", num_partitions)] != 4)  # fmt: skip
    coordinator = txn_leaders[partition_for(tid, num_partitions)]
    producer = None

    def begin() -> None:
        nonlocal producer
        producer = _producer(bootstrap, tid)
        producer.init_transactions(60)
        producer.begin_transaction()
        for i in range(10):
            producer.produce(rf1, value=b"p%d" % i, partition=partition)
        assert producer.flush(30) == 0

    await trio.to_thread.run_sync(begin)
    cluster.kill9(4)

    def commit() -> None:
        producer.commit_transaction(60)  # answered at PrepareCommit

    await trio.to_thread.run_sync(commit)
    described = json.loads(_quorumlog(bootstrap_without(cluster, 4), "transactions", "describe",
                                      tid, "--json"))  # fmt: skip
    assert (described["state"], described["coordinator"]) == ("PrepareCommit", coordinator)
    cluster.kill9(coordinator)
    alive = [i for i in (1, 2, 3) if i != coordinator]

    async def moved() -> bool:
        state = (await cluster.image_from(alive[0])).topic(TRANSACTION_STATE_TOPIC)
        return state.partitions[partition_for(tid, num_partitions)].leader in alive

    await wait_until(moved, 60)
    bootstrap_alive = ",".join(f"127.0.0.1:{cluster.layout.kafka_port(i)}" for i in alive)
    described = await trio.to_thread.run_sync(
        lambda: json.loads(_quorumlog(bootstrap_alive, "transactions", "describe", tid, "--json"))
    )
    assert described["state"] == "PrepareCommit" and described["coordinator"] in alive
    assert described["partitions"] == [{"topic": rf1, "partition": partition}]
    cluster.start(4)
    cluster.wait_ready(4)

    async def completed() -> bool:
        out = await trio.to_thread.run_sync(
            lambda: _quorumlog(bootstrap_alive, "transactions", "describe", tid, "--json")
        )
        return json.loads(out)["state"] == "CompleteCommit"

    await wait_until(completed, 60, interval_s=0.5)
    # the partition written (others of rf1 may be led by the killed coordinator)
    values = await trio.to_thread.run_sync(
        _read_committed, bootstrap_alive, rf1, 10, 60, [partition]
    )
    assert sorted(values) == sorted(b"p%d" % i for i in range(10))


def bootstrap_without(cluster: Cluster, node_id: int) -> str:
    return ",".join(
        f"127.0.0.1:{cluster.layout.kafka_port(i)}" for i in cluster.layout.node_ids if i != node_id
    )


async def test_zombie_producer_is_fenced_and_its_writes_never_visible(cluster, topic):
    """Two instances with one transactional.id: the second's init_transactions aborts the
    first's open transaction and fences it; the first's commit fails as fenced; read_committed
    readers see only the second's records. A broker that does not coordinate the id answers
    NOT_COORDINATOR."""
    from confluent_kafka import KafkaException

    from log.common.errors import ErrorCode
    from log.protocol.producer_id import INIT_PRODUCER_ID_REQUEST
    from tests.broker.conftest import WireClient

    bootstrap = cluster.layout.bootstrap_servers
    num_partitions = cluster.config(1).props["transaction.state.log.num.partitions"]
    tid = "zombie"

    def run() -> tuple[str, list]:
        _create_topics(bootstrap, topic)
        zombie = _producer(bootstrap, tid)
        zombie.init_transactions(60)
        zombie.begin_transaction()
        for i in range(5):
            zombie.produce(topic, value=b"z%d" % i, partition=i % 2)
        assert zombie.flush(30) == 0
        successor = _producer(bootstrap, tid)
        successor.init_transactions(60)
        successor.begin_transaction()
        successor.produce(topic, value=b"s0", partition=0)
        successor.commit_transaction(60)
        try:
            zombie.produce(topic, value=b"z-late", partition=1)
            zombie.commit_transaction(30)
            outcome = "committed"
        except KafkaException as exc:
            outcome = exc.args[0].name()
        return outcome, _read_committed(bootstrap, topic, 1)

    outcome, values = await trio.to_thread.run_sync(run)
    assert outcome == "_FENCED", outcome  # librdkafka: "the producer has been fenced"
    assert values == [b"s0"]
    image = await cluster.image_from(1)
    coordinator = (
        image.topic(TRANSACTION_STATE_TOPIC).partitions[partition_for(tid, num_partitions)].leader
    )
    other = next(i for i in (1, 2, 3) if i != coordinator)
    client = await WireClient.connect(cluster.layout.kafka_port(other))
    body = await client.call(22, 1, INIT_PRODUCER_ID_REQUEST.cls(transactional_id=tid,
                                                               transaction_timeout_ms=60_000))  # fmt: skip
    assert body.error_code == ErrorCode.NOT_COORDINATOR
    await client.aclose()
