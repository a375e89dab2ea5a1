"""Mutual TLS on the agent port, with a CA generated here: an agent with a certificate
from the cluster CA registers; a client without one, or with one from another CA, is
refused in the handshake; a certificate for another node is refused at registration.
And the agent port's own rules: TLS, or plaintext only when asked, on loopback."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from agent_helpers import AgentStarter, small_inventory
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from llmgw.config.tls import TLS
from llmgw.errors import AgentError, ConfigError
from llmgw.protocol.messages import AGENT_PATH, Register, decode_from_control, encode
from llmgw.protocol.tls import agent_listener, client_context, server_context
from llmgw.testing.agent import FakeControlPlane


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Authority:
    """A CA that signs certificates into a directory."""

    name: str
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    directory: Path

    @property
    def cert_file(self) -> Path:
        return self.directory / f"{self.name}-ca.pem"

    @classmethod
    def create(cls, name: str, directory: Path) -> Authority:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} CA")])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        authority = cls(name, key, cert, directory)
        authority.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return authority

    def issue(self, common_name: str, *, server: bool) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        names: list[x509.GeneralName] = [x509.DNSName(common_name)]
        if server:
            names += [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )
        issued = Issued(
            self.directory / f"{self.name}-{common_name}.pem",
            self.directory / f"{self.name}-{common_name}.key",
        )
        issued.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        issued.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        issued.key.chmod(0o600)
        return issued


@dataclass(frozen=True)
class Pki:
    cluster: Authority
    server: Issued
    node: Issued
    foreign_node: Issued

    def tls(self) -> TLS:
        return TLS(
            cert_file=str(self.server.cert),
            key_file=str(self.server.key),
            ca_file=str(self.cluster.cert_file),
        )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    cluster = Authority.create("cluster", directory)
    foreign = Authority.create("foreign", directory)
    return Pki(
        cluster=cluster,
        server=cluster.issue("control", server=True),
        node=cluster.issue("n1", server=False),
        foreign_node=foreign.issue("n1", server=False),
    )


@pytest.fixture
def secure_control(pki: Pki) -> Iterator[FakeControlPlane]:
    with FakeControlPlane(ssl_context=server_context(pki.tls()), require_cert_name=True) as plane:
        yield plane


def _tls_args(pki: Pki, issued: Issued) -> tuple[str, ...]:
    return (
        "--tls-cert",
        str(issued.cert),
        "--tls-key",
        str(issued.key),
        "--tls-ca",
        str(pki.cluster.cert_file),
    )


def test_an_agent_with_a_cluster_certificate_registers(
    secure_control: FakeControlPlane, start_agent: AgentStarter, pki: Pki
) -> None:
    start_agent(secure_control.address, "n1", *_tls_args(pki, pki.node), insecure=False)
    register = secure_control.wait_registered("n1")
    assert register.node_id == "n1"
    assert "n1" in secure_control.agent("n1").cert_names


UPGRADE = (
    f"GET {AGENT_PATH} HTTP/1.1\r\nHost: control\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
).encode()


def _upgrade(address: str, context: ssl.SSLContext, first: bytes = b"") -> bytes:
    """A WebSocket upgrade over TLS with blocking sockets, each closed when done: what
    the server answers (to `first`, a frame sent after the upgrade, when given), or the
    error that refused the client. Blocking sockets, not an event loop: a loop closed
    while a TLS connection is still shutting down leaves its socket to the collector."""
    host, port = address.rsplit(":", 1)
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        tls.sendall(UPGRADE)
        answer = tls.recv(1024)
        if not first or not answer.startswith(b"HTTP/1.1 101"):
            return answer
        tls.sendall(first)
        return _read_frame(tls)


def _text_frame(text: str) -> bytes:
    """A client's masked WebSocket text frame (RFC 6455 5.2)."""
    payload = text.encode()
    mask = b"\x01\x02\x03\x04"
    size = len(payload)
    header = b"\x81" + (bytes([0x80 | size]) if size < 126 else b"\xfe" + size.to_bytes(2, "big"))
    return header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def _read_frame(tls: ssl.SSLSocket) -> bytes:
    """One unmasked frame's payload from the server."""
    data = b""
    while len(data) < 2 or len(data) < _frame_end(data):
        chunk = tls.recv(65536)
        if not chunk:
            break
        data += chunk
    size = data[1] & 0x7F
    start = 2 if size < 126 else 4
    if size == 126:
        size = int.from_bytes(data[2:4], "big")
    return data[start : start + size]


