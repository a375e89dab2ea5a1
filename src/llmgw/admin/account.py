"""/account/keys: a signed-in person's keys as a page, for people without a script.

    GET  /account/keys          their personal keys and those of projects they may key,
                                with a form to make one and a button to revoke each
    POST /account/keys          makes a key (form: name, ttl, project; empty project:
                                personal); the secret is on the answer page, only there
    POST /account/keys/revoke   revokes one (form: key), then back to the list

Every form carries the session's csrf_token, and every request goes through the admin
API's own routes as that person (`AdminApi.handle` with their `Actor`), so the page can
do exactly what /api lets them do, with the same key-making code and the same bounds
(`auth.personal`, `max_key_ttl`). Every value on the page is escaped.
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import parse_qs

import orjson

from llmgw.admin.api import AdminApi
from llmgw.config.auth import Auth
from llmgw.errors import ApiError, BadRequest, NotFound, StoreError
from llmgw.http.rsgi import HTTPProtocol, Scope
from llmgw.identity.app import check_csrf
from llmgw.identity.pages import document
from llmgw.identity.roles import Actor
from llmgw.identity.sessions import SessionManager, SignedIn

PAGE = "/account/keys"
_HTML = "text/html; charset=utf-8"
_NO_STORE = ("cache-control", "no-store")
_MAX_FORM_FIELDS = 10


class AccountKeys:
    """The /account pages over the people's admin API."""

    def __init__(self, api: AdminApi, sessions: SessionManager, auth: Auth) -> None:
        self._api = api
        self._sessions = sessions
        self._auth = auth

    async def __call__(self, scope: Scope, proto: HTTPProtocol) -> None:
        if scope.proto != "http":
            return
        try:
            who = await self._sessions.signed_in(scope.headers)
        except StoreError:
            self._page(proto, 503, _refused("the account store cannot be reached: try again shortly"))
            return
        if who is None:
            if scope.method == "GET":
                proto.response_bytes(302, [("location", f"/auth/login?return_to={PAGE}"), _NO_STORE], b"")
            else:
                self._page(proto, 401, _refused("nobody is signed in: sign in first, at /auth/login"))
            return
        if not who.active:
            self._page(proto, 403, _refused("your account waits for an administrator's approval"))
            return
        try:
            await self._serve(scope, proto, who)
        except StoreError:
            self._page(proto, 503, _refused("the account store cannot be reached: try again shortly"))

    async def _serve(self, scope: Scope, proto: HTTPProtocol, who: SignedIn) -> None:
        actor = Actor(who.user_id, who.roles)
        try:
            if scope.path == PAGE and scope.method == "GET":
                self._page(proto, 200, await self._render(actor, who))
            elif scope.path == PAGE and scope.method == "POST":
                form = await _form(proto)
                check_csrf(form.get("csrf_token", ""), who.csrf_token)
                made = await self._create(actor, form)
                self._page(proto, 201, await self._render(actor, who, made=made))
            elif scope.path == PAGE + "/revoke" and scope.method == "POST":
                form = await _form(proto)
                check_csrf(form.get("csrf_token", ""), who.csrf_token)
                await self._api.handle("DELETE", f"/api/keys/{form.get('key', '')}", {}, b"", actor=actor)
                proto.response_bytes(303, [("location", PAGE), _NO_STORE], b"")
            else:
                raise NotFound(f"{scope.method} {scope.path} is not a page: see {PAGE}", code="unknown_route")
        except ApiError as error:
            try:
                body = await self._render(actor, who, error=error.message)
            except ApiError:  # the list itself failed: the refusal alone, then
                body = _refused(error.message)
            self._page(proto, error.status, body)

    async def _create(self, actor: Actor, form: dict[str, str]) -> dict[str, Any]:
        body: dict[str, Any] = {"name": form.get("name", "")}
        if form.get("ttl"):
            body["ttl"] = form["ttl"]
        if form.get("project"):
            body["project"] = form["project"]
        else:
            body["user"] = actor.user_id
        _, made = await self._api.handle("POST", "/api/keys", {}, orjson.dumps(body), actor=actor)
        return dict(made)

    async def _render(
        self, actor: Actor, who: SignedIn, *, made: dict[str, Any] | None = None, error: str = ""
    ) -> bytes:
        _, keys = await self._api.handle("GET", "/api/keys", {}, b"", actor=actor)
        projects = await self._api.key_projects(actor)
        return page(
            who.name or who.user_id,
            keys["data"],
            projects,
            who.csrf_token,
            personal=not self._auth.personal.disabled,
            max_ttl=self._auth.effective_max_key_ttl is not None,
            made=made,
            error=error,
        )

    def _page(self, proto: HTTPProtocol, status: int, body: bytes) -> None:
        proto.response_bytes(status, [("content-type", _HTML), _NO_STORE], body)


