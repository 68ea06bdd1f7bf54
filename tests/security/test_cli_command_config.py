"""Our CLI's `--command-config FILE` against a real broker's SSL (mTLS), SASL_PLAINTEXT and
SASL_SSL listeners: the properties (librdkafka's names, or Java's sasl.jaas.config and PEM
trust/key stores) become a TLS + SASL connector for our own clients (AdminClient, Producer,
FetchClient: topics, produce, consume, status...) and settings for confluent-kafka's (consume
--group). A wrong password is SASL_AUTHENTICATION_FAILED on one line, exit code 1; a file that
asks for what we cannot do is a usage error naming the property."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import click
import pytest
import trio

from log.common.errors import KafkaError
from log.common.node_config import ConfigError
from tests.security.conftest import USERS
from tools.admin_client import AdminClient
from tools.client_security import client_security
from tools.consume_cmd import Printer, consume, format_record
from tools.perf_cmd import run_produce_benchmark
from tools.perf_consume import run_consume_benchmark
from tools.produce_cmd import produce_lines

TOPIC = "secured"


def _tls(pki, **more) -> dict[str, str]:
    # the broker requires client certificates on its TLS listeners (ssl.client.auth=required)
    return {
        "ssl.ca.location": str(pki.ca),
        "ssl.certificate.location": str(pki.client_cert),
        "ssl.key.location": str(pki.client_key),
        **more,
    }


def _cases(pki) -> dict[str, tuple[str, dict[str, str]]]:
    """name -> (listener, properties)"""
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="bob" password="{USERS["bob"]}";'
    )
    return {
        "SSL mTLS": ("SSL", {"security.protocol": "SSL", **_tls(pki)}),
        "SASL_PLAINTEXT PLAIN": ("SASL_PLAINTEXT", {
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
            "sasl.username": "alice", "sasl.password": USERS["alice"],
        }),
        "SASL_SSL SCRAM-SHA-512": ("SASL_SSL", {
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice", "sasl.password": USERS["alice"], **_tls(pki),
        }),
        "SASL_SSL Java names": ("SASL_SSL", {
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": jaas,
            "ssl.truststore.location": str(pki.ca), "ssl.truststore.type": "PEM",
            "ssl.certificate.location": str(pki.client_cert),
            "ssl.key.location": str(pki.client_key),
        }),
    }  # fmt: skip


class _Collect(Printer):
    """consume's Printer, keeping the lines instead of writing them to stdout."""

    lines: list[str]

    def emit(self, partition: int, record) -> None:  # noqa: ANN001 - a DecodedRecord
        self.lines = getattr(self, "lines", [])
        self.lines.append(format_record(partition, record, self.fmt, self.key_separator))
        self.count += 1


@pytest.mark.parametrize(
    "case", ["SSL mTLS", "SASL_PLAINTEXT PLAIN", "SASL_SSL SCRAM-SHA-512", "SASL_SSL Java names"]
)
async def test_our_clients_speak_each_protocol(secure_broker, case):
    listener, props = _cases(secure_broker.pki)[case]
    security = client_security(props)
    bootstrap = secure_broker.bootstrap(listener)
    with trio.fail_after(60):
        async with AdminClient(bootstrap, connector=security.connector) as admin:
            await admin.create_topic(TOPIC, 1, 1)
            assert TOPIC in await admin.list_topics()
        summary = await produce_lines(
            bootstrap, TOPIC, io.BytesIO(b"k1:a\nk2:b\n"), key_separator=b":", headers=[],
            acks=-1, partition=None, security=security,
        )  # fmt: skip
        assert summary["records"] == 2
        printer = _Collect("key-value", ":", 2)
        await consume(bootstrap, TOPIC, (), "earliest", None, printer, False, security)
    assert printer.lines == ["k1:a", "k2:b"]


