"""The sans-IO pieces of log/security: SCRAM against RFC 7677's worked example, PLAIN, the
jaas option parser, the certificate-subject principal (from a real TLS handshake)."""

from __future__ import annotations

import base64
import ssl

import pytest
import trio
from hypothesis import example, given, settings
from hypothesis import strategies as st

from log.common.node_config import ConfigError
from log.security.jaas import parse_jaas_config
from log.security.plain import PlainServer, plain_client_message
from log.security.principal import ANONYMOUS, principal_from_certificate
from log.security.sasl_exchange import SaslAuthenticationFailed
from log.security.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramClient,
    ScramServer,
    make_credential,
)

# RFC 7677 section 3: user "user", password "pencil".
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
SERVER_FIRST = f"r={CLIENT_NONCE}{SERVER_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = (
    f"c=biws,r={CLIENT_NONCE}{SERVER_NONCE},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_scram_sha_256_rfc_7677_example_server_side():
    credential = make_credential(SCRAM_SHA_256, "pencil", SALT, 4096)
    server = ScramServer(SCRAM_SHA_256, {"user": credential}.get, SERVER_NONCE)
    step = server.evaluate(f"n,,n=user,r={CLIENT_NONCE}".encode())
    assert step.challenge.decode() == SERVER_FIRST and not step.complete
    step = server.evaluate(CLIENT_FINAL.encode())
    assert step.challenge.decode() == SERVER_FINAL and step.complete
    assert server.authorization_id == "user"


def test_scram_sha_256_rfc_7677_example_client_side():
    client = ScramClient(SCRAM_SHA_256, "user", "pencil", CLIENT_NONCE)
    assert client.first() == f"n,,n=user,r={CLIENT_NONCE}".encode()
    assert client.final(SERVER_FIRST.encode()).decode() == CLIENT_FINAL
    client.verify(SERVER_FINAL.encode())
    with pytest.raises(SaslAuthenticationFailed):
        client.verify(b"v=" + base64.b64encode(b"\x00" * 32))


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
@pytest.mark.parametrize("password, accepted", [("right", True), ("wrong", False)])
def test_scram_round_trip(mechanism, password, accepted):
    credential = make_credential(mechanism, "right", b"salt-salt", 4096)
    server = ScramServer(mechanism, {"u,=x": credential}.get, "server-nonce")
    client = ScramClient(mechanism, "u,=x", password, "client-nonce")  # escaped as u=2C=3Dx
    first = server.evaluate(client.first())
    final = client.final(first.challenge)
    if accepted:
        client.verify(server.evaluate(final).challenge)
        assert server.authorization_id == "u,=x"
    else:
        with pytest.raises(SaslAuthenticationFailed, match="Invalid user credentials"):
            server.evaluate(final)


def test_scram_refuses_an_unknown_user_and_a_foreign_nonce():
    server = ScramServer(SCRAM_SHA_256, {}.get, "s")
    with pytest.raises(SaslAuthenticationFailed, match="Invalid user credentials"):
        server.evaluate(b"n,,n=nobody,r=c")
    credential = make_credential(SCRAM_SHA_256, "pw", b"salt", 4096)
    server = ScramServer(SCRAM_SHA_256, {"u": credential}.get, "s")
    server.evaluate(b"n,,n=u,r=c")
    with pytest.raises(SaslAuthenticationFailed, match="nonce"):
        server.evaluate(b"c=biws,r=other,p=AAAA")


@pytest.mark.parametrize(
    "message, accepted",
    [
        (plain_client_message("alice", "pw"), True),
        (b"alice\x00alice\x00pw", True),
        (b"bob\x00alice\x00pw", False),  # another authorization id
        (plain_client_message("alice", "px"), False),
        (plain_client_message("carol", "pw"), False),
        (b"alice\x00pw", False),
        (b"\x00\x00", False),
        (b"\xff\x00\xfe\x00\xfd", False),
    ],
)
def test_plain(message, accepted):
    server = PlainServer({"alice": "pw"}.get)
    if accepted:
        assert server.evaluate(message).complete and server.authorization_id == "alice"
    else:
        with pytest.raises(SaslAuthenticationFailed):
            server.evaluate(message)


def test_jaas_config():
    jaas = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="a\\"b" user_admin="a\\"b" user_alice="x y";'
    )
    assert (jaas.username, jaas.password) == ("admin", 'a"b')
    assert jaas.users == {"admin": 'a"b', "alice": "x y"}
    assert parse_jaas_config("").users == {}
    for bad in ('username="x";', 'Module required user_="x";', 'M required a="b" junk'):
        with pytest.raises(ConfigError):
            parse_jaas_config(bad)


async def test_principal_from_a_client_certificate(pki):
    """A real TLS handshake in memory; the server side's view of the client certificate."""
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca))
    server_context.load_cert_chain(str(pki.server_cert), str(pki.server_key))
    server_context.verify_mode = ssl.CERT_REQUIRED
    client_context = ssl.create_default_context(cafile=str(pki.ca))
    client_context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    left, right = trio.testing.memory_stream_pair()
    server = trio.SSLStream(left, server_context, server_side=True)
    client = trio.SSLStream(right, client_context, server_hostname="localhost")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.do_handshake)
        nursery.start_soon(client.do_handshake)
    principal = principal_from_certificate(server.getpeercert(binary_form=True))
    assert str(principal) == "User:CN=client,O=quorumlog"
    assert principal_from_certificate(None) is ANONYMOUS


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("handshake"), st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", ""])),
            st.tuples(st.just("authenticate"), st.binary(max_size=300)),
            st.tuples(st.just("scram-shaped"), st.lists(st.sampled_from(
                ["n,,", "n=alice", "r=x", "c=biws", "p=AAAA", "s=c2FsdA==", "i=4096", "a=bob", ",", "="]
            ), max_size=8).map("".join)),
        ),
        max_size=8,
    )
)  # fmt: skip
@example([("handshake", "PLAIN"), ("authenticate", b"\x00alice\x00pw"), ("handshake", "PLAIN")])
def test_authenticator_never_raises_and_admits_only_when_complete(steps):
    """Any sequence of SASL requests with any bytes: typed answers only, and no request other
    than the SASL ones passes unless the exchange completed."""
    from log.security.authenticator import SaslServerAuthenticator, SaslState
    from log.security.credentials import CredentialStore
    from log.security.jaas import JaasConfig

    store = CredentialStore(JaasConfig(users={"alice": "pw"}), lambda: b"salt")
    authenticator = SaslServerAuthenticator(
        ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"), store, lambda: "nonce", reauth_ms=0
    )
    for kind, value in steps:
        if kind == "handshake":
            result = authenticator.handshake(value)
            if result.close:
                break
        else:
            data = value if isinstance(value, bytes) else value.encode()
            answer = authenticator.authenticate(data, now_ms=0)
            assert answer.error_code in (0, 34, 58)  # NONE, ILLEGAL_SASL_STATE, AUTH_FAILED
            if answer.close:
                break
        complete = authenticator.state is SaslState.COMPLETE
        assert authenticator.admits(3, 0) == complete
