"""A cluster set up host by host (`quorumlog cluster-id`, `format`, `node`) on a network of
network namespaces (netns_harness.py): 3 controller hosts and 2 broker-only hosts, each with its
own address, clients in the root namespace. Real clients (confluent-kafka, kcat) reach the
nodes through their advertised addresses; real partitions (a link down, an iptables cut, an
asymmetric cut) leave the majority acknowledging acks=all writes, and nothing acknowledged is
lost once healed. One cluster serves the whole module (each test heals what it broke).
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from netns_harness import HostCluster, Network, netem_unavailable_reason, unavailable_reason

_reason = unavailable_reason()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.interop,
    pytest.mark.skipif(_reason is not None, reason=f"netns harness: {_reason}"),
]

CONTROLLERS = 3
HOSTS = 5  # + 2 broker-only hosts
PROPERTIES = {
    "broker.heartbeat.interval.ms": 500,
    "broker.session.timeout.ms": 4000,
    "replica.lag.time.max.ms": 10000,
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.num.partitions": 3,
    "group.initial.rebalance.delay.ms": 0,
}
WAIT_S = 120.0  # bound on every wait for the cluster to settle (not a speed assertion)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    network = Network(HOSTS)
    try:
        cluster = HostCluster(network, tmp_path_factory.mktemp("hosts"), CONTROLLERS, PROPERTIES)
        cluster.start_all()
        wait_for(lambda: len(unfenced_brokers(cluster.bootstrap_servers)) == HOSTS, "brokers")
        yield cluster
    finally:
        network.close()


def wait_for(predicate, what: str, timeout_s: float = WAIT_S):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = predicate()
        except Exception as exc:  # noqa: BLE001 - a cluster settling answers with errors
            value, last = None, exc
        else:
            last = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} (last error: {last})")
        time.sleep(0.2)


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})


def unfenced_brokers(bootstrap: str) -> dict[int, str]:
    """Broker id -> host:port, as a client is told (fenced brokers are not listed)."""
    metadata = admin(bootstrap).list_topics(timeout=5)
    return {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()}


def create_topic(cluster: HostCluster, partitions: int = 1) -> str:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    client = admin(cluster.bootstrap_servers)  # kept: its futures die with it
    futures = client.create_topics([NewTopic(topic, partitions, 3)], operation_timeout=30)
    futures[topic].result(timeout=60)
    wait_for(lambda: partition_state(cluster.bootstrap_servers, topic, 0)[0] >= 0, "a leader")
    return topic


def partition_state(bootstrap: str, topic: str, partition: int) -> tuple[int, list[int]]:
    metadata = admin(bootstrap).list_topics(topic, timeout=5)
    p = metadata.topics[topic].partitions[partition]
    return p.leader, list(p.isrs)


def producer(bootstrap: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 120000,
            "request.timeout.ms": 10000,
            "linger.ms": 5,
        }
    )


def produce(bootstrap: str, topic: str, values: list[str]) -> set[str]:
    """Produce with acks=all; the values the cluster acknowledged."""
    acked: set[str] = set()

    def on_delivery(err, msg) -> None:
        if err is None:
            acked.add(msg.value().decode())

    p = producer(bootstrap)
    for value in values:
        p.produce(topic, value.encode(), on_delivery=on_delivery)
        p.poll(0)
    assert p.flush(180) == 0
    return acked


def consume_all(bootstrap: str, topic: str, partition: int = 0) -> list[str]:
    """Every value of topic-partition, from the beginning to the high watermark."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False})  # fmt: skip
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        c.assign([TopicPartition(topic, partition, 0)])
        values: list[str] = []
        deadline = time.monotonic() + WAIT_S
        while len(values) < high and time.monotonic() < deadline:
            msg = c.poll(1.0)
            if msg is not None and msg.error() is None:
                values.append(msg.value().decode())
        return values
    finally:
        c.close()


def healed(cluster: HostCluster, topic: str) -> bool:
    """Every broker, asked one by one, sees every broker unfenced, the same leader and the
    partition's ISR whole again. One by one: a host that was cut off answers from the image it
    had before the cut (itself leader, everyone unfenced) until it catches up, and an answer
    from it alone would look healed."""
    views = set()
    for host in cluster.hosts:
        address = f"{cluster.addresses[host]}:9092"
        if len(unfenced_brokers(address)) != HOSTS:
            return False
        leader, isr = partition_state(address, topic, 0)
        if len(isr) != 3:
            return False
        views.add((leader, tuple(sorted(isr))))
    return len(views) == 1


def others(cluster: HostCluster, host: int) -> str:
    return ",".join(f"{cluster.addresses[h]}:9092" for h in cluster.hosts if h != host)


def test_clients_are_told_the_advertised_addresses(cluster):
    brokers = unfenced_brokers(cluster.bootstrap_servers)
    assert brokers == {h: f"{cluster.addresses[h]}:9092" for h in cluster.hosts}


