"""KafkaPrincipal: who a connection is, `User:name` (Kafka's principal type and name).

PLAINTEXT and SSL-without-a-client-certificate connections are `User:ANONYMOUS`; an SSL client
certificate gives the subject's distinguished name in RFC 2253 order (`CN=alice,OU=eng,...`,
Kafka's default `ssl.principal.mapping.rules`); SASL gives the authenticated user name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")

# ssl.getpeercert()'s attribute names -> the short names of RFC 2253.
_SHORT_NAMES = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _escape(value: str) -> str:
    escaped = "".join("\\" + ch if ch in ',+"\\<>;=' else ch for ch in value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped


def principal_from_certificate(peer_cert: dict[str, Any] | None) -> KafkaPrincipal:
    """The principal of a verified client certificate (`SSLObject.getpeercert()`), or
    ANONYMOUS when the client sent none. RFC 2253 lists the RDNs most specific first: the
    reverse of the certificate's order."""
    if not peer_cert or not peer_cert.get("subject"):
        return ANONYMOUS
    rdns = []
    for rdn in reversed(peer_cert["subject"]):
        rdns.append("+".join(f"{_SHORT_NAMES.get(k, k)}={_escape(v)}" for k, v in rdn))
    return KafkaPrincipal(USER_TYPE, ",".join(rdns))
