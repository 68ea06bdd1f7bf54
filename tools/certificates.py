"""A local certificate authority for `quorumlog up --secure` and the security tests.

    ca = CertificateAuthority.create(directory)                 # ca.pem, ca-key.pem
    cert, key = ca.issue(directory, "node-1", hosts=["127.0.0.1", "localhost"])

Keys are EC P-256 (fast to make, accepted by OpenSSL, librdkafka, Python and Java clients);
certificates carry the host names and IP addresses as subjectAltNames (what TLS host-name
checks read), serverAuth and clientAuth usage (the same certificate serves a node's listener
and its replica fetcher's mTLS). Keys are written unencrypted, mode 0600. Built on the
`cryptography` library; nothing here is a production PKI.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 825  # the longest validity Apple's TLS stack accepts for leaf certificates


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "quorumlog"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


@dataclass
class CertificateAuthority:
    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    certificate_path: Path

    @classmethod
    def create(
        cls, directory: Path, common_name: str = "quorumlog local CA"
    ) -> CertificateAuthority:
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(_name(common_name))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )  # fmt: skip
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .sign(key, hashes.SHA256())
        )
        path = directory / "ca.pem"
        path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        _write_key(directory / "ca-key.pem", key)
        return cls(certificate, key, path)

    def issue(
        self,
        directory: Path,
        common_name: str,
        hosts: list[str] | tuple[str, ...] = ("127.0.0.1", "localhost"),
        *,
        not_valid_after: datetime.datetime | None = None,
    ) -> tuple[Path, Path]:
        """Write NAME.pem (certificate) and NAME-key.pem; returns their paths."""
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(min(now, not_valid_after or now) - datetime.timedelta(days=1))
            .not_valid_after(not_valid_after or now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False,
            )
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        certificate = builder.sign(self.key, hashes.SHA256())
        cert_path = directory / f"{common_name}.pem"
        key_path = directory / f"{common_name}-key.pem"
        cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        _write_key(key_path, key)
        return cert_path, key_path
