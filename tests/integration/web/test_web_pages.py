"""The landing page, the docs portal and the OpenAPI document of a running `llmgw
server` in front of a sim, through real sockets: what each page shows, its security
headers, the language switch, the cached assets, and that the API beside them is as it
was. The landing page's Python snippet is run as it is shown, against the gateway."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from openapi_spec_validator import validate

from llmgw.testing.server import GatewayProcess, running_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, sim

_SNIPPET = re.compile(r'<pre data-copy[^>]*aria-label="([^"]+)"><code>(.*?)</code></pre>', re.S)


@pytest.fixture(scope="module")
def engine() -> Iterator[SimEngineProcess]:
    process = sim("--model", "chat-model")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def gateway(engine: SimEngineProcess) -> Iterator[GatewayProcess]:
    config = {
        "endpoints": [endpoint("sim-a", engine, "chat-model")],
        "models": [
            {
                "name": "chat-model",
                "aliases": ["chat"],
                "description": "A simulated chat model.",
                "context_length": 2048,
                "max_output": 256,
            }
        ],
        "router": {"max_body_bytes": 200_000},
        "landing": {"contact": "llm-team@example.com", "notice": "Maintenance on Sunday <b>night</b>"},
    }
    with running_gateway(config) as handle:
        yield handle


def _snippets(page: str) -> dict[str, str]:
    return {label: html.unescape(code) for label, code in _SNIPPET.findall(page)}


def _assert_strict_page(response: httpx.Response) -> None:
    """The page is HTML under a CSP that allows no inline code, and has none."""
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    policy = response.headers["content-security-policy"]
    assert "default-src 'self'" in policy
    assert "script-src 'self'" in policy
    assert "'unsafe-inline'" not in policy
    assert response.headers["x-content-type-options"] == "nosniff"
    page = response.text
    assert re.findall(r"<script(?![^>]*\bsrc=)", page) == []
    assert "<style" not in page
    assert re.search(r"\s(style|on[a-z]+)=", page) is None


def test_the_landing_page_shows_models_the_way_to_a_key_and_snippets(gateway: GatewayProcess) -> None:
    response = httpx.get(gateway.url + "/", timeout=10)
    assert response.status_code == 200
    _assert_strict_page(response)
    page = response.text
    assert '<html lang="en">' in page
    assert "<code>chat-model</code>" in page
    assert "2048" in page
    assert "256" in page
    # The notice is the operator's text, escaped, never markup.
    assert "Maintenance on Sunday &lt;b&gt;night&lt;/b&gt;" in page
    assert '<a href="mailto:llm-team@example.com">llm-team@example.com</a>' in page
    assert f'<code id="base-url">{gateway.base_url}</code>' in page
    snippets = _snippets(page)
    assert set(snippets) == {"Python", "curl"}
    assert f"{gateway.base_url}/chat/completions" in snippets["curl"]
    assert '"model":"chat-model"' in snippets["curl"]


def test_the_python_snippet_works_as_shown(gateway: GatewayProcess) -> None:
    snippet = _snippets(httpx.get(gateway.url + "/", timeout=10).text)["Python"]
    ran = subprocess.run(
        [sys.executable, "-c", snippet], capture_output=True, text=True, timeout=60, check=False
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip()


def test_the_language_switch_is_remembered(gateway: GatewayProcess) -> None:
    with httpx.Client(base_url=gateway.url, timeout=10) as browser:
        assert '<html lang="en">' in browser.get("/").text
        switched = browser.get("/language", params={"set": "tr", "next": "/docs"})
        assert switched.status_code == 303
        assert switched.headers["location"] == "/docs"
        cookie = switched.headers["set-cookie"]
        assert cookie.startswith("llmgw_lang=tr;")
        assert "SameSite=Lax" in cookie
        again = browser.get("/")
        assert '<html lang="tr">' in again.text
        assert "Kullanabileceğiniz modeller" in again.text
        # The cookie wins over the browser's own preference.
        assert '<html lang="tr">' in browser.get("/docs", headers={"accept-language": "en"}).text
        browser.get("/language", params={"set": "en", "next": "/"})
        assert '<html lang="en">' in browser.get("/").text


def test_the_browser_language_is_used_until_one_is_picked(gateway: GatewayProcess) -> None:
    turkish = httpx.get(gateway.url + "/", headers={"accept-language": "tr-TR,tr;q=0.9"}, timeout=10)
    assert '<html lang="tr">' in turkish.text
    assert "Cookie" in turkish.headers["vary"]


def test_the_switch_sends_nobody_off_site_and_ignores_unknown_languages(gateway: GatewayProcess) -> None:
    response = httpx.get(gateway.url + "/language?set=xx&next=//evil.example.com/", timeout=10)
    assert response.status_code == 303
    assert response.headers["location"] == "/"
    assert "set-cookie" not in response.headers


def test_the_docs_portal_describes_this_gateway(gateway: GatewayProcess) -> None:
    response = httpx.get(gateway.url + "/docs", timeout=10)
    assert response.status_code == 200
    _assert_strict_page(response)
    page = response.text
    assert gateway.base_url in page
    assert "200000 bytes" in page  # router.max_body_bytes
    for route in ("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/models"):
        assert f"<code>POST {route}</code>" in page or f"<code>GET {route}</code>" in page
    assert "data: [DONE]" in page
    for status in ("401", "404", "413", "429", "503", "504"):
        assert f'<th scope="row">{status}</th>' in page
    streamed = _snippets(page)["Streaming"]
    assert streamed.startswith("curl -N ")
    assert '"stream":true' in streamed
    assert "Authorization" not in page  # this gateway takes no key


def test_the_openapi_document_is_valid_and_its_routes_are_served(gateway: GatewayProcess) -> None:
    response = httpx.get(gateway.url + "/openapi.json", timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    document = response.json()
    validate(document)
    assert document["servers"] == [{"url": gateway.base_url}]
    assert "security" not in document
    paths = document["paths"]
    assert set(paths) == {"/chat/completions", "/completions", "/embeddings", "/models", "/models/{model}"}
    schema = document["components"]["schemas"]["ChatCompletionRequest"]
    assert schema["properties"]["model"]["examples"] == ["chat-model"]
    # Every documented route is one the gateway answers.
    assert httpx.get(gateway.base_url + "/models", timeout=10).status_code == 200
    assert httpx.get(gateway.base_url + "/models/chat-model", timeout=10).status_code == 200
    hello = {"model": "chat-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    assert httpx.post(gateway.base_url + "/chat/completions", json=hello, timeout=10).status_code == 200
    prompt = {"model": "chat-model", "prompt": "hi", "max_tokens": 4}
    assert httpx.post(gateway.base_url + "/completions", json=prompt, timeout=10).status_code == 200


def test_assets_are_cached_and_revalidated(gateway: GatewayProcess) -> None:
    css = httpx.get(gateway.url + "/static/web.css", timeout=10)
    assert css.status_code == 200
    assert css.headers["content-type"] == "text/css; charset=utf-8"
    assert "max-age=86400" in css.headers["cache-control"]
    assert "prefers-color-scheme: dark" in css.text
    etag = css.headers["etag"]
    again = httpx.get(gateway.url + "/static/web.css", headers={"if-none-match": etag}, timeout=10)
    assert again.status_code == 304
    assert again.content == b""
    assert httpx.get(gateway.url + "/static/web.js", timeout=10).status_code == 200
    assert httpx.get(gateway.url + "/static/../pyproject.toml", timeout=10).status_code == 404
    assert httpx.get(gateway.url + "/static/nothing.css", timeout=10).status_code == 404


def test_the_api_beside_the_pages_is_unchanged(gateway: GatewayProcess) -> None:
    assert httpx.get(gateway.url + "/health", timeout=10).text == "llmgw: the OpenAI API is under /v1\n"
    unknown = httpx.get(gateway.url + "/v1/nothing", timeout=10)
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "unknown_route"
    assert httpx.post(gateway.url + "/", timeout=10).status_code == 405
    missing = httpx.get(gateway.url + "//nothing", timeout=10)
    assert missing.status_code == 404
    assert "content-security-policy" in missing.headers
