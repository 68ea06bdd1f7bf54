"""`--command-config FILE`: the client security of every command that connects to brokers.

As kafka-topics.sh and the other Kafka tools do, the commands take a client properties file
(`name=value` lines, `#` or `!` comments: what `quorumlog up --secure` writes to
DIR/client.properties). Understood, in librdkafka's names or the Java clients' PEM ones:

    security.protocol        PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL
    ssl.ca.location          PEM CA file the brokers' certificates must chain to
                             (Java: ssl.truststore.location with ssl.truststore.type=PEM);
                             unset: the system's CAs
    ssl.certificate.location PEM client certificate, for mTLS (Java: ssl.keystore.location with
    ssl.key.location         ssl.keystore.type=PEM, certificate and key in one file)
    ssl.key.password         the key's password, if encrypted
    ssl.endpoint.identification.algorithm  https (default: check the host name) or none / empty
    sasl.mechanism           PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (librdkafka: sasl.mechanisms)
    sasl.username / sasl.password, or Java's sasl.jaas.config (its username= and password=)

Our own commands (topics, produce, consume, groups, status, transactions) then connect through
a Connector doing TLS and the SASL login (log/replication/inter_broker_connector.py's steps);
the commands built on confluent-kafka (users, acls, consume --group) get the same settings in
librdkafka's names (`confluent_settings`). Anything else in the file is passed to confluent-kafka
only, as Kafka's tools pass unknown properties to their clients.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from log.common.node_config import ConfigError
from log.replication.inter_broker_connector import secure_connector
from log.security import tls
from log.security.jaas import parse_jaas_config
from log.security.plain import MECHANISM as PLAIN
from log.security.scram import SCRAM_MECHANISMS
from producer.connection import Connector, open_plaintext

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
# Java's names that librdkafka does not know: translated (or dropped) for confluent-kafka
_JAVA_ONLY = (
    "sasl.jaas.config",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.keystore.location",
    "ssl.keystore.type",
)


@dataclass(frozen=True)
class ClientSecurity:
    """A command's way to the brokers: `connector` for our clients, `confluent` settings for
    confluent-kafka's (both plaintext when no --command-config was given)."""

    connector: Connector = open_plaintext
    confluent: Mapping[str, str] = field(default_factory=dict)


PLAINTEXT = ClientSecurity()


def read_properties(path: Path) -> dict[str, str]:
    """A Java-style properties file's `name=value` lines (ValueError on any other line)."""
    settings = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            name, sep, value = line.partition("=")
            if not sep:
                raise ValueError(f"{path}: {line!r} is not name=value")
            settings[name.strip()] = value.strip()
    return settings


def _pem(props: Mapping[str, str], store: str) -> str:
    location = props.get(f"ssl.{store}.location", "")
    if location and props.get(f"ssl.{store}.type", "JKS").upper() != "PEM":
        raise ConfigError(f"ssl.{store}.location: only ssl.{store}.type=PEM files are supported")
    return location


def client_security(props: Mapping[str, str]) -> ClientSecurity:
    """The ClientSecurity `props` (a --command-config file) describe; ConfigError when
    something is missing or unsupported."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise ConfigError(f"security.protocol: {protocol!r} (one of {', '.join(PROTOCOLS)})")
    ca = props.get("ssl.ca.location") or _pem(props, "truststore")
    cert = props.get("ssl.certificate.location") or _pem(props, "keystore")
    key = props.get("ssl.key.location", "")
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https")
    confluent = {k: v for k, v in props.items() if k not in _JAVA_ONLY}
    if ca:
        confluent["ssl.ca.location"] = ca
    if cert:
        confluent["ssl.certificate.location"] = cert
        confluent["ssl.key.location"] = key or cert
    context = None
    if protocol.endswith("SSL"):
        context = tls.client_context({
            "ssl.ca.location": ca,
            "ssl.certificate.location": cert,
            "ssl.key.location": key,
            "ssl.key.password": props.get("ssl.key.password", ""),
            "ssl.endpoint.identification.algorithm": algorithm,
        })  # fmt: skip
    mechanism = username = password = ""
    if protocol.startswith("SASL_"):
        mechanism = props.get("sasl.mechanism") or props.get("sasl.mechanisms") or ""
        mechanism = mechanism.strip().upper()
        if mechanism not in MECHANISMS:
            raise ConfigError(
                f"sasl.mechanism: {mechanism or 'not set'} (one of {', '.join(MECHANISMS)})"
            )
        username, password = props.get("sasl.username", ""), props.get("sasl.password", "")
        if not username and props.get("sasl.jaas.config"):
            jaas = parse_jaas_config(props["sasl.jaas.config"])
            username, password = jaas.username, jaas.password
            confluent["sasl.username"], confluent["sasl.password"] = username, password
        if not username:
            raise ConfigError("sasl.username (or sasl.jaas.config's username) is required")
    if protocol == "PLAINTEXT":
        return ClientSecurity(open_plaintext, confluent)
    return ClientSecurity(secure_connector(context, mechanism, username, password), confluent)
