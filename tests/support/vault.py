"""A Vault stand-in on loopback answering exactly the parts of Vault's HTTP API llmgw
uses, as documented (developer.hashicorp.com/vault/api-docs):

- `GET  /v1/auth/token/lookup-self`        the token's ttl and renewable
- `POST /v1/auth/token/renew-self`         a renewed lease under `auth`
- `POST /v1/auth/<mount>/login`            AppRole: role_id + secret_id give `auth.client_token`
- `GET  /v1/<mount>/data/<path>`           KV version 2: the fields under `data.data`
- `POST /v1/<mount>/encrypt/<key>`         transit: base64 plaintext to `vault:v1:...`
- `POST /v1/<mount>/decrypt/<key>`         and back

A missing or unknown token is 403 with Vault's `{"errors": ["permission denied"]}`; an
X-Vault-Namespace other than the configured one sees nothing (404), as a namespace does.
It runs on a thread of its own with its own event loop. `RealVault` seeds a real Vault
(VAULT_ADDR, VAULT_TOKEN) the same way, so the tests run against either.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import ipaddress
import os
import secrets
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web
from cryptography import x509
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.x509.oid import NameOID

from llmgw.testing.server import free_port


@dataclass
class StandInVault:
    """The stand-in's state; seed it with `put_kv`, `add_approle`, `make_transit_key`."""

    url: str = ""
    namespace: str = ""
    token_ttl_s: int = 3600
    root_token: str = field(default_factory=lambda: "hvs." + secrets.token_urlsafe(24))
    kv: dict[str, dict[str, str]] = field(default_factory=dict)
    approles: dict[str, str] = field(default_factory=dict)
    transit: dict[str, bytes] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    renewals: int = 0
    logins: int = 0

    def put_kv(self, mount_path: str, data: dict[str, str]) -> None:
        """`secret/llmgw/scim` holds `data` (mount first)."""
        self.kv[mount_path] = dict(data)

    def add_approle(self, role_id: str, secret_id: str) -> None:
        self.approles[role_id] = secret_id

    def make_transit_key(self, name: str) -> None:
        self.transit[name] = AESGCM.generate_key(bit_length=256)

    # The HTTP side.

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/v1/{tail:.*}", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.Response:
        tail = request.match_info["tail"]
        if request.headers.get("X-Vault-Namespace", "") != self.namespace:
            return _errors(404, "no handler for route")
        body: dict[str, Any] = await request.json() if request.can_read_body else {}
        parts = tail.split("/")
        if request.method == "POST" and len(parts) == 3 and parts[0] == "auth" and parts[2] == "login":
            if self.approles.get(str(body.get("role_id"))) != body.get("secret_id"):
                return _errors(400, "invalid role or secret ID")
            self.logins += 1
            return web.json_response({"auth": self._grant()})
        token = request.headers.get("X-Vault-Token", "")
        if token != self.root_token and token not in self.tokens:
            return _errors(403, "permission denied")
        if tail == "auth/token/lookup-self" and request.method == "GET":
            ttl = 0 if token == self.root_token else self.tokens[token]
            return web.json_response({"data": {"ttl": ttl, "renewable": ttl > 0}})
        if tail == "auth/token/renew-self" and request.method == "POST":
            self.renewals += 1
            return web.json_response(
                {"auth": {"client_token": token, "lease_duration": self.token_ttl_s, "renewable": True}}
            )
        if len(parts) >= 3 and parts[1] == "data" and request.method == "GET":
            data = self.kv.get(parts[0] + "/" + "/".join(parts[2:]))
            if data is None:
                return _errors(404, "")
            return web.json_response({"data": {"data": data, "metadata": {"version": 1}}})
        if len(parts) == 3 and parts[1] in ("encrypt", "decrypt") and request.method == "POST":
            return self._transit(parts[1], parts[2], body)
        return _errors(404, "no handler for route")

    def _grant(self) -> dict[str, Any]:
        token = "hvs." + secrets.token_urlsafe(24)
        self.tokens[token] = self.token_ttl_s
        return {"client_token": token, "lease_duration": self.token_ttl_s, "renewable": True}

    def _transit(self, op: str, name: str, body: dict[str, Any]) -> web.Response:
        key = self.transit.get(name)
        if key is None:
            return _errors(400, "encryption key not found")
        if op == "encrypt":
            nonce = os.urandom(12)
            sealed = AESGCM(key).encrypt(nonce, base64.b64decode(body["plaintext"]), None)
            return web.json_response(
                {"data": {"ciphertext": "vault:v1:" + base64.b64encode(nonce + sealed).decode()}}
            )
        try:
            raw = base64.b64decode(str(body["ciphertext"]).removeprefix("vault:v1:"))
            plain = AESGCM(key).decrypt(raw[:12], raw[12:], None)
        except (InvalidTag, ValueError):
            return _errors(400, "cipher: message authentication failed")
        return web.json_response({"data": {"plaintext": base64.b64encode(plain).decode()}})


def _errors(status: int, message: str) -> web.Response:
    return web.json_response({"errors": [message] if message else []}, status=status)


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 that is its own authority, and its key: (cert, key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "vault stand-in")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "vault.pem", directory / "vault.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_file, key_file


@contextlib.contextmanager
def standin_vault(namespace: str = "", tls: tuple[Path, Path] | None = None) -> Iterator[StandInVault]:
    """A running stand-in on 127.0.0.1 (over TLS with `tls`, a certificate and its key);
    stopped on the way out."""
    vault = StandInVault(namespace=namespace)
    port = free_port()
    context = None
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(*tls)
    vault.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(vault.app())
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield vault
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.run_until_complete(runner.cleanup())
        loop.close()


@dataclass
class RealVault:
    """A real Vault (VAULT_ADDR, VAULT_TOKEN), seeded through its API the same way."""

    url: str
    root_token: str
    namespace: str = ""

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> None:
        answer = httpx.request(
            method, f"{self.url}/v1/{path}", json=body, headers={"X-Vault-Token": self.root_token}, timeout=10
        )
        assert answer.status_code < 300 or answer.status_code == 400, answer.text

    def put_kv(self, mount_path: str, data: dict[str, str]) -> None:
        mount, _, path = mount_path.partition("/")
        self._call("POST", f"{mount}/data/{path}", {"data": data})

    def make_transit_key(self, name: str) -> None:
        self._call("POST", "sys/mounts/transit", {"type": "transit"})  # 400 when already mounted
        self._call("POST", f"transit/keys/{name}", {})
