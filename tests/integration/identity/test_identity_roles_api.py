"""Roles and self-service through real sockets: a gateway process with auth on, people
signing in at a real OpenID provider on loopback, roles granted by the CLI and the
admin API, and the admin API answering each person on the client port by those roles.

A member makes a personal key (the secret shown once), uses it, revokes it (refused
within auth.cache_ttl), and cannot see another team's keys nor make a key for their
own project; a team admin keys and joins their team's projects and nothing else; a
request without a session is 401, a change without the CSRF header 403, and the admin
token is not taken on the client port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmgw.testing.server import GatewayProcess
from support.oidc_provider import Browser, oidc_provider, set_user
from support.signin import admin_call as _admin
from support.signin import cli_call as _cli
from support.signin import signin_gateway as _gateway
from support.signin import until as _until


@pytest.fixture(scope="module")
def issuer() -> Iterator[str]:
    with oidc_provider() as url:
        yield url


def _seed(gateway: GatewayProcess) -> None:
    """acme: team research (projects chat, eval) and team ops (project infra)."""
    for kind, body in (
        ("orgs", {"id": "acme"}),
        ("teams", {"id": "research", "org": "acme"}),
        ("teams", {"id": "ops", "org": "acme"}),
        ("projects", {"id": "chat", "team": "research"}),
        ("projects", {"id": "eval", "team": "research"}),
        ("projects", {"id": "infra", "team": "ops"}),
    ):
        made = _admin(gateway, "POST", kind, body)
        assert made.status_code == 201, made.text


class Person:
    """A signed-in browser calling the admin API on the client port."""

    def __init__(self, gateway: GatewayProcess, issuer: str, user: str) -> None:
        set_user(issuer, f"sub-{user}", {"email": f"{user}@example.com", "preferred_username": user})
        self.browser = Browser(gateway.url)
        assert self.browser.sign_in(f"sub-{user}").status_code == 200
        self.url = gateway.url + "/api/"

    def csrf(self) -> str:
        return str(self.browser.me().json()["csrf_token"])

    def call(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, csrf: bool = True
    ) -> httpx.Response:
        headers = {"x-csrf-token": self.csrf()} if csrf else {}
        return self.browser.http.request(method, self.url + path, json=body, headers=headers)

    def wait_for_role(self, kind: str, ident: str, role: str) -> None:
        wanted = {"kind": kind, "id": ident, "role": role}

        def held() -> bool:
            return any({k: r[k] for k in wanted} == wanted for r in self.browser.me().json()["roles"])

        _until(held, f"the session seeing {role} of {kind} {ident}")

    def close(self) -> None:
        self.browser.close()


def _models(gateway: GatewayProcess, key: str) -> int:
    return httpx.get(
        gateway.base_url + "/models", headers={"authorization": f"Bearer {key}"}, timeout=10
    ).status_code


@pytest.fixture(scope="module")
def gateway(issuer: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    handle = _gateway(issuer, tmp_path_factory.mktemp("roles"), max_key_ttl="720h")
    try:
        _seed(handle)
        yield handle
    finally:
        handle.stop()


def test_a_member_makes_uses_and_revokes_a_personal_key_and_sees_no_other_team(
    issuer: str, gateway: GatewayProcess
) -> None:
    mia = Person(gateway, issuer, "mia")
    try:
        granted = _cli(gateway, "users", "grant", "mia", "--project", "chat", "--role", "member")
        assert granted.returncode == 0, granted.stderr
        assert "mia is member of project chat" in granted.stdout
        mia.wait_for_role("project", "chat", "member")
        ops_key = _admin(gateway, "POST", "keys", {"project": "infra", "name": "ops"}).json()

        no_csrf = mia.call("POST", "keys", {"user": "mia", "name": "laptop"}, csrf=False)
        assert no_csrf.status_code == 403
        assert no_csrf.json()["error"]["code"] == "bad_csrf_token"

        made = mia.call("POST", "keys", {"user": "mia", "name": "laptop"})
        assert made.status_code == 201, made.text
        secret = made.json()["key"]
        # Asked for no lifetime, it gets the longest allowed: auth.max_key_ttl.
        assert made.json()["expires_at"] == pytest.approx(made.json()["created_at"] + 30 * 86400)
        listed = mia.call("GET", "keys").json()["data"]
        assert [k["id"] for k in listed] == [made.json()["id"]]  # not the ops team's key
        assert "key" not in listed[0]  # the secret was shown once
        assert _models(gateway, secret) == 200

        hidden = mia.call("GET", "keys?project=infra")
        assert hidden.status_code == 404
        assert hidden.json()["error"]["code"] == "not_found"
        assert mia.call("GET", f"keys/{ops_key['id']}").status_code == 404
        assert mia.call("DELETE", f"keys/{ops_key['id']}").status_code == 404
        assert mia.call("GET", "keys?project=chat").status_code == 403  # her project, not her keys
        not_admin = mia.call("POST", "keys", {"project": "chat"})
        assert not_admin.status_code == 403
        assert not_admin.json()["error"]["code"] == "role_refused"
        assert mia.call("POST", "keys", {"user": "tina"}).status_code == 404
        assert mia.call("GET", "limits").json()["error"]["code"] == "operator_only"
        assert [p["id"] for p in mia.call("GET", "projects").json()["data"]] == ["chat"]

        revoked = mia.call("DELETE", f"keys/{made.json()['id']}")
        assert revoked.status_code == 200
        assert revoked.json()["state"] == "revoked"
        _until(lambda: _models(gateway, secret) == 401, "the revoked key refused")
    finally:
        mia.close()


def test_a_team_admin_keys_and_joins_their_teams_projects_only(issuer: str, gateway: GatewayProcess) -> None:
    tina = Person(gateway, issuer, "tina")
    try:
        granted = _admin(gateway, "PUT", "users/tina/roles/team/research", {"role": "admin"})
        assert granted.status_code == 200, granted.text
        tina.wait_for_role("team", "research", "admin")

        made = tina.call("POST", "keys", {"project": "eval", "name": "ci", "ttl": "168h"})
        assert made.status_code == 201, made.text
        assert _models(gateway, made.json()["key"]) == 200
        too_long = tina.call("POST", "keys", {"project": "eval", "ttl": "1440h"})
        assert too_long.status_code == 400
        assert "max_key_ttl" in too_long.json()["error"]["message"]
        limits = tina.call("POST", "keys", {"project": "eval", "rpm": 10**6})
        assert limits.status_code == 403
        assert "rpm" in limits.json()["error"]["message"]
        assert tina.call("POST", "keys", {"project": "infra"}).status_code == 404

        joined = tina.call("POST", "memberships", {"user": "tina", "project": "chat", "role": "member"})
        assert joined.status_code == 201, joined.text
        assert tina.call("POST", "memberships", {"user": "tina", "project": "infra"}).status_code == 404
        assert sorted(p["id"] for p in tina.call("GET", "projects").json()["data"]) == ["chat", "eval"]
        assert [t["id"] for t in tina.call("GET", "teams").json()["data"]] == ["research"]
        # A team admin makes projects in the team, with no settings of their own.
        assert tina.call("POST", "projects", {"id": "lab", "team": "research"}).status_code == 201
        assert tina.call("POST", "projects", {"id": "lab2", "team": "ops"}).status_code == 404
        budget = tina.call("POST", "projects", {"id": "lab3", "team": "research", "budget": 1e6})
        assert budget.status_code == 403
        # Roles in the team are the org admin's to grant.
        assert tina.call("PUT", "users/tina/roles/team/research", {"role": "admin"}).status_code == 403
        assert tina.call("PATCH", "projects/eval", {"rpm": 1}).status_code == 403
    finally:
        tina.close()


def test_an_org_admin_manages_everything_in_their_org_and_nothing_outside(
    issuer: str, gateway: GatewayProcess
) -> None:
    for kind, body in (
        ("orgs", {"id": "globex"}),
        ("teams", {"id": "sales", "org": "globex"}),
        ("projects", {"id": "crm", "team": "sales"}),
    ):
        assert _admin(gateway, "POST", kind, body).status_code == 201
    olga = Person(gateway, issuer, "olga")
    try:
        granted = _cli(gateway, "users", "grant", "olga", "--org", "acme", "--role", "admin")
        assert granted.returncode == 0, granted.stderr
        olga.wait_for_role("org", "acme", "admin")
        projects = {p["id"] for p in olga.call("GET", "projects").json()["data"]}
        assert {"chat", "eval", "infra"} <= projects
        assert "crm" not in projects
        assert [o["id"] for o in olga.call("GET", "orgs").json()["data"]] == ["acme"]

        assert olga.call("POST", "teams", {"id": "ml", "org": "acme"}).status_code == 201
        assert olga.call("POST", "teams", {"id": "ml2", "org": "globex"}).status_code == 404
        assert olga.call("PUT", "users/olga/roles/team/ml", {"role": "admin"}).status_code == 200
        assert olga.call("PUT", "users/olga/roles/org/globex", {"role": "admin"}).status_code == 404
        assert olga.call("POST", "keys", {"project": "infra", "name": "ops"}).status_code == 201
        assert olga.call("GET", "keys?project=crm").status_code == 404
        assert olga.call("PATCH", "orgs/acme", {"rpm": 1}).json()["error"]["code"] == "operator_only"
        assert olga.call("DELETE", "orgs/acme").status_code == 403
        page = olga.browser.http.get(gateway.url + "/account/keys").text
        assert '<option value="infra">project infra</option>' in page
        assert 'value="crm"' not in page

        revoked = _cli(gateway, "users", "revoke", "olga", "--org", "acme")
        assert revoked.returncode == 0, revoked.stderr
        _until(
            lambda: olga.call("GET", "keys?project=infra").status_code == 404, "the revoked role's reach gone"
        )
    finally:
        olga.close()


def test_no_session_is_401_and_the_admin_token_is_not_taken_on_the_client_port(
    gateway: GatewayProcess,
) -> None:
    anonymous = httpx.get(gateway.url + "/api/keys", timeout=10)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "not_signed_in"
    token = httpx.get(
        gateway.url + "/api/keys", headers={"authorization": f"Bearer {gateway.admin_token()}"}, timeout=10
    )
    assert token.status_code == 401
    # On admin_listen, the token is all it takes, and sees every key.
    assert _admin(gateway, "GET", "keys").status_code == 200


def test_bad_grants_are_refused_with_the_field_and_the_fix(gateway: GatewayProcess) -> None:
    role = _admin(gateway, "PUT", "users/nobody/roles/team/research", {"role": "owner"})
    assert role.status_code == 400
    assert "role" in role.json()["error"]["message"]
    missing = _admin(gateway, "PUT", "users/nobody/roles/team/research", {"role": "admin"})
    assert missing.status_code == 404
    assert "user 'nobody' does not exist" in missing.json()["error"]["message"]
    two = _cli(gateway, "users", "grant", "x", "--team", "research", "--org", "acme", "--role", "admin")
    assert two.returncode == 2
    assert "exactly one of --org, --team and --project" in two.stderr
    bad_role = _cli(gateway, "users", "grant", "x", "--team", "research", "--role", "owner")
    assert bad_role.returncode == 2
    assert "use admin or member" in bad_role.stderr
    assert "Traceback" not in two.stderr + bad_role.stderr


def test_the_keys_page_shows_a_new_key_once_and_revokes_with_the_csrf_token(
    issuer: str, gateway: GatewayProcess
) -> None:
    away = httpx.get(gateway.url + "/account/keys", timeout=10, follow_redirects=False)
    assert away.status_code == 302
    assert away.headers["location"].startswith("/auth/login")
    uma = Person(gateway, issuer, "uma")
    http = uma.browser.http
    page_url = gateway.url + "/account/keys"
    try:
        page = http.get(page_url)
        assert page.status_code == 200
        assert "You have no keys yet" in page.text
        token = uma.browser.csrf_token("/account/keys")
        forged = http.post(page_url, data={"name": "x"})
        assert forged.status_code == 403
        made = http.post(page_url, data={"csrf_token": token, "name": "<script>x</script>", "ttl": "24h"})
        assert made.status_code == 201, made.text
        assert "&lt;script&gt;" in made.text
        assert "<script>" not in made.text
        secret = made.text.split("<code id=new-key>")[1].split("</code>")[0]
        assert _models(gateway, secret) == 200
        again = http.get(page_url)
        assert secret not in again.text
        key_id = uma.call("GET", "keys").json()["data"][0]["id"]
        assert key_id in again.text
        gone = http.post(
            page_url + "/revoke", data={"csrf_token": token, "key": key_id}, follow_redirects=False
        )
        assert gone.status_code == 303
        assert uma.call("GET", "keys").json()["data"] == []
        _until(lambda: _models(gateway, secret) == 401, "the key revoked on the page refused")
    finally:
        uma.close()


def test_personal_keys_off_refuses_them_on_the_api_and_the_page(issuer: str, tmp_path: Path) -> None:
    gateway = _gateway(issuer, tmp_path, personal={"disabled": True})
    vic = Person(gateway, issuer, "vic")
    try:
        refused = vic.call("POST", "keys", {"user": "vic"})
        assert refused.status_code == 403
        assert "auth.personal.disabled" in refused.json()["error"]["message"]
        page = vic.browser.http.get(gateway.url + "/account/keys")
        assert "Personal keys are off here" in page.text
    finally:
        vic.close()
        gateway.stop()
