"""Real Kafka clients over TLS and SASL against a real KafkaServer (tests/security/conftest.py):
confluent-kafka (librdkafka) with SASL_SSL + SCRAM-SHA-256/-512 and PLAIN, SSL with a client
certificate, SASL_PLAINTEXT; kcat; kafka-python and aiokafka over SASL_SSL. Bad credentials are
refused with the client seeing an authentication error, and the broker keeps serving.

Each client runs in a worker thread (`trio.to_thread.run_sync`); every successful case produces
and consumes through the listener the client bootstrapped on -- which only works if Metadata
answered that listener's endpoints (a TLS client sent to the PLAINTEXT port cannot connect).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time

import pytest
import trio

from tests.security.conftest import USERS

pytestmark = pytest.mark.interop

N = 50


def _confluent_round_trip(bootstrap: str, topic: str, conf: dict) -> list[bytes]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    failures: list = []
    for i in range(N):
        producer.produce(topic, value=b"value-%d" % i,
                         on_delivery=lambda err, msg: err and failures.append(err))  # fmt: skip
    assert producer.flush(20) == 0 and not failures, failures
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100, **conf})  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        for _ in range(100):
            for msg in consumer.consume(100, 0.2):
                assert msg.error() is None, msg.error()
                values.append(msg.value())
            if len(values) >= N:
                break
    finally:
        consumer.close()
    return values


def _sasl_ssl(pki, mechanism: str, user: str = "alice", password: str | None = None) -> dict:
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": USERS.get(user, "x") if password is None else password,
        "ssl.ca.location": str(pki.ca),
        # the broker requires client certificates on its TLS listeners (ssl.client.auth)
        "ssl.certificate.location": str(pki.client_cert),
        "ssl.key.location": str(pki.client_key),
    }


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("user", ["alice", "bob"])
async def test_confluent_sasl_ssl(secure_broker, mechanism, user):
    await secure_broker.create_topic("t")
    conf = _sasl_ssl(secure_broker.pki, mechanism, user)
    values = await trio.to_thread.run_sync(
        _confluent_round_trip, secure_broker.bootstrap("SASL_SSL"), "t", conf
    )
    assert values == [b"value-%d" % i for i in range(N)]


async def test_confluent_sasl_plaintext_scram(secure_broker):
    await secure_broker.create_topic("t")
    conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "alice", "sasl.password": USERS["alice"]}  # fmt: skip
    values = await trio.to_thread.run_sync(
        _confluent_round_trip, secure_broker.bootstrap("SASL_PLAINTEXT"), "t", conf
    )
    assert len(values) == N


async def test_confluent_ssl_client_certificate(secure_broker):
    await secure_broker.create_topic("t")
    pki = secure_broker.pki
    conf = {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca),
            "ssl.certificate.location": str(pki.client_cert),
            "ssl.key.location": str(pki.client_key)}  # fmt: skip
    values = await trio.to_thread.run_sync(
        _confluent_round_trip, secure_broker.bootstrap("SSL"), "t", conf
    )
    assert len(values) == N


def _confluent_auth_error(bootstrap: str, conf: dict, wanted: set[int]) -> list:
    """The errors a client reports while trying to reach the cluster (none: it got in): its
    error callbacks until one of the `wanted` codes shows up; if none does within 3 s, also
    the error of a metadata request that is never answered (then 2 s more of callbacks)."""
    from confluent_kafka.admin import AdminClient

    errors: list = []
    admin = AdminClient({"bootstrap.servers": bootstrap, "error_cb": errors.append, **conf})

    def poll_until(seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:  # error_cb is served by poll
            if {getattr(e, "code", lambda: None)() for e in errors} & wanted:
                return True
            admin.poll(0.1)
        return False

    if not poll_until(3):
        try:
            admin.list_topics(timeout=3)
        except Exception as exc:  # KafkaException: the metadata request never got an answer
            errors.append(exc.args[0] if exc.args else exc)
        poll_until(2)
    return errors


@pytest.mark.parametrize(
    "mechanism, user, password",
    [
        ("PLAIN", "alice", "wrong"),
        ("PLAIN", "mallory", "x"),
        ("SCRAM-SHA-256", "alice", "wrong"),
        ("SCRAM-SHA-512", "mallory", "x"),
    ],
)
async def test_confluent_bad_credentials_refused(secure_broker, mechanism, user, password):
    from confluent_kafka import KafkaError

    conf = _sasl_ssl(secure_broker.pki, mechanism, user, password)
    errors = await trio.to_thread.run_sync(
        _confluent_auth_error,
        secure_broker.bootstrap("SASL_SSL"),
        conf,
        {KafkaError._AUTHENTICATION},
    )
    codes = {getattr(e, "code", lambda: None)() for e in errors}
    assert KafkaError._AUTHENTICATION in codes, errors
    assert secure_broker.server.failed_authentication_count >= 1
    # ... and the broker still serves a good client
    await test_confluent_sasl_plaintext_scram(secure_broker)


@pytest.mark.parametrize("which", ["untrusted", "expired"])
async def test_confluent_bad_client_certificate_refused(secure_broker, which):
    from confluent_kafka import KafkaError

    pki = secure_broker.pki
    conf = {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca),
            "ssl.certificate.location": str(getattr(pki, f"{which}_cert")),
            "ssl.key.location": str(getattr(pki, f"{which}_key"))}  # fmt: skip
    refused = {KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._AUTHENTICATION}
    errors = await trio.to_thread.run_sync(
        _confluent_auth_error, secure_broker.bootstrap("SSL"), conf, refused
    )
    codes = {getattr(e, "code", lambda: None)() for e in errors}
    assert codes & refused, errors
    assert secure_broker.server.failed_authentication_count >= 1


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "SSL"])
async def test_kcat_sasl_ssl_and_ssl(secure_broker, mechanism):
    await secure_broker.create_topic("k")
    options = []
    settings = _sasl_ssl(secure_broker.pki, mechanism)
    if mechanism == "SSL":  # a client certificate, no SASL
        settings = {k: v for k, v in settings.items() if not k.startswith("sasl.")}
        settings["security.protocol"] = "SSL"
    for key, value in settings.items():
        options += ["-X", f"{key}={value}"]
    bootstrap = secure_broker.bootstrap("SSL" if mechanism == "SSL" else "SASL_SSL")

    def run() -> str:
        subprocess.run(["kcat", "-b", bootstrap, *options, "-P", "-t", "k"],
                       input=b"one\ntwo\nthree\n", check=True, timeout=30)  # fmt: skip
        out = subprocess.run(["kcat", "-b", bootstrap, *options, "-C", "-t", "k", "-o",
                              "beginning", "-e", "-q"], capture_output=True, check=True,
                             timeout=30)  # fmt: skip
        return out.stdout.decode()

    assert (await trio.to_thread.run_sync(run)).split() == ["one", "two", "three"]


def _kafka_python_round_trip(bootstrap: str, pki, mechanism: str) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    conf = dict(security_protocol="SASL_SSL", sasl_mechanism=mechanism,
                sasl_plain_username="alice", sasl_plain_password=USERS["alice"],
                ssl_cafile=str(pki.ca), ssl_certfile=str(pki.client_cert),
                ssl_keyfile=str(pki.client_key))  # fmt: skip
    producer = KafkaProducer(bootstrap_servers=bootstrap, **conf)
    for i in range(N):
        producer.send("t", b"kp-%d" % i)
    producer.flush(20)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=10_000, **conf)  # fmt: skip
    consumer.assign([TopicPartition("t", 0)])
    consumer.seek_to_beginning()
    values = []
    for msg in consumer:  # ends after N records, or after 10 s without one
        values.append(msg.value)
        if len(values) == N:
            break
    consumer.close()
    return values


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_kafka_python_sasl_ssl(secure_broker, mechanism):
    await secure_broker.create_topic("t")
    values = await trio.to_thread.run_sync(
        _kafka_python_round_trip, secure_broker.bootstrap("SASL_SSL"), secure_broker.pki, mechanism
    )
    assert values == [b"kp-%d" % i for i in range(N)]


def _aiokafka_round_trip(bootstrap: str, pki, mechanism: str) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.helpers import create_ssl_context

    async def main() -> list[bytes]:
        context = create_ssl_context(cafile=str(pki.ca), certfile=str(pki.client_cert),
                                     keyfile=str(pki.client_key))  # fmt: skip
        conf = dict(bootstrap_servers=bootstrap, security_protocol="SASL_SSL",
                    sasl_mechanism=mechanism, sasl_plain_username="bob",
                    sasl_plain_password=USERS["bob"], ssl_context=context)  # fmt: skip
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            for i in range(N):
                await producer.send_and_wait("t", b"ak-%d" % i)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(enable_auto_commit=False, **conf)
        await consumer.start()
        try:
            tp = TopicPartition("t", 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            batches = await consumer.getmany(tp, timeout_ms=5000, max_records=N)
            return [msg.value for msg in batches.get(tp, [])]
        finally:
            await consumer.stop()

    return asyncio.run(main())


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_aiokafka_sasl_ssl(secure_broker, mechanism):
    await secure_broker.create_topic("t")
    values = await trio.to_thread.run_sync(
        _aiokafka_round_trip, secure_broker.bootstrap("SASL_SSL"), secure_broker.pki, mechanism
    )
    assert values == [b"ak-%d" % i for i in range(N)]
