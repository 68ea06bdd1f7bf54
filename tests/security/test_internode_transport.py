"""Security between nodes on 3 real node processes: the CONTROLLER listener is TLS
(`CONTROLLER:SSL`, ssl.client.auth=required) around the cluster-secret handshake, the Raft port
is pysyncobj's Fernet keyed by the same secret.

Nodes 1 and 2 hold the cluster secret: their brokers register, heartbeat and forward a topic
creation to the active controller over TLS. Node 3 runs with the right certificate but another
secret (it is started first, so it tries from the start): its Raft seat never joins (its own
image stays empty), its broker never registers, the controller is never node 3, and nodes 1 and
2 keep working. Strangers on the controller port -- plaintext, TLS without a client
certificate or with one another CA signed, a certificate our CA signed for a principal that is
not a super user (the authorizer is on), the right certificate but a wrong secret, or a
controller certificate the client does not trust -- are refused before any request.
"""

from __future__ import annotations

import ssl

import pytest
import trio
from cryptography import x509

from log.common.node_config import NODE_CONFIG_FILE, ConfigError, NodeConfig, Voter, to_toml
from log.security.tls import client_context, controller_contexts
from quorum import controller_auth
from quorum.controller_client import ControllerClient
from tests.node import cluster_harness
from tests.node.cluster_harness import PASSWORD, TEST_PROPS, Cluster, free_base_port, wait_until
from tools.certificates import CertificateAuthority
from tools.cluster_layout import ClusterLayout

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

WRONG_SECRET = "not-the-cluster-secret"
TOPIC = "over-tls"


class Secured:
    def __init__(self, cluster: Cluster, ca: CertificateAuthority, pki_dir) -> None:
        self.cluster = cluster
        self.ca = ca
        self.pki_dir = pki_dir

    def tls(self, node_id: int) -> ssl.SSLContext:
        """The client context node `node_id` reaches the controllers with."""
        context = controller_contexts(self.cluster.config(node_id))[1]
        assert context is not None
        return context

    def controller_port(self, node_id: int) -> int:
        return self.cluster.layout.controller_port(node_id)


def _principal(cert) -> str:
    return "User:" + x509.load_pem_x509_certificate(cert.read_bytes()).subject.rfc4514_string()


def _security(ca: CertificateAuthority, certs: dict, node_id: int) -> dict[str, object]:
    # the nodes' certificate principals may act as brokers; PLAINTEXT (ANONYMOUS) is trusted
    # here only so the test's Kafka clients and replica fetchers need no credentials
    brokers = ";".join(_principal(cert) for cert, _ in certs.values())
    cert, key = certs[node_id]
    return {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
        "ssl.certificate.location": str(cert),
        "ssl.key.location": str(key),
        "ssl.ca.location": str(ca.certificate_path),
        "ssl.client.auth": "required",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:ANONYMOUS;{brokers}",
    }


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("internode")
    pki_dir = data_dir / "pki"
    ca = CertificateAuthority.create(pki_dir)
    layout = ClusterLayout(data_dir, 3, free_base_port(3))
    hosts = ("127.0.0.1", "localhost")
    certs = {n: ca.issue(pki_dir, f"node-{n}", hosts) for n in layout.node_ids}
    for node_id in layout.node_ids:
        secret = WRONG_SECRET if node_id == 3 else PASSWORD
        props = layout.node_properties(node_id, "test-cluster", secret)
        props.update(TEST_PROPS)
        props.update(_security(ca, certs, node_id))
        layout.node_dir(node_id).mkdir(parents=True)
        (layout.node_dir(node_id) / NODE_CONFIG_FILE).write_text(to_toml(props))
    cluster = Cluster(data_dir, 3, base_port=layout.base_port)
    try:
        for node_id in (3, 1, 2):
            cluster.start(node_id)
        cluster.wait_ready(1)
        cluster.wait_ready(2)
        yield Secured(cluster, ca, pki_dir)
    finally:
        cluster_harness.kill_started()


async def _metadata(port: int, secret: str, tls: ssl.SSLContext):
    """One MetadataFetch from the start of a controller's log, over TLS with `secret`."""
    client = ControllerClient([Voter(-1, "127.0.0.1", port)], secret=secret,
                              max_attempts=40, ssl_context=tls)  # fmt: skip
    try:
        with trio.fail_after(20):
            return await client.metadata_fetch(-1, -1, 0)
    finally:
        await client.aclose()