def _frame_end(data: bytes) -> int:
    size = data[1] & 0x7F
    if size < 126:
        return 2 + size
    return 4 + int.from_bytes(data[2:4], "big") if len(data) >= 4 else 4


def _register(address: str, context: ssl.SSLContext, node_id: str) -> str:
    """The type of the control plane's answer to a registration."""
    frame = _text_frame(encode(Register(node_id=node_id, inventory=small_inventory())))
    return decode_from_control(_upgrade(address, context, frame)).type


def _refused(address: str, context: ssl.SSLContext) -> bool:
    # With TLS 1.3 the client finishes its side of the handshake before the server has
    # judged its certificate; the refusal then arrives as an alert on the first read.
    try:
        return _upgrade(address, context) == b""
    except (ssl.SSLError, ConnectionError):
        return True


def test_a_client_without_a_certificate_is_refused(secure_control: FakeControlPlane, pki: Pki) -> None:
    context = ssl.create_default_context(cafile=str(pki.cluster.cert_file))
    assert _refused(secure_control.address, context)
    assert not secure_control.agents


def test_a_certificate_from_another_authority_is_refused(secure_control: FakeControlPlane, pki: Pki) -> None:
    context = client_context(
        cert_file=str(pki.foreign_node.cert),
        key_file=str(pki.foreign_node.key),
        ca_file=str(pki.cluster.cert_file),
    )
    assert _refused(secure_control.address, context)
    assert not secure_control.agents


def test_a_cluster_certificate_is_let_through_the_same_door(
    secure_control: FakeControlPlane, pki: Pki
) -> None:
    context = client_context(
        cert_file=str(pki.node.cert), key_file=str(pki.node.key), ca_file=str(pki.cluster.cert_file)
    )
    assert _register(secure_control.address, context, "n1") == "registered"


def test_the_agent_port_is_tls_or_explicitly_plaintext_on_loopback(pki: Pki) -> None:
    with pytest.raises(ConfigError, match="agent_insecure: true"):
        agent_listener(":7443", TLS(), insecure=False)
    plain = agent_listener(":7443", TLS(), insecure=True)
    assert (plain.host, plain.port, plain.ssl) == ("127.0.0.1", 7443, None)
    assert agent_listener("10.0.0.5:7443", TLS(), insecure=True).host == "10.0.0.5"
    secure = agent_listener(":7443", pki.tls(), insecure=True)
    assert secure.host == ""  # every interface, IPv4 and IPv6, as the seed's ":7443" means
    with pytest.raises(ConfigError, match=r"agent_listen: '7443' has no port"):
        agent_listener("7443", pki.tls(), insecure=True)
    assert secure.ssl is not None
    assert secure.ssl.verify_mode == ssl.CERT_REQUIRED


def test_missing_or_half_given_material_is_named(tmp_path: Path) -> None:
    with pytest.raises(AgentError, match="--tls-cert, --tls-key and --tls-ca"):
        client_context(cert_file="a.pem", key_file="", ca_file="")
    with pytest.raises(AgentError, match=r"certificate .*missing\.pem does not exist"):
        client_context(cert_file=str(tmp_path / "missing.pem"), key_file="k", ca_file="c")
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate")
    with pytest.raises(AgentError, match="cannot be used"):
        server_context(TLS(cert_file=str(bad), key_file=str(bad), ca_file=str(bad)))


def test_a_certificate_for_another_node_is_refused_at_registration(
    secure_control: FakeControlPlane, pki: Pki
) -> None:
    context = client_context(
        cert_file=str(pki.node.cert), key_file=str(pki.node.key), ca_file=str(pki.cluster.cert_file)
    )
    assert _register(secure_control.address, context, "n2") == "error"
    assert secure_control.refused == ["n2: node 'n2' is not named by its certificate"]
    assert "n2" not in secure_control.agents