def test_confluent_kafka_and_kcat_produce_and_consume(cluster):
    topic = create_topic(cluster)
    values = [f"ck-{i}" for i in range(200)]
    assert produce(cluster.bootstrap_servers, topic, values) == set(values)
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (confluent-kafka part passed)")
    lines = [f"kcat-{i}" for i in range(100)]
    subprocess.run(
        ["kcat", "-P", "-b", cluster.bootstrap_servers, "-t", topic, "-X", "acks=all"],
        input="\n".join(lines) + "\n", text=True, check=True, timeout=60,
    )  # fmt: skip
    consumed = subprocess.run(
        ["kcat", "-C", "-b", cluster.bootstrap_servers, "-t", topic, "-o", "beginning", "-e",
         "-q"], capture_output=True, text=True, check=True, timeout=60,
    ).stdout.splitlines()  # fmt: skip
    assert consumed == values + lines
    assert consume_all(cluster.bootstrap_servers, topic) == values + lines


def _survives(cluster: HostCluster, victim: int, fault, heal, topic: str) -> None:
    """With `victim` cut off by `fault`: it is fenced, the others keep acknowledging acks=all
    writes; after `heal`, every acknowledged value is there, in order."""
    before = [f"before-{i}" for i in range(50)]
    assert produce(cluster.bootstrap_servers, topic, before) == set(before)
    majority = others(cluster, victim)
    started = time.monotonic()
    fault(victim)
    try:
        wait_for(lambda: victim not in unfenced_brokers(majority), f"host {victim} fenced")
        fenced_s = time.monotonic() - started
        during = [f"during-{i}" for i in range(100)]
        acked = produce(majority, topic, during)
        assert acked == set(during)  # the majority acknowledges every acks=all write
        # measured, not asserted (bench/ is for speed): shown with -s
        print(f"host {victim} fenced after {fenced_s:.1f} s; 100 acks=all writes acked "
              f"{time.monotonic() - started:.1f} s after the fault")  # fmt: skip
    finally:
        heal(victim)
    wait_for(lambda: healed(cluster, topic), "the cluster healed")
    consumed = consume_all(cluster.bootstrap_servers, topic)
    assert consumed == before + during  # nothing acknowledged lost, nothing duplicated
    # and every replica has it: the healed victim serves the same log if it leads
    assert consume_all(majority, topic) == consumed


def test_leader_link_down(cluster):
    topic = create_topic(cluster)
    leader, _ = partition_state(cluster.bootstrap_servers, topic, 0)
    _survives(cluster, leader, cluster.network.link_down, cluster.network.link_up, topic)


def test_active_controller_cut_off_by_iptables(cluster):
    topic = create_topic(cluster)
    controller = admin(cluster.bootstrap_servers).list_topics(timeout=5).controller_id
    assert 1 <= controller <= CONTROLLERS
    _survives(cluster, controller, cluster.network.cut, cluster.network.heal, topic)


def test_asymmetric_cut_leader_sends_but_does_not_receive(cluster):
    topic = create_topic(cluster)
    leader, _ = partition_state(cluster.bootstrap_servers, topic, 0)

    def cut_receive(host: int) -> None:
        cluster.network.cut(host, receive_only=True)

    _survives(cluster, leader, cut_receive, cluster.network.heal, topic)


def test_broker_back_with_a_new_address_registers_it(cluster):
    host = HOSTS  # a broker-only host
    cluster.stop(host)
    new_address = cluster.network.move(host, 200)
    cluster.addresses[host] = new_address
    cluster.format(host)  # the operator re-formats: same cluster and node, new address
    cluster.start(host)
    cluster.wait_ready(host)
    expected = f"{new_address}:9092"
    wait_for(lambda: unfenced_brokers(cluster.bootstrap_servers).get(host) == expected,
             "the new endpoint")  # fmt: skip
    topic = create_topic(cluster, partitions=HOSTS)  # a partition on every broker
    values = [f"moved-{i}" for i in range(20)]
    assert produce(cluster.bootstrap_servers, topic, values) == set(values)


@pytest.mark.skipif(netem_unavailable_reason() is not None,
                    reason=f"netem: {netem_unavailable_reason()}")  # fmt: skip
def test_failover_under_latency(cluster):
    topic = create_topic(cluster)
    for host in cluster.hosts:
        cluster.network.netem(host, "delay", "20ms", "5ms")
    try:
        leader, _ = partition_state(cluster.bootstrap_servers, topic, 0)
        started = time.monotonic()
        cluster.kill(leader)
        majority = others(cluster, leader)
        new_leader = wait_for(
            lambda: (s := partition_state(majority, topic, 0)[0]) not in (-1, leader) and s,
            "a new leader",
        )
        print(f"fail-over under 20 ms +- 5 ms: {time.monotonic() - started:.2f} s, "
              f"leader {leader} -> {new_leader}")  # fmt: skip
        values = [f"slow-{i}" for i in range(50)]
        assert produce(majority, topic, values) == set(values)
        cluster.start(leader)
        cluster.wait_ready(leader)
        wait_for(lambda: healed(cluster, topic), "the cluster healed")
        assert consume_all(cluster.bootstrap_servers, topic) == values
    finally:
        for host in cluster.hosts:
            cluster.network.netem_off(host)
