"""The replica fetcher's way in (log/replication/inter_broker_connector.py) against a real
broker's SASL_SSL listener: the right broker credentials get a working Kafka connection; a wrong
password, an unknown user or an untrusted broker certificate are refused -- a broker without the
right credentials cannot fetch as a replica."""

from __future__ import annotations

import pytest
import trio

from bench.local_quorum import node_config
from log.protocol.client_codec import ClientCodec
from log.protocol.metadata import METADATA_REQUEST
from log.replication.inter_broker_connector import (
    InterBrokerAuthenticationError,
    inter_broker_connector,
)
from tests.security.conftest import USERS


def fetcher_config(tmp_path, pki, mechanism: str, user: str, password: str, **props):
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{password}";'
    )
    values = {
        "listeners": "SASL_SSL://127.0.0.1:9095,CONTROLLER://127.0.0.1:1",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": mechanism,
        "sasl.jaas.config": jaas,
        "ssl.ca.location": str(pki.ca),
        "ssl.certificate.location": str(pki.client_cert),
        "ssl.key.location": str(pki.client_key),
        **props,
    }
    return node_config(tmp_path / "fetcher", **values)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_broker_credentials_get_a_kafka_connection(secure_broker, tmp_path, mechanism):
    config = fetcher_config(tmp_path, secure_broker.pki, mechanism, "bob", USERS["bob"])
    stream = await inter_broker_connector(config)("127.0.0.1", secure_broker.ports["SASL_SSL"])
    codec = ClientCodec(client_id="t")
    await stream.send_all(codec.encode_request(3, 12, METADATA_REQUEST.cls(topics=[])))
    with trio.fail_after(10):
        while not (responses := codec.receive_data(await stream.receive_some(1 << 16))):
            pass
    assert [b.port for b in responses[0].body.brokers] == [secure_broker.ports["SASL_SSL"]]
    await stream.aclose()


@pytest.mark.parametrize(
    "mechanism, user, password",
    [("SCRAM-SHA-512", "bob", "wrong"), ("PLAIN", "alice", "wrong"), ("SCRAM-SHA-256", "eve", "x")],
)
async def test_wrong_broker_credentials_are_refused(secure_broker, tmp_path, mechanism, user,
                                                    password):  # fmt: skip
    config = fetcher_config(tmp_path, secure_broker.pki, mechanism, user, password)
    with pytest.raises(InterBrokerAuthenticationError, match="SASL_AUTHENTICATION_FAILED"):
        await inter_broker_connector(config)("127.0.0.1", secure_broker.ports["SASL_SSL"])


async def test_an_untrusted_broker_certificate_is_refused(secure_broker, tmp_path):
    pki = secure_broker.pki
    other_ca = pki.untrusted_cert.parent / "ca.pem"  # the other CA did not sign the broker
    config = fetcher_config(tmp_path, pki, "PLAIN", "bob", USERS["bob"],
                            **{"ssl.ca.location": str(other_ca)})  # fmt: skip
    with pytest.raises(trio.BrokenResourceError):
        await inter_broker_connector(config)("127.0.0.1", secure_broker.ports["SASL_SSL"])
