"""A SASL_SSL cluster on three hosts of a namespace network (netns_harness.py), formatted host
by host with each host's own certificate (its address in the SAN) and users passed as
`format --property`: replica fetchers check the leader's certificate against its address and
log in; confluent-kafka produces and consumes over TLS with SCRAM; a wrong password is refused.
"""

from __future__ import annotations

import re
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from netns_harness import HostCluster, Network, unavailable_reason

from tools.certificates import CertificateAuthority

_reason = unavailable_reason()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.interop,
    pytest.mark.skipif(_reason is not None, reason=f"netns harness: {_reason}"),
]

HOSTS = 3
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="broker" password="broker-pw" user_broker="broker-pw" user_alice="alice-pw";'
)
WAIT_S = 120.0


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("secure-hosts")
    ca = CertificateAuthority.create(data_dir / "ca")

    def host_properties(host: int, address: str) -> dict[str, object]:
        # what the operator puts on each host: its own certificate, the CA, the users
        cert, key = ca.issue(data_dir / f"certs-{host}", f"host-{host}", (address,))
        return {
            "ssl.certificate.location": cert,
            "ssl.key.location": key,
            "ssl.ca.location": ca.certificate_path,
        }

    network = Network(HOSTS)
    try:
        cluster = HostCluster(
            network, data_dir, HOSTS,
            {
                "inter.broker.listener.name": "SASL_SSL",
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "sasl.jaas.config": JAAS,
                "default.replication.factor": 3,
                "min.insync.replicas": 2,
                "offsets.topic.num.partitions": 1,
                "broker.heartbeat.interval.ms": 500,
                "broker.session.timeout.ms": 4000,
            },
            listener="SASL_SSL",
            host_properties=host_properties,
        )  # fmt: skip
        cluster.start_all()
        yield cluster, str(ca.certificate_path)
        peers = "|".join(re.escape(address) for address in cluster.addresses.values())
        refused = re.compile(rf"connection from ({peers}):\d+ to \S+ refused")
        for host in cluster.hosts:  # no broker refused another's TLS handshake
            assert not refused.search(cluster.log(host, 10**9)), cluster.log(host)
    finally:
        network.close()


def client_config(cluster: HostCluster, ca: str, password: str = "alice-pw") -> dict:
    return {
        "bootstrap.servers": cluster.bootstrap_servers,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": password,
        "ssl.ca.location": ca,
    }


def wait_for(predicate, what: str):
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.2)


def test_sasl_ssl_produce_consume_replicated(secure):
    cluster, ca = secure
    config = client_config(cluster, ca)
    admin = AdminClient(config)
    wait_for(lambda: len(admin.list_topics(timeout=10).brokers) == HOSTS, "every broker")
    topic = f"s-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(timeout=60)

    def isr_whole() -> bool:
        # The broker asked may not have replayed the new topic yet: no partitions then.
        partition = admin.list_topics(topic, timeout=10).topics[topic].partitions.get(0)
        return partition is not None and len(partition.isrs) == 3

    wait_for(isr_whole, "a full ISR")
    producer = Producer({**config, "acks": "all", "enable.idempotence": True})
    values = [f"secret-{i}" for i in range(100)]
    for value in values:
        producer.produce(topic, value.encode())
    assert producer.flush(120) == 0
    # acks=all with min.insync.replicas=2: the followers fetched over SASL_SSL, and stay in sync
    wait_for(isr_whole, "the ISR after the writes")
    consumer = Consumer({**config, "group.id": f"g-{uuid.uuid4().hex[:8]}"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[str] = []
    deadline = time.monotonic() + WAIT_S
    while len(got) < len(values) and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            got.append(msg.value().decode())
    consumer.close()
    assert got == values


def test_wrong_password_is_refused(secure):
    cluster, ca = secure
    admin = AdminClient(client_config(cluster, ca, password="wrong"))
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=10)
