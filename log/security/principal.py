"""KafkaPrincipal: who a connection is, `User:name` (Kafka's principal type and name).

PLAINTEXT and SSL-without-a-client-certificate connections are `User:ANONYMOUS`; an SSL client
certificate gives the subject's distinguished name in RFC 2253 order (`CN=alice,OU=eng,...`,
Kafka's default `ssl.principal.mapping.rules`); SASL gives the authenticated user name.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptography import x509

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def principal_from_certificate(der: bytes | None) -> KafkaPrincipal:
    """The principal of a verified client certificate (`getpeercert(binary_form=True)`), or
    ANONYMOUS when the client sent none: the subject as RFC 4514 (RFC 2253's successor, the
    same string for ordinary names: most specific first, `CN=alice,O=example`), which
    `cryptography` renders."""
    if not der:
        return ANONYMOUS
    subject = x509.load_der_x509_certificate(der).subject
    return KafkaPrincipal(USER_TYPE, subject.rfc4514_string()) if subject else ANONYMOUS
