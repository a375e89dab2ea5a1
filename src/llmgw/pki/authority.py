"""The cluster's certificate authority and the certificates it signs.

Keys are ECDSA on P-256: every OpenSSL that Python's `ssl` links accepts it for TLS 1.2
and 1.3 (Ed25519 needs peers on OpenSSL 1.1.1+ and is refused by some TLS 1.2 stacks),
and signing is cheap. The control plane's certificate is for server authentication and
carries the names and addresses agents dial; a node's is for client authentication and
carries the node's name, which is what the control plane compares with the
`register.node_id` the agent sends (`llmgw.protocol.tls.peer_names`).

Everything here is pure but for the clock, which is passed in.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from llmgw.errors import ConfigError

CA_VALIDITY = timedelta(days=3650)
SERVER_VALIDITY = timedelta(days=365)
NODE_VALIDITY = timedelta(days=365)
BACKDATE = timedelta(minutes=5)
"""Certificates start a little in the past: a machine whose clock runs behind still
accepts one issued this minute."""

_NODE_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")


def check_node_name(name: str) -> str:
    """A node name fit for a certificate's DNS name (and the agent's --node-id)."""
    if not _NODE_NAME.match(name):
        raise ConfigError(
            [
                f"node name {name!r} cannot go in a certificate: use letters, digits, '.' and '-'"
                " (as the agent's --node-id, its host name by default)"
            ]
        )
    return name


def parse_ips(
    addresses: Sequence[str], flag: str = "--ip"
) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    out: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    for text in addresses:
        try:
            out.append(ipaddress.ip_address(text))
        except ValueError:
            raise ConfigError(
                [f"{flag} {text!r} is not an IP address: give one like 10.0.0.5 or fd00::5"]
            ) from None
    return out


def serial_text(serial: int) -> str:
    """A serial as the store and `ssl`'s peer certificate both can be read to: upper-case
    hex without leading zeros."""
    return format(serial, "X")


def normal_serial(text: str) -> str:
    """`serial_text` of a hex serial as OpenSSL writes it (padded to whole bytes)."""
    return serial_text(int(text, 16))


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    @property
    def serial(self) -> str:
        return serial_text(self.cert.serial_number)

    @property
    def not_after(self) -> datetime:
        return self.cert.not_valid_after_utc


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def create_authority(cluster: str, now: datetime, validity: timedelta = CA_VALIDITY) -> Issued:
    """A new self-signed CA named after the cluster (its first name)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "llmgw"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"llmgw cluster CA {cluster}"),
        ]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Issued(cert, key)


def load_authority(cert_pem: bytes, key_pem: bytes) -> Issued:
    """The CA from its files; ConfigError when they are not a CA and its key."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
    except ValueError as exc:
        raise ConfigError([f"the cluster CA cannot be read: {exc}"]) from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.public_key() != cert.public_key():
        raise ConfigError(
            ["the cluster CA's key does not belong to its certificate: give the ca.key made with it"]
        )
    return Issued(cert, key)


def _issue(
    authority: Issued,
    common_name: str,
    names: Sequence[x509.GeneralName],
    usage: x509.ObjectIdentifier,
    now: datetime,
    validity: timedelta,
) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(authority.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        # Never past the CA's own end: a chain is only as valid as its shortest link.
        .not_valid_after(min(now + validity, authority.cert.not_valid_after_utc))
        .add_extension(x509.SubjectAlternativeName(list(names)), critical=False)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(authority.key.public_key()), critical=False
        )
        .sign(authority.key, hashes.SHA256())
    )
    return Issued(cert, key)


def issue_server(
    authority: Issued,
    names: Sequence[str],
    ips: Sequence[str],
    now: datetime,
    validity: timedelta = SERVER_VALIDITY,
) -> Issued:
    """The control plane's certificate: every name and address agents may dial."""
    if not names and not ips:
        raise ConfigError(["give --name or --ip: the names and addresses agents dial the control plane by"])
    general: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    general += [x509.IPAddress(ip) for ip in parse_ips(ips)]
    common = names[0] if names else ips[0]
    return _issue(authority, common, general, ExtendedKeyUsageOID.SERVER_AUTH, now, validity)


def issue_node(
    authority: Issued,
    name: str,
    ips: Sequence[str],
    now: datetime,
    validity: timedelta = NODE_VALIDITY,
) -> Issued:
    """A node's certificate, naming the node as the control plane expects it to register."""
    check_node_name(name)
    general: list[x509.GeneralName] = [x509.DNSName(name)]
    general += [x509.IPAddress(ip) for ip in parse_ips(ips)]
    return _issue(authority, name, general, ExtendedKeyUsageOID.CLIENT_AUTH, now, validity)
