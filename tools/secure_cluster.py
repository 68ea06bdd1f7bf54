"""`quorumlog up --secure`: what makes a local cluster's listeners TLS + SASL.

At format time (once; restarts reuse it) DIR/certs/ gets a fresh CA and one certificate per node
(tools/certificates.py), and every node's Kafka listener becomes SASL_SSL (also the inter-broker
listener: replica fetchers log in over TLS as the `broker` user with SCRAM-SHA-512), and the
CONTROLLER listener is SSL (brokers register, heartbeat and forward over TLS, checking the
controller's certificate, then prove they hold the cluster secret). Two users
exist, each with a generated password: `broker` (the nodes) and `admin` (you), both super users
of the StandardAuthorizer the nodes run (everyone else needs ACLs: `quorumlog acls`). DIR/client.properties
(mode 0600) holds the client settings, in the property names librdkafka, kcat and the Java
clients share; `up` prints them.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from tools.certificates import CertificateAuthority

CLIENT_PROPERTIES = "client.properties"
LISTENER = "SASL_SSL"
ADMIN_USER = "admin"
BROKER_USER = "broker"
INTER_BROKER_MECHANISM = "SCRAM-SHA-512"
HOSTS = ("127.0.0.1", "localhost")


def _jaas(own_user: str, own_password: str, users: dict[str, str]) -> str:
    options = [f'username="{own_user}"', f'password="{own_password}"']
    options += [f'user_{name}="{password}"' for name, password in users.items()]
    return (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(options)
        + ";"
    )


def secure_properties(data_dir: Path, node_ids: range) -> dict[int, dict[str, object]]:
    """Create DIR/certs and DIR/client.properties; each node's security properties."""
    certs = data_dir / "certs"
    ca = CertificateAuthority.create(certs)
    users = {BROKER_USER: secrets.token_urlsafe(18), ADMIN_USER: secrets.token_urlsafe(18)}
    jaas = _jaas(BROKER_USER, users[BROKER_USER], users)
    per_node: dict[int, dict[str, object]] = {}
    for node_id in node_ids:
        cert, key = ca.issue(certs, f"node-{node_id}", HOSTS)
        per_node[node_id] = {
            # the controller listener too: TLS around the cluster-secret handshake
            "listener.security.protocol.map": f"{LISTENER}:{LISTENER},CONTROLLER:SSL",
            "inter.broker.listener.name": LISTENER,
            "ssl.certificate.location": str(cert),
            "ssl.key.location": str(key),
            "ssl.ca.location": str(ca.certificate_path),
            "ssl.client.auth": "none",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
            "sasl.mechanism.inter.broker.protocol": INTER_BROKER_MECHANISM,
            "sasl.jaas.config": jaas,
            # ACLs on, the nodes and you allowed everything (quorumlog acls for the others)
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": f"User:{ADMIN_USER};User:{BROKER_USER}",
        }
    settings = {
        "security.protocol": LISTENER,
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": ADMIN_USER,
        "sasl.password": users[ADMIN_USER],
        "ssl.ca.location": str(ca.certificate_path),
    }
    path = data_dir / CLIENT_PROPERTIES
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("# quorumlog up --secure: client settings (librdkafka / kcat -F / Java names)\n")
        f.writelines(f"{name}={value}\n" for name, value in settings.items())
    return per_node


def client_settings(data_dir: Path) -> dict[str, str]:
    """The settings DIR/client.properties holds ({} for a cluster formatted without --secure)."""
    path = data_dir / CLIENT_PROPERTIES
    if not path.exists():
        return {}
    settings = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            settings[name] = value
    return settings
