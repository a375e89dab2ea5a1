"""`landing.docs_sign_in` on a running gateway: with sign-in served, /docs and
/openapi.json send a visitor to sign in and open once they have (or to an API key);
with auth but no sign-in, an API key is what opens them; with auth off, they are
closed. The landing page stays public and shows the way to a key, and
`landing.language` is the pages' language for a visitor who asks for none."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from llmgw.testing.server import GatewayProcess, free_port, running_gateway
from support.oidc_provider import Browser, oidc_provider, set_user
from support.signin import admin_call, signin_gateway, until


@pytest.fixture(scope="module")
def issuer() -> Iterator[str]:
    with oidc_provider() as url:
        yield url


@pytest.fixture(scope="module")
def gateway(issuer: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    handle = signin_gateway(
        issuer,
        tmp_path_factory.mktemp("docs-sign-in"),
        signup_open=True,
        settings={"landing": {"docs_sign_in": True, "contact": "#llm-help"}},
    )
    try:
        yield handle
    finally:
        handle.stop()


def _key(gateway: GatewayProcess) -> str:
    for path, body in (
        ("orgs", {"id": "docs-org"}),
        ("teams", {"id": "docs-team", "org": "docs-org"}),
        ("projects", {"id": "docs", "team": "docs-team"}),
    ):
        assert admin_call(gateway, "POST", path, body).status_code in (200, 201)
    made = admin_call(gateway, "POST", "keys", {"project": "docs"})
    assert made.status_code in (200, 201), made.text
    key: str = made.json()["key"]
    return key


@pytest.mark.parametrize("path", ["/docs", "/openapi.json"])
def test_a_visitor_is_sent_to_sign_in(gateway: GatewayProcess, path: str) -> None:
    response = httpx.get(gateway.url + path, timeout=10)
    assert response.status_code == 302
    assert response.headers["location"] == f"/auth/login?return_to={path}"


def test_signing_in_opens_the_docs(issuer: str, gateway: GatewayProcess) -> None:
    set_user(issuer, "sub-dora", {"email": "dora@example.com", "preferred_username": "dora"})
    browser = Browser(gateway.url)
    try:
        # Signup is open: the first sign-in makes a person waiting for approval, who is
        # shown that rather than the docs or the sign-in again.
        waiting = browser.sign_in("sub-dora", return_to="/docs")
        assert waiting.url.path == "/auth"
        assert "Waiting for approval" in waiting.text
        assert browser.http.get(gateway.url + "/docs").url.path == "/auth"
        approved = admin_call(gateway, "POST", "users/dora/approve")
        assert approved.status_code == 200, approved.text
        until(lambda: browser.me().json()["status"] == "active", "the approval seen by the session")
        landed = browser.http.get(gateway.url + "/docs")
        assert landed.status_code == 200
        assert landed.url.path == "/docs"
        assert "Authorization: Bearer $LLMGW_API_KEY" in landed.text
        document = browser.http.get(gateway.url + "/openapi.json")
        assert document.status_code == 200
        assert document.json()["security"] == [{"apiKey": []}]
    finally:
        browser.close()


def test_an_api_key_opens_the_docs_and_a_wrong_one_does_not(gateway: GatewayProcess) -> None:
    key = _key(gateway)
    opened = httpx.get(gateway.url + "/docs", headers={"authorization": f"Bearer {key}"}, timeout=10)
    assert opened.status_code == 200
    wrong = httpx.get(gateway.url + "/docs", headers={"authorization": "Bearer sk-wrong"}, timeout=10)
    assert wrong.status_code == 302


def test_the_landing_page_stays_public_and_leads_to_sign_in(gateway: GatewayProcess) -> None:
    page = httpx.get(gateway.url + "/", timeout=10)
    assert page.status_code == 200
    assert 'href="/auth/login?return_to=/account"' in page.text
    assert 'href="/signup"' in page.text
    assert "<strong>#llm-help</strong>" in page.text  # a contact that is no link, as text
    assert "api_key=os.environ[&#34;LLMGW_API_KEY&#34;]" in page.text


def test_with_auth_but_no_sign_in_a_key_is_needed(tmp_path: Path) -> None:
    config = {
        "auth": {"enabled": True, "store": str(tmp_path / "llmgw.db")},
        "endpoints": [{"id": "none", "url": f"http://127.0.0.1:{free_port()}", "models": ["m"]}],
        "landing": {"docs_sign_in": True},
    }
    with running_gateway(config) as gateway:
        refused = httpx.get(gateway.url + "/docs", timeout=10)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        assert "API key" in refused.text
        key = _key(gateway)
        bearer = {"authorization": f"Bearer {key}"}
        opened = httpx.get(gateway.url + "/openapi.json", headers=bearer, timeout=10)
        assert opened.status_code == 200


def test_with_auth_off_the_docs_are_closed_and_the_language_setting_applies() -> None:
    config = {
        "endpoints": [{"id": "none", "url": f"http://127.0.0.1:{free_port()}", "models": ["m"]}],
        "landing": {"docs_sign_in": True, "language": "tr"},
    }
    with running_gateway(config) as gateway:
        closed = httpx.get(gateway.url + "/docs", timeout=10)
        assert closed.status_code == 403
        assert "auth.enabled" in closed.text
        assert '<html lang="tr">' in closed.text
        landing = httpx.get(gateway.url + "/", headers={"accept-language": "de"}, timeout=10)
        assert '<html lang="tr">' in landing.text
        english = httpx.get(gateway.url + "/", headers={"accept-language": "en-GB"}, timeout=10)
        assert '<html lang="en">' in english.text