async def _form(proto: HTTPProtocol) -> dict[str, str]:
    try:
        text = (await proto()).decode()
        return {k: v[-1] for k, v in parse_qs(text, max_num_fields=_MAX_FORM_FIELDS).items()}
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequest("the form is not URL-encoded text: send it from the page", code="bad_form") from exc


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _refused(message: str) -> bytes:
    return document(
        "Your keys", f'<p class=error>{escape(message)}</p><p><a href="/auth/login">Sign in</a></p>'
    )


def page(
    name: str,
    keys: list[dict[str, Any]],
    projects: list[str],
    csrf_token: str,
    *,
    personal: bool,
    max_ttl: bool,
    made: dict[str, Any] | None = None,
    error: str = "",
) -> bytes:
    """The whole page: the new key once, an error, the keys, and the forms."""
    csrf = f'<input type=hidden name=csrf_token value="{escape(csrf_token)}">'
    parts = [f"<p>Signed in as <strong>{escape(name)}</strong>.</p>"]
    if error:
        parts.append(f"<p class=error>{escape(error)}</p>")
    if made is not None:
        parts.append(
            "<h2>Your new key</h2><p>Copy it now: it is shown this once and cannot be shown again.</p>"
            f"<pre><code id=new-key>{escape(str(made.get('key', '')))}</code></pre>"
        )
    rows = "".join(
        f"<tr><td>{escape(str(k['id']))}</td><td>{escape(str(k.get('name') or ''))}</td>"
        f"<td>{escape(str(k.get('project') or 'personal'))}</td><td>{escape(_when(k.get('expires_at')))}</td>"
        f'<td><form method=post action="{PAGE}/revoke">{csrf}'
        f'<input type=hidden name=key value="{escape(str(k["id"]))}">'
        "<button type=submit>Revoke</button></form></td></tr>"
        for k in keys
    )
    parts.append(
        "<h2>Keys</h2>"
        + (
            "<table><tr><th>id</th><th>name</th><th>for</th><th>expires</th><th></th></tr>"
            + rows
            + "</table>"
            if rows
            else "<p>You have no keys yet.</p>"
        )
    )
    choices = ([("", "personal (mine)")] if personal else []) + [(p, f"project {p}") for p in projects]
    if choices:
        options = "".join(f'<option value="{escape(v)}">{escape(label)}</option>' for v, label in choices)
        hint = " (empty: the longest allowed)" if max_ttl else " (empty: no expiry)"
        parts.append(
            f'<h2>New key</h2><form method=post action="{PAGE}">{csrf}'
            f"<label>For <select name=project>{options}</select></label>"
            "<label>Name <input name=name maxlength=200></label>"
            f"<label>Lifetime, like 720h{escape(hint)} <input name=ttl maxlength=20></label>"
            "<button type=submit>Make the key</button></form>"
        )
    else:
        parts.append("<p>Personal keys are off here, and you administer no project.</p>")
    return document("Your keys", "".join(parts))
