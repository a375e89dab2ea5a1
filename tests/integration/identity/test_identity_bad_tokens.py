"""A provider that sends bad ID tokens: the gateway (a server process) must refuse each
with a page naming the check, log it, and make nobody.

The provider here is a small HTTP server of the test's own (discovery, keys, token
endpoint) whose token endpoint answers with the ID token the test chose, signed with
joserfc, since a well-behaved provider never sends a tampered, expired or misdirected
token. Everything on the gateway's side is the real thing.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from llmgw.testing.server import GatewayProcess, free_port, start_gateway

CLIENT = "llmgw"
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})
OTHER_KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})
TokenMaker = Callable[[str, str], str]
"""(issuer, nonce of the sign-in) → the ID token the provider will send."""


class Provider:
    def __init__(self) -> None:
        self.make_token: TokenMaker = lambda issuer, nonce: ""
        self.nonce = ""
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.issuer = f"http://127.0.0.1:{self.server.server_port}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _json(self, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    self._json(
                        {
                            "issuer": provider.issuer,
                            "authorization_endpoint": provider.issuer + "/authorize",
                            "token_endpoint": provider.issuer + "/token",
                            "jwks_uri": provider.issuer + "/jwks",
                        }
                    )
                elif self.path == "/jwks":
                    self._json(KeySet([KEY]).as_dict(private=False))
                else:
                    self.send_error(404)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                form = parse_qs(self.rfile.read(length).decode())
                assert form["grant_type"] == ["authorization_code"]
                assert form["code_verifier"][0]  # PKCE: the verifier comes with the code
                token = provider.make_token(provider.issuer, provider.nonce)
                self._json({"access_token": "at", "token_type": "Bearer", "id_token": token})

        return Handler


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    found = Provider()
    thread = threading.Thread(target=found.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        found.server.shutdown()
        thread.join(5)
        found.server.server_close()


@pytest.fixture(scope="module")
def gateway(provider: Provider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    where: Path = tmp_path_factory.mktemp("bad-tokens")
    config = {
        "auth": {
            "enabled": True,
            "store": str(where / "llmgw.db"),
            "oidc": {
                "issuer": provider.issuer,
                "client_id": CLIENT,
                "client_secret_file": "env:OIDC_TEST_SECRET",
            },
        },
        "endpoints": [
            {"id": "none", "url": f"http://127.0.0.1:{free_port()}", "models": ["m"], "engine": "sim"}
        ],
    }
    handle = start_gateway(config, env={**os.environ, "OIDC_TEST_SECRET": "s3cret"})
    try:
        yield handle
    finally:
        handle.stop()


def _claims(issuer: str, nonce: str, changes: dict[str, Any]) -> dict[str, Any]:
    now = int(time.time())
    claims = {
        "iss": issuer,
        "sub": "sub-mallory",
        "aud": CLIENT,
        "exp": now + 300,
        "iat": now,
        "nonce": nonce,
    }
    claims.update({"email": "mallory@example.com", "preferred_username": "mallory", **changes})
    return claims


def _signed(key: RSAKey = KEY, **changes: Any) -> TokenMaker:
    return lambda issuer, nonce: jwt.encode(
        {"alg": "RS256", "kid": "k1"}, _claims(issuer, nonce, changes), key
    )


def _tampered(issuer: str, nonce: str) -> str:
    header, _, signature = _signed()(issuer, nonce).split(".")
    other_payload = _signed(sub="sub-admin")(issuer, nonce).split(".")[1]
    return f"{header}.{other_payload}.{signature}"


def _sign_in(gateway: GatewayProcess, provider: Provider) -> httpx.Response:
    with httpx.Client(timeout=10) as browser:
        start = browser.get(gateway.url + "/auth/login")
        assert start.status_code == 302
        query = parse_qs(urlsplit(start.headers["location"]).query)
        assert query["code_challenge_method"] == ["S256"]
        provider.nonce = query["nonce"][0]
        return browser.get(gateway.url + "/auth/callback", params={"state": query["state"][0], "code": "c1"})


@pytest.mark.parametrize(
    ("make", "code", "words"),
    [
        (_tampered, "bad_signature", "signature"),
        (_signed(OTHER_KEY), "bad_signature", "signature"),
        (_signed(aud="another-client"), "wrong_audience", "client_id"),
        (_signed(exp=int(time.time()) - 3600), "expired_token", "expired"),
        (_signed(nonce="not-this-sign-in"), "wrong_nonce", "nonce"),
        (_signed(iss="https://evil.example.com"), "wrong_issuer", "issuer"),
    ],
    ids=["tampered", "other-key", "wrong-aud", "expired", "wrong-nonce", "wrong-iss"],
)
def test_a_bad_id_token_is_refused_logged_and_makes_nobody(
    provider: Provider, gateway: GatewayProcess, make: TokenMaker, code: str, words: str
) -> None:
    provider.make_token = make
    refused = _sign_in(gateway, provider)
    assert refused.status_code == 403
    assert code in refused.text
    assert words in refused.text
    assert "set-cookie" not in refused.headers
    assert f"sign-in refused ({code})" in gateway.log()
    token = gateway.admin_token()
    people = httpx.get(
        gateway.admin_url + "/api/users", headers={"authorization": f"Bearer {token}"}, timeout=10
    )
    assert people.json()["data"] == []


def test_a_good_token_from_the_same_provider_signs_in(provider: Provider, gateway: GatewayProcess) -> None:
    provider.make_token = _signed()
    landed = _sign_in(gateway, provider)
    assert landed.status_code == 302
    assert landed.headers["location"] == "/auth"
    assert "llmgw_session=" in landed.headers["set-cookie"]
