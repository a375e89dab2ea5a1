"""Signing in through a real OpenID provider on loopback, with the gateway as a server
process and httpx as the browser: first sign-in makes the person, the groups claim
makes team memberships, /auth/me says who is signed in, sign-out and disabling end the
session on the server, a replayed state and a domain not allowed are refused and make
nothing, sessions end when their lifetime is up, and a signup is approved by the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

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


@pytest.fixture(scope="module")
def gateway(issuer: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    where = tmp_path_factory.mktemp("oidc")
    handle = _gateway(issuer, where)
    try:
        assert _cli(handle, "orgs", "create", "acme").returncode == 0
        made = _cli(
            handle, "teams", "create", "research", "--org", "acme", "--idp-group", "llm-research", "--json"
        )
        assert made.returncode == 0, made.stderr
        assert json.loads(made.stdout)[0]["idp_group"] == "llm-research"
        yield handle
    finally:
        handle.stop()


def test_first_sign_in_makes_the_person_and_groups_make_team_memberships(
    issuer: str, gateway: GatewayProcess
) -> None:
    set_user(
        issuer,
        "sub-alice",
        {
            "email": "alice@example.com",
            "name": "Alice",
            "preferred_username": "alice",
            "groups": ["llm-research"],
        },
    )
    browser = Browser(gateway.url)
    try:
        assert browser.me().status_code == 401
        landed = browser.sign_in("sub-alice", return_to="/auth")
        assert landed.status_code == 200
        assert "Signed in" in landed.text
        assert "Alice" in landed.text
        cookie = landed.history[-1].headers["set-cookie"]
        assert "HttpOnly" in cookie
        assert "SameSite=Lax" in cookie
        assert "Secure" not in cookie
        me = browser.me().json()
        assert me["id"] == "alice"
        assert me["status"] == "active"
        assert me["email"] == "alice@example.com"
        assert {"kind": "team", "id": "research", "role": "member", "source": "oidc"} in me["roles"]
        person = _admin(gateway, "GET", "users/alice").json()
        assert person["email"] == "alice@example.com"

        # The group left at the provider: the next sign-in leaves the team.
        set_user(issuer, "sub-alice", {"email": "alice@example.com", "name": "Alice", "groups": []})
        assert browser.sign_in("sub-alice").status_code == 200
        assert browser.me().json()["roles"] == []
        # Same subject, same person: no second account.
        assert [u["id"] for u in _admin(gateway, "GET", "users").json()["data"]] == ["alice"]
    finally:
        browser.close()


def test_sign_out_needs_the_csrf_token_and_ends_the_session_on_the_server(
    issuer: str, gateway: GatewayProcess
) -> None:
    set_user(issuer, "sub-bert", {"email": "bert@example.com", "preferred_username": "bert"})
    browser = Browser(gateway.url)
    try:
        browser.sign_in("sub-bert")
        token = browser.csrf_token()
        stolen = dict(browser.http.cookies.items())
        refused = browser.http.post(gateway.url + "/auth/logout", data={})
        assert refused.status_code == 403
        assert "csrf_token" in refused.text
        assert browser.me().status_code == 200
        wrong = browser.http.post(gateway.url + "/auth/logout", data={"csrf_token": token + "x"})
        assert wrong.status_code == 403
        out = browser.http.post(gateway.url + "/auth/logout", data={"csrf_token": token})
        assert out.status_code == 200
        assert "signed out" in out.text
        assert browser.me().status_code == 401
        # The cookie copied before sign-out names a session that is gone.
        replay = httpx.get(gateway.url + "/auth/me", cookies=stolen, timeout=10)
        assert replay.status_code == 401
        assert replay.json()["error"]["code"] == "not_signed_in"
    finally:
        browser.close()


def test_a_replayed_state_is_refused(issuer: str, gateway: GatewayProcess) -> None:
    set_user(issuer, "sub-carl", {"email": "carl@example.com", "preferred_username": "carl"})
    browser = Browser(gateway.url)
    try:
        callback = browser.authorization_code_url("sub-carl")
        assert browser.http.get(callback).status_code == 200
        again = httpx.get(callback, timeout=10)
        assert again.status_code == 403
        assert "unknown_state" in again.text
        assert "replayed" in again.text
        assert "sign-in refused (unknown_state)" in gateway.log()
    finally:
        browser.close()


def test_disabling_a_person_ends_their_session_and_refuses_their_sign_in(
    issuer: str, gateway: GatewayProcess
) -> None:
    set_user(issuer, "sub-dora", {"email": "dora@example.com", "preferred_username": "dora"})
    browser = Browser(gateway.url)
    try:
        browser.sign_in("sub-dora")
        assert browser.me().status_code == 200
        assert _admin(gateway, "PATCH", "users/dora", {"disabled": True}).status_code == 200
        _until(lambda: browser.me().status_code == 401, "the disabled person's session refused")
        again = browser.sign_in("sub-dora")
        assert again.status_code == 403
        assert "person_disabled" in again.text
    finally:
        browser.close()


def test_a_domain_not_allowed_is_refused_and_sessions_end_with_their_lifetime(
    issuer: str, tmp_path: Path
) -> None:
    gateway = _gateway(
        issuer, tmp_path, oidc={"allowed_domains": ["example.com"]}, session={"lifetime": "2s", "idle": "2s"}
    )
    browser = Browser(gateway.url)
    try:
        set_user(issuer, "sub-eve", {"email": "eve@elsewhere.org", "preferred_username": "eve"})
        refused = browser.sign_in("sub-eve")
        assert refused.status_code == 403
        assert "elsewhere.org" in refused.text
        assert "allowed_domains" in refused.text
        assert _admin(gateway, "GET", "users").json()["data"] == []  # nothing made

        set_user(issuer, "sub-finn", {"email": "finn@example.com", "preferred_username": "finn"})
        assert browser.sign_in("sub-finn").status_code == 200
        assert browser.me().status_code == 200
        _until(lambda: browser.me().status_code == 401, "the session ended by its lifetime")
    finally:
        browser.close()
        gateway.stop()


def test_signup_waits_for_approval_by_the_cli_then_signs_in(issuer: str, tmp_path: Path) -> None:
    gateway = _gateway(issuer, tmp_path, signup_open=True)
    browser = Browser(gateway.url)
    try:
        no_token = browser.http.post(
            gateway.url + "/signup", data={"name": "Gus", "email": "gus@example.com", "reason": "research"}
        )
        assert no_token.status_code == 403
        token = browser.csrf_token("/signup")
        form = {"csrf_token": token, "name": "Gus", "email": "gus@example.com", "reason": "evaluating models"}
        first = browser.http.post(gateway.url + "/signup", data=form)
        assert first.status_code == 200
        # A known address gets the very same answer, and changes nothing.
        known = browser.http.post(gateway.url + "/signup", data=form)
        assert known.status_code == 200
        assert known.text == first.text
        people = _admin(gateway, "GET", "users").json()["data"]
        assert [p["id"] for p in people] == ["gus@example.com"]

        set_user(issuer, "sub-gus", {"email": "gus@example.com", "name": "Gus", "preferred_username": "gus"})
        waiting = browser.sign_in("sub-gus")
        assert waiting.status_code == 200
        assert "Waiting for approval" in waiting.text
        assert browser.me().json()["status"] == "pending"

        approve = _cli(gateway, "users", "approve", "gus@example.com")
        assert approve.returncode == 0, approve.stderr
        assert "gus@example.com is active" in approve.stdout
        _until(lambda: browser.me().json()["status"] == "active", "the approval seen by the session")
        assert "Signed in" in browser.http.get(gateway.url + "/auth").text

        unknown = _cli(gateway, "users", "reject", "nobody")
        assert unknown.returncode != 0
        assert "nobody" in unknown.stderr
        assert "Traceback" not in unknown.stderr
    finally:
        browser.close()
        gateway.stop()