async def test_brokers_register_and_forward_over_tls(secured):
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = secured.cluster

    async def registered() -> bool:
        return (await cluster.image_from(1)).live_broker_ids() == [1, 2]

    assert await wait_until(registered, 30)
    bootstrap = f"127.0.0.1:{cluster.layout.kafka_port(2)}"

    def create() -> None:  # node 2's broker forwards it to the active controller
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 2)])[TOPIC].result(timeout=30)

    await trio.to_thread.run_sync(create)
    topic = (await cluster.image_from(2)).topic(TOPIC)
    assert topic is not None and sorted(topic.partitions[0].replicas) == [1, 2]


async def test_a_node_with_the_wrong_secret_cannot_join(secured):
    cluster = secured.cluster

    async def refused() -> bool:  # node 3's broker tried its way in: its proof failed
        pattern = "controller connection from .* refused: client proof does not match"
        return any(cluster.log_matches(n, pattern) for n in (1, 2))

    assert await wait_until(refused, 60)
    image = await cluster.image_from(1)
    assert 3 not in image.brokers and image.controller_id in (1, 2)
    # node 3's own Raft seat never received the log: its image is empty
    own = await _metadata(secured.controller_port(3), WRONG_SECRET, secured.tls(3))
    assert not own.batches and own.checkpoint is None and own.committed_offset <= 0
    assert cluster.processes[3].poll() is None  # it is still running, still shut out
    image = await cluster.image_from(2)
    assert 3 not in image.brokers and image.controller_id in (1, 2)
    assert image.live_broker_ids() == [1, 2]


def _context(secured: Secured, *, ca=None, cert: str = "", trust=None) -> ssl.SSLContext:
    props = {
        "ssl.ca.location": str(trust or secured.ca.certificate_path),
        "ssl.certificate.location": "",
        "ssl.key.location": "",
        "ssl.key.password": "",
        "ssl.endpoint.identification.algorithm": "https",
    }
    if cert:
        issuer = ca or secured.ca
        cert_path, key_path = issuer.issue(secured.pki_dir / cert, cert, [])
        props["ssl.certificate.location"] = str(cert_path)
        props["ssl.key.location"] = str(key_path)
    return client_context(props)


CASES = ("allowed", "plaintext", "no-certificate", "untrusted-certificate", "not-a-broker",
         "wrong-secret", "untrusted-controller")  # fmt: skip


@pytest.mark.parametrize("case", CASES)
async def test_the_controller_listener_refuses_strangers(secured, case):
    secret = WRONG_SECRET if case == "wrong-secret" else PASSWORD
    other_ca = CertificateAuthority.create(secured.pki_dir / f"other-{case}", "someone else's CA")
    context = {
        "allowed": lambda: secured.tls(1),
        "plaintext": lambda: None,
        "no-certificate": lambda: _context(secured),
        "untrusted-certificate": lambda: _context(secured, ca=other_ca, cert="intruder"),
        "not-a-broker": lambda: _context(secured, cert="client"),  # our CA's, not a super user
        "wrong-secret": lambda: secured.tls(1),
        "untrusted-controller": lambda: _context(
            secured, cert="client", trust=other_ca.certificate_path
        ),
    }[case]()
    stream: trio.abc.Stream = await trio.open_tcp_stream("127.0.0.1", secured.controller_port(1))
    try:
        with trio.fail_after(20):
            if context is None:
                await stream.send_all(b"\x00\x00\x00\x08not TLS!")
            else:
                stream = trio.SSLStream(stream, context, server_hostname="127.0.0.1")
            try:
                await controller_auth.connect(stream, secret)
            except (controller_auth.HandshakeError, trio.BrokenResourceError):
                assert case != "allowed"
            else:
                assert case == "allowed"
    finally:
        await stream.aclose()
    # the controller serves on: a broker's own way in still works. From the log's start it
    # answers batches, or its checkpoint once it has written one (every 10 records here: Raft
    # elections under a loaded box's stalls add activation records; all 7 cases failed once)
    served = await _metadata(secured.controller_port(1), PASSWORD, secured.tls(2))
    assert served.committed_offset > 0 and (served.batches or served.checkpoint is not None)


def test_the_controller_listener_is_plaintext_or_ssl(tmp_path):
    base = {"node.id": 1, "cluster.id": "c", "controller.quorum.password": "pw",
            "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "controller.quorum.voters": "1@127.0.0.1:9093",
            "controller.quorum.raft.voters": "1@127.0.0.1:9094"}  # fmt: skip
    for protocol in ("SASL_SSL", "SASL_PLAINTEXT"):
        with pytest.raises(ConfigError, match="PLAINTEXT or SSL"):
            NodeConfig.from_properties(tmp_path, {
                **base, "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,CONTROLLER:{protocol}"
            })  # fmt: skip
    config = NodeConfig.from_properties(tmp_path, base)
    assert config.controller_security_protocol == "PLAINTEXT"
    assert controller_contexts(config) == (None, None)