async def test_a_wrong_password_is_refused(secure_broker):
    props = {**_cases(secure_broker.pki)["SASL_SSL SCRAM-SHA-512"][1], "sasl.password": "wrong"}
    security = client_security(props)
    with trio.fail_after(60), pytest.raises(KafkaError) as raised:
        async with AdminClient(secure_broker.bootstrap("SASL_SSL"),
                               connector=security.connector, request_timeout_ms=5000) as admin:  # fmt: skip
            await admin.list_topics()
    assert "SASL_AUTHENTICATION_FAILED" in str(raised.value)


@pytest.mark.parametrize(
    "props, property_named",
    [
        ({"security.protocol": "SASL_SSL"}, "sasl.mechanism"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.username"),
        ({"security.protocol": "SSL", "ssl.truststore.location": "/x.jks"}, "ssl.truststore"),
        ({"security.protocol": "TLS"}, "security.protocol"),
    ],
)
def test_what_we_cannot_do_is_named(props, property_named):
    with pytest.raises(ConfigError, match=property_named):
        client_security(props)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools", *args],
                          capture_output=True, text=True, timeout=90)  # fmt: skip


async def test_the_cli_takes_command_config(secure_broker, tmp_path):
    """The option's wiring, through real processes: status, produce and a group consumer
    (confluent-kafka with the same file); a wrong password is one line and exit code 1."""
    listener, props = _cases(secure_broker.pki)["SASL_SSL SCRAM-SHA-512"]
    path = tmp_path / "client.properties"
    path.write_text("# like up --secure's\n" + "".join(f"{k}={v}\n" for k, v in props.items()))
    common = ["--bootstrap", secure_broker.bootstrap(listener), "--command-config", str(path)]
    await secure_broker.create_topic(TOPIC)

    status = await trio.to_thread.run_sync(lambda: _cli("status", "--json", *common))
    assert status.returncode == 0, status.stderr
    assert {t["name"] for t in json.loads(status.stdout)["topics"]} == {TOPIC}
    produced = await trio.to_thread.run_sync(lambda: subprocess.run(
        [sys.executable, "-m", "tools", "produce", "-t", TOPIC, *common],
        input="x\ny\n", capture_output=True, text=True, timeout=90,
    ))  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    grouped = await trio.to_thread.run_sync(
        lambda: _cli("consume", "-t", TOPIC, "--group", "g", "--from-beginning", *common)
    )
    assert grouped.returncode == 0, grouped.stderr
    assert grouped.stdout.splitlines() == ["x", "y"]

    path.write_text("".join(f"{k}={v}\n" for k, v in {**props, "sasl.password": "no"}.items()))
    refused = await trio.to_thread.run_sync(lambda: _cli("topics", "list", *common))
    assert refused.returncode == 1 and refused.stdout == ""
    assert "SASL_AUTHENTICATION_FAILED" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr


async def test_perf_produces_and_consumes_over_sasl_ssl(secure_broker):
    """perf's quorumlog and confluent clients take the settings (each in a thread: they run
    their own event loop); kafka-python and aiokafka are refused rather than run insecurely."""
    listener, props = _cases(secure_broker.pki)["SASL_SSL SCRAM-SHA-512"]
    security = client_security(props)
    bootstrap = secure_broker.bootstrap(listener)
    await secure_broker.create_topic(TOPIC)
    for runs, client in enumerate(("quorumlog", "confluent"), 1):
        produced = await trio.to_thread.run_sync(lambda c=client: run_produce_benchmark(
            bootstrap=bootstrap, topic=TOPIC, records=20, record_size=10, client=c,
            security=security,
        ))  # fmt: skip
        assert produced["acknowledged"] == 20
        consumed = await trio.to_thread.run_sync(lambda c=client: run_consume_benchmark(
            bootstrap=bootstrap, topic=TOPIC, client=c, security=security,
        ))  # fmt: skip
        assert consumed["records"] >= 20 * runs  # and the senders' warm-up records
    with pytest.raises(click.UsageError, match="--command-config"):
        run_produce_benchmark(bootstrap=bootstrap, topic=TOPIC, records=1, record_size=1,
                              client="kafka-python", security=security)  # fmt: skip
