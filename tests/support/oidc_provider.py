"""A real OpenID provider on loopback for the sign-in tests: oidc-provider-mock (authlib's
authorization server behind Flask), served by werkzeug in a process of its own.

It accepts any client id and secret and any redirect URI; a person is signed in by
posting their subject to its authorization form, and their claims are set beforehand
with `set_user` (PUT /users/<sub>). `Browser` is an httpx client following redirects
with a cookie jar: the gateway's session cookie and the provider's alike.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx

from llmgw.testing.server import free_port

_CSRF = re.compile(r'name=csrf_token value="([^"]+)"')
# The provider in a process of its own, its warnings its own business (it still uses
# authlib APIs that warn of their deprecation, which this suite's filter makes errors).
_SERVE = """
import sys, werkzeug.serving, oidc_provider_mock
app = oidc_provider_mock.app(require_nonce=True)
werkzeug.serving.make_server("127.0.0.1", int(sys.argv[1]), app, threaded=True).serve_forever(0.05)
"""
_READY_S = 20.0


@contextlib.contextmanager
def oidc_provider() -> Iterator[str]:
    """A running provider; yields its issuer URL (http://127.0.0.1:PORT)."""
    port = free_port()
    issuer = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [sys.executable, "-W", "ignore", "-c", _SERVE, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + _READY_S
        while True:
            try:
                if httpx.get(issuer + "/.well-known/openid-configuration", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, "the OIDC provider exited at start"
            assert time.monotonic() < deadline, "the OIDC provider did not answer in time"
            time.sleep(0.05)
        yield issuer
    finally:
        process.terminate()
        process.wait(10)


def set_user(issuer: str, subject: str, claims: dict[str, Any]) -> None:
    """What the provider will say of `subject` in its next ID tokens."""
    httpx.put(f"{issuer}/users/{subject}", json=claims, timeout=5).raise_for_status()


class Browser:
    """A browser: follows redirects, keeps cookies."""

    def __init__(self, gateway_url: str) -> None:
        self.url = gateway_url
        self.http = httpx.Client(follow_redirects=True, timeout=10)

    def close(self) -> None:
        self.http.close()

    def sign_in(self, subject: str, return_to: str | None = None) -> httpx.Response:
        """Through /auth/login to the provider's form, posts `subject`, and follows the
        redirects back to the gateway; the last answer."""
        params = {"return_to": return_to} if return_to else None
        form = self.http.get(self.url + "/auth/login", params=params)
        assert form.status_code == 200, form.text
        assert form.url.path == "/oauth2/authorize", form.url
        return self.http.post(str(form.url), data={"sub": subject})

    def authorization_code_url(self, subject: str) -> str:
        """The callback URL with the code and state the provider sends back, not yet
        followed (to replay it, or to tamper with it)."""
        start = self.http.get(self.url + "/auth/login", follow_redirects=False)
        assert start.status_code == 302, start.text
        back = self.http.post(start.headers["location"], data={"sub": subject}, follow_redirects=False)
        assert back.status_code == 302, back.text
        return str(back.headers["location"])

    def me(self) -> httpx.Response:
        return self.http.get(self.url + "/auth/me")

    def csrf_token(self, path: str = "/auth") -> str:
        page = self.http.get(self.url + path)
        found = _CSRF.search(page.text)
        assert found is not None, page.text
        return found.group(1)
