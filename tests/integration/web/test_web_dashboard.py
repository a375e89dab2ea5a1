"""The operator dashboard on admin_listen through real sockets: a running `llmgw
server` with a store, its pages behind the admin token (bearer header or the sign-in
form's session cookie), no key's secret on any page, and its forms refused without
their CSRF token."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from llmgw.testing.server import GatewayProcess, running_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, sim

PAGES = ("cluster", "traffic", "tenancy", "audit")
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@pytest.fixture(scope="module")
def engine() -> Iterator[SimEngineProcess]:
    process = sim("--model", "chat-model")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def gateway(engine: SimEngineProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    store: Path = tmp_path_factory.mktemp("dashboard") / "llmgw.db"
    config = {
        "auth": {"enabled": True, "store": str(store), "flush_interval": "100ms"},
        "endpoints": [endpoint("sim-a", engine, "chat-model")],
    }
    with running_gateway(config) as handle:
        yield handle


@pytest.fixture(scope="module")
def secrets(gateway: GatewayProcess) -> list[str]:
    """Two keys made through the admin API, and one chat request on the first, so every
    page has something to show."""
    headers = {"authorization": f"Bearer {gateway.admin_token()}"}
    admin = gateway.admin_url + "/api"
    with httpx.Client(headers=headers, timeout=10) as client:
        assert client.post(admin + "/orgs", json={"id": "acme"}).status_code == 201
        assert client.post(admin + "/teams", json={"id": "ml", "org": "acme"}).status_code == 201
        made = client.post(admin + "/projects", json={"id": "search", "team": "ml"})
        assert made.status_code == 201
        assert client.put(admin + "/budgets/project/search", json={"budget": 5}).status_code == 200
        keys = [client.post(admin + "/keys", json={"project": "search", "name": n}).json() for n in "ab"]
    chat = httpx.post(
        gateway.base_url + "/chat/completions",
        json={"model": "chat-model", "messages": [{"role": "user", "content": "hi"}]},
        headers={"authorization": f"Bearer {keys[0]['key']}"},
        timeout=30,
    )
    assert chat.status_code == 200
    return [str(k["key"]) for k in keys]


def _bearer(gateway: GatewayProcess) -> dict[str, str]:
    return {"authorization": f"Bearer {gateway.admin_token()}"}


def test_each_page_is_served_with_the_token_and_holds_no_key_secret(
    gateway: GatewayProcess, secrets: list[str]
) -> None:
    for page in PAGES:
        answer = httpx.get(f"{gateway.admin_url}/dashboard/{page}", headers=_bearer(gateway), timeout=10)
        assert answer.status_code == 200, page
        assert answer.headers["content-type"] == "text/html; charset=utf-8"
        assert "script-src 'self'" in answer.headers["content-security-policy"]
        assert "<style" not in answer.text
        for secret in secrets:
            assert secret not in answer.text, page
    cluster = httpx.get(gateway.admin_url + "/dashboard/cluster", headers=_bearer(gateway), timeout=10)
    assert "chat-model" in cluster.text
    traffic = httpx.get(gateway.admin_url + "/dashboard/traffic", headers=_bearer(gateway), timeout=10)
    assert re.search(r"<th scope=\"row\">chat-model</th><td>1</td><td>0</td>", traffic.text)
    tenancy = httpx.get(gateway.admin_url + "/dashboard/tenancy", headers=_bearer(gateway), timeout=10)
    assert "project:search" in tenancy.text
    assert secrets[0].split("-")[1] in tenancy.text  # the key's id is shown


def test_without_the_token_every_page_is_401(gateway: GatewayProcess) -> None:
    for page in PAGES:
        for headers in ({}, {"authorization": "Bearer not-the-token"}, {"cookie": "llmgw_dashboard=1.x.y"}):
            answer = httpx.get(f"{gateway.admin_url}/dashboard/{page}", headers=headers, timeout=10)
            assert answer.status_code == 401, (page, headers)
            assert 'name="token"' in answer.text  # the sign-in form instead


def test_root_sends_a_browser_to_the_dashboard(gateway: GatewayProcess) -> None:
    answer = httpx.get(gateway.admin_url + "/", timeout=10)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/dashboard/cluster"


def test_the_sign_in_form_sets_a_strict_http_only_session(gateway: GatewayProcess) -> None:
    wrong = httpx.post(gateway.admin_url + "/dashboard/login", data={"token": "nope"}, timeout=10)
    assert wrong.status_code == 401
    token = gateway.admin_token()
    answer = httpx.post(gateway.admin_url + "/dashboard/login", data={"token": token}, timeout=10)
    assert answer.status_code == 303
    cookie = answer.headers["set-cookie"]
    for attribute in ("HttpOnly", "SameSite=Strict", "Path=/dashboard"):
        assert attribute in cookie
    assert token not in cookie
    value = cookie.split(";")[0]
    page = httpx.get(gateway.admin_url + "/dashboard/tenancy", headers={"cookie": value}, timeout=10)
    assert page.status_code == 200


def test_revoking_a_key_needs_the_forms_csrf_token(gateway: GatewayProcess, secrets: list[str]) -> None:
    key_id = secrets[1].split("-")[1]
    url = gateway.admin_url + "/dashboard/keys/revoke"
    form = {"key": key_id, "confirm": "yes"}
    refused = httpx.post(url, data=form, headers=_bearer(gateway), timeout=10)
    assert refused.status_code == 403
    forged = httpx.post(url, data={**form, "csrf": "forged"}, headers=_bearer(gateway), timeout=10)
    assert forged.status_code == 403
    stranger = httpx.post(url, data=form, timeout=10)
    assert stranger.status_code == 401
    page = httpx.get(gateway.admin_url + "/dashboard/tenancy", headers=_bearer(gateway), timeout=10)
    csrf = _CSRF.search(page.text)
    assert csrf is not None
    done = httpx.post(url, data={**form, "csrf": csrf.group(1)}, headers=_bearer(gateway), timeout=10)
    assert done.status_code == 303
    assert "revoked" in done.headers["location"]
    listed = httpx.get(f"{gateway.admin_url}/api/keys/{key_id}", headers=_bearer(gateway), timeout=10)
    assert listed.json()["state"] == "revoked"
    audit = httpx.get(gateway.admin_url + "/dashboard/audit", headers=_bearer(gateway), timeout=10)
    row = re.search(
        r"<tr><td><time[^>]*>[^<]+</time></td><td>([^<]+)</td><th scope=\"row\">key.revoke</th>"
        r"<td>([^<]+)</td><td>([^<]+)</td>",
        audit.text,
    )
    assert row is not None
    assert row.groups() == ("operator (bearer token)", f"key:{key_id}", "done")


def test_scaling_without_a_control_plane_is_refused_and_audited(gateway: GatewayProcess) -> None:
    page = httpx.get(gateway.admin_url + "/dashboard/cluster", headers=_bearer(gateway), timeout=10)
    csrf = _CSRF.search(page.text)
    assert csrf is not None  # the sign-out form's, valid for every form of this credential
    form = {"model": "chat-model", "min": "1", "max": "2", "confirm": "yes", "csrf": csrf.group(1)}
    url = gateway.admin_url + "/dashboard/models/scale"
    answer = httpx.post(url, data=form, headers=_bearer(gateway), timeout=10)
    assert answer.status_code == 303
    assert "not%20done" in answer.headers["location"]
    unconfirmed = httpx.post(url, data={**form, "confirm": ""}, headers=_bearer(gateway), timeout=10)
    assert "confirmation" in unconfirmed.headers["location"]
    audit = httpx.get(gateway.admin_url + "/dashboard/audit", headers=_bearer(gateway), timeout=10)
    assert "model:chat-model min=1 max=2" in audit.text
    assert "no control plane" in audit.text


def test_the_admin_api_lists_the_newest_keys_with_the_count(
    gateway: GatewayProcess, secrets: list[str]
) -> None:
    url = gateway.admin_url + "/api/keys"
    page = httpx.get(url, params={"newest": "1", "all": "1"}, headers=_bearer(gateway), timeout=10).json()
    assert page["total"] == 2
    assert [k["id"] for k in page["data"]] == [secrets[1].split("-")[1]]
    for bad in ("0", "1001", "x"):
        refused = httpx.get(url, params={"newest": bad}, headers=_bearer(gateway), timeout=10)
        assert refused.status_code == 400
        assert refused.json()["error"]["param"] == "newest"
