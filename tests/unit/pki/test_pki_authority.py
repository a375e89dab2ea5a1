"""The CA and what it signs: ECDSA P-256 that `ssl` loads, the control plane's names and
addresses as SANs for server authentication, a node's name for client authentication,
nothing valid past the CA; the files 0600; an existing CA refused without --force; the
configuration's agent_tls appended without losing the operator's comments."""

from __future__ import annotations

import ipaddress
import ssl
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from llmgw.errors import ConfigError
from llmgw.pki import ClusterFiles, init_cluster, issue_bundle, normal_serial, serial_text
from llmgw.pki.authority import create_authority, issue_node, issue_server
from llmgw.pki.config_file import add_block, configured_files

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def _sans(cert: x509.Certificate) -> list[str]:
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return [str(n.value) for n in names]


def _usage(cert: x509.Certificate) -> list[x509.ObjectIdentifier]:
    return list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def test_server_and_node_certificates_carry_the_names_the_other_end_checks() -> None:
    ca = create_authority("gw", NOW)
    server = issue_server(ca, ["gw.internal"], ["10.0.0.1"], NOW)
    assert _sans(server.cert) == ["gw.internal", str(ipaddress.ip_address("10.0.0.1"))]
    assert _usage(server.cert) == [ExtendedKeyUsageOID.SERVER_AUTH]
    node = issue_node(ca, "gpu-01", [], NOW)
    assert _sans(node.cert) == ["gpu-01"]
    assert _usage(node.cert) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert node.not_after == NOW + timedelta(days=365)
    assert node.cert.issuer == ca.cert.subject
    short = create_authority("gw", NOW, validity=timedelta(days=10))
    assert issue_node(short, "n", [], NOW).not_after == short.not_after


def test_bad_names_and_addresses_are_refused_naming_the_flag() -> None:
    ca = create_authority("gw", NOW)
    with pytest.raises(ConfigError, match="node name 'a b'"):
        issue_node(ca, "a b", [], NOW)
    with pytest.raises(ConfigError, match=r"--ip '10\.0\.0' is not an IP address"):
        issue_node(ca, "n", ["10.0.0"], NOW)
    with pytest.raises(ConfigError, match="give --name or --ip"):
        issue_server(ca, [], [], NOW)


def test_serials_compare_whatever_padding_openssl_gives() -> None:
    assert serial_text(0xABC) == "ABC"
    assert normal_serial("0ABC") == "ABC"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_init_writes_private_files_ssl_accepts_and_refuses_a_second_ca(tmp_path: Path) -> None:
    files = ClusterFiles.in_dir(tmp_path / "tls")
    init_cluster(files, ["localhost"], ["127.0.0.1"], datetime.now(UTC), force=False)
    assert _mode(tmp_path / "tls") == 0o700
    for path in (files.ca_cert, files.ca_key, files.server_cert, files.server_key):
        assert _mode(path) == 0o600
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(files.server_cert, files.server_key)
    context.load_verify_locations(cafile=files.ca_cert)

    ca_key = files.ca_key.read_bytes()
    with pytest.raises(ConfigError, match=r"already exists .*--force"):
        init_cluster(files, ["localhost"], [], datetime.now(UTC), force=False)
    assert files.ca_key.read_bytes() == ca_key
    init_cluster(files, ["localhost"], [], datetime.now(UTC), force=True)
    assert files.ca_key.read_bytes() != ca_key

    bundle = tmp_path / "n1"
    prepared = issue_bundle(files, "n1", [], bundle, datetime.now(UTC), force=False)
    assert not bundle.exists()  # written only once recorded
    prepared.write()
    issued = prepared.issued
    assert {p.name: _mode(p) for p in bundle.iterdir()} == {
        "node.crt": 0o600,
        "node.key": 0o600,
        "ca.crt": 0o600,
    }
    assert (bundle / "ca.crt").read_bytes() == files.ca_cert.read_bytes()
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.load_cert_chain(bundle / "node.crt", bundle / "node.key")
    assert issued.serial == serial_text(
        x509.load_pem_x509_certificate((bundle / "node.crt").read_bytes()).serial_number
    )
    with pytest.raises(ConfigError, match=r"already exists: give another --out"):
        issue_bundle(files, "n1", [], bundle, datetime.now(UTC), force=False)


def test_agent_tls_is_appended_keeping_comments_and_read_back(tmp_path: Path) -> None:
    config = tmp_path / "llmgw.yaml"
    config.write_text("# my cluster\nlisten: :8080\n")
    assert configured_files(config) is None
    files = ClusterFiles.in_dir(tmp_path / "tls")
    add_block(config, files)
    text = config.read_text()
    assert text.startswith("# my cluster\nlisten: :8080\n")
    assert yaml.safe_load(text)["agent_tls"]["key_file"] == str(files.server_key)
    assert configured_files(config) == files

    half = tmp_path / "half.yaml"
    half.write_text("agent_tls:\n  ca_file: /x/ca.crt\n")
    with pytest.raises(ConfigError, match="names only some of cert_file, key_file and ca_file"):
        configured_files(half)
