"""A real KafkaServer with four listeners -- PLAINTEXT, SSL (mTLS required), SASL_PLAINTEXT and
SASL_SSL -- around bench/local_quorum.py's LocalQuorum (real metadata decisions, no Raft), and a
local CA (tools/certificates.py) for the server and a client certificate."""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.local_quorum import NODE_ID, LocalQuorum, node_config
from log.server.broker import KafkaServer
from log.server.broker_context import wall_clock_ms
from log.storage.config import default_log_config
from log.storage.manager import LogManager
from quorum import controller
from quorum.records import BrokerEndpoint
from tools.certificates import CertificateAuthority

USERS = {"alice": "alice-secret", "bob": "bob secret, with = and ,"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="alice" password="alice-secret" '
    + " ".join(f'user_{name}="{password}"' for name, password in USERS.items())
    + ";"
)


@dataclass
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    untrusted_cert: Path
    untrusted_key: Path
    expired_cert: Path
    expired_key: Path


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority.create(directory)
    server_cert, server_key = ca.issue(directory, "broker", ["127.0.0.1", "localhost"])
    client_cert, client_key = ca.issue(directory, "client", [])
    other = CertificateAuthority.create(directory / "other", "someone else's CA")
    untrusted_cert, untrusted_key = other.issue(directory / "other", "intruder", [])
    yesterday = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=1)
    expired_cert, expired_key = ca.issue(directory, "expired", [], not_valid_after=yesterday)
    return Pki(ca.certificate_path, server_cert, server_key, client_cert, client_key,
               untrusted_cert, untrusted_key, expired_cert, expired_key)  # fmt: skip


class SecureBroker:
    def __init__(self, server: KafkaServer, quorum: LocalQuorum, pki: Pki) -> None:
        self.server = server
        self.quorum = quorum
        self.pki = pki
        self.ports = dict(server.ports)

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    async def create_topic(self, name: str, partitions: int = 1) -> None:
        response = await self.quorum.create_topics(
            controller.CreateTopicsRequest((controller.CreatableTopic(name, partitions, 1, {}),))
        )
        assert response.results[0].error_code == 0, response
        self.server.ctx.replica_manager.sync()


LISTENERS = ("SSL", "SASL_PLAINTEXT", "SASL_SSL")


async def start_secure_broker(
    nursery, tmp_path, pki: Pki, clock_ms=wall_clock_ms, **props
) -> SecureBroker:
    values = {
        # ports other than PLAINTEXT's are picked at bind time (listen_ports below)
        "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,"
        "SASL_PLAINTEXT://127.0.0.1:9094,SASL_SSL://127.0.0.1:9095,CONTROLLER://127.0.0.1:1",
        "ssl.certificate.location": str(pki.server_cert),
        "ssl.key.location": str(pki.server_key),
        "ssl.ca.location": str(pki.ca),
        "ssl.client.auth": "required",
        "sasl.jaas.config": JAAS,
    }
    values.update(props)
    config = node_config(tmp_path, **values)
    quorum = LocalQuorum()
    log_manager = LogManager(config.log_dir, default_log_config(config))
    server = KafkaServer(
        config, log_manager, quorum, quorum,
        broker_epoch_getter=lambda: quorum.broker_epoch, clock_ms=clock_ms,
        listen_port=0, listen_ports={name: 0 for name in LISTENERS},
    )  # fmt: skip
    port = await nursery.start(server.run)
    more = tuple(BrokerEndpoint(name, "127.0.0.1", server.ports[name]) for name in LISTENERS)
    quorum.register(NODE_ID, "127.0.0.1", port, more=more)
    return SecureBroker(server, quorum, pki)


@pytest.fixture
async def secure_broker(nursery, tmp_path, pki) -> SecureBroker:
    return await start_secure_broker(nursery, tmp_path, pki)


@pytest.fixture(autouse=True)
def no_server_errors(caplog):
    """Nothing a client does to the security layer may log an ERROR (a bug of ours)."""
    caplog.set_level(logging.INFO, logger="log.server")
    yield
    errors = [
        r for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("log.server")
    ]
    assert not errors, [r.getMessage() for r in errors]
