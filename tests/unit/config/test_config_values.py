"""The value readers shared by several settings: addresses, networks, backup recipients
and copy targets, secret references."""

from __future__ import annotations

import ipaddress
import re

import pytest

from llmgw.config import parse_backup_recipient, parse_copy_target
from llmgw.config.secrets import check_secret_reference, uses_vault
from llmgw.config.values import is_loopback_host, parse_network, split_host_port

AGE = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"
ED25519_BODY = "AAAAC3NzaC1lZDI1NTE5AAAAIAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g"
RSA_BODY = "AAAAB3NzaC1yc2EAAAADAQABAAAABQDA/+4B"


@pytest.mark.parametrize(
    ("text", "expected"),
    [(":8080", ("", 8080)), ("127.0.0.1:9090", ("127.0.0.1", 9090)), ("[::1]:7443", ("::1", 7443))],
)
def test_split_host_port(text: str, expected: tuple[str, int]) -> None:
    assert split_host_port(text) == expected


@pytest.mark.parametrize("text", ["8080", "::1:80", "host:http", "host:70000", "[::1:80"])
def test_split_host_port_refuses(text: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(text))):
        split_host_port(text)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("localhost", True),
        ("", False),
        ("0.0.0.0", False),
        ("gw.internal", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


def test_an_address_is_a_network_of_one() -> None:
    assert parse_network("192.168.1.7") == ipaddress.ip_network("192.168.1.7/32")
    assert parse_network("10.20.3.4/16") == ipaddress.ip_network("10.20.0.0/16")
    with pytest.raises(ValueError, match="CIDR"):
        parse_network("gw.internal")


def test_age_recipient() -> None:
    assert parse_backup_recipient(AGE).kind == "age"


def test_ssh_recipients_lose_their_comment() -> None:
    ed = parse_backup_recipient(f"ssh-ed25519 {ED25519_BODY} ops@backup")
    assert (ed.kind, ed.key) == ("ssh-ed25519", f"ssh-ed25519 {ED25519_BODY}")
    assert parse_backup_recipient(f"ssh-rsa {RSA_BODY}").kind == "ssh-rsa"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (AGE[:-1] + "q", "age-keygen"),  # one character changed: the checksum fails
        (AGE[:-2], "age-keygen"),
        (f"ssh-rsa {ED25519_BODY}", "damaged"),  # the body says it is another type of key
        ("ssh-ed25519 not-base64!", "damaged"),
        ("ssh-dss AAAAB3NzaC1kc3M=", "neither an age recipient"),
        ("", "neither an age recipient"),
    ],
)
def test_bad_recipients(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_backup_recipient(text)


def test_copy_targets() -> None:
    assert parse_copy_target("/mnt/share/llmgw").kind == "dir"
    ssh = parse_copy_target("ssh://backup@store.internal:2222/srv/llmgw")
    assert (ssh.kind, ssh.user, ssh.host, ssh.port, ssh.path) == (
        "ssh",
        "backup",
        "store.internal",
        2222,
        "/srv/llmgw",
    )
    assert parse_copy_target("ssh://b@h/x").port == 22


@pytest.mark.parametrize(
    "text", ["relative/dir", "ssh://host/path", "ssh://u@h", "ssh://u@h:99999/x", "s3://b/k"]
)
def test_bad_copy_targets(text: str) -> None:
    with pytest.raises(ValueError, match="ssh://user@host"):
        parse_copy_target(text)


@pytest.mark.parametrize(
    "text", ["/etc/llmgw/secret", "relative/file", "env:OIDC_SECRET", "vault:secret/llmgw/oidc#client_secret"]
)
def test_secret_references(text: str) -> None:
    assert check_secret_reference(text) == text


@pytest.mark.parametrize(("text", "fragment"), [("env:", "variable name"), ("vault:secret#x", "vault:mount")])
def test_bad_secret_references(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        check_secret_reference(text)


def test_which_references_need_vault() -> None:
    assert uses_vault("vault:a/b#c")
    assert uses_vault("vault-transit:k")
    assert not uses_vault("env:X")
    assert not uses_vault("/etc/x")
