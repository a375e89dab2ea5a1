"""The operator dashboard on `admin_listen`, under /dashboard: the cluster, the traffic
and the tenancy at a glance, and two actions (revoke a key, scale a model). Pages are
server-rendered with the public pages' templates, stylesheet and Content-Security-
Policy, and read the same without JavaScript.

    GET  /dashboard                 to /dashboard/cluster
    GET  /dashboard/login           the sign-in form (the admin token);  POST signs in
    POST /dashboard/logout          signs out
    GET  /dashboard/cluster         nodes, replicas, models: desired against ready, and why
    GET  /dashboard/traffic         requests, errors, TTFT and tokens per model
    GET  /dashboard/tenancy         orgs, teams, projects, keys (ids only), budgets, signups
    GET  /dashboard/audit           the actions taken here: who, what, when, how it ended
    POST /dashboard/keys/revoke     a key revoked (form: key, confirm, csrf)
    POST /dashboard/models/scale    a model's min and max (form: model, min, max, confirm, csrf)
    GET  /dashboard/language        remembers a language
    GET  /dashboard/static/…        the stylesheet and script

Everything is the operator's: the admin token as a bearer header, or a session cookie
the sign-in form sets (llmgw.web.dashboard_auth). The data and the actions go through
the admin API's own handler (`api`, `AdminApi.handle`), so a page shows what /api
answers and an action does what /api does, under the same checks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, quote

import orjson

from llmgw.config import Settings
from llmgw.errors import ApiError
from llmgw.http.rsgi import HTTPProtocol, Scope
from llmgw.router.metrics import GatewayMetrics
from llmgw.store.audit import AuditEntry, AuditRepo
from llmgw.web import dashboard_auth as auth
from llmgw.web.app import ModelsSource
from llmgw.web.dashboard_traffic import traffic_rows
from llmgw.web.i18n import (
    LANGUAGE_COOKIE,
    cookie_value,
    language_switch,
    load_catalogs,
    pick_language,
)
from llmgw.web.render import Renderer, page_headers
from llmgw.web.static import load_assets, serve_asset

log = logging.getLogger(__name__)

PREFIX = "/dashboard"
STATIC = PREFIX + "/static"
PAGES: tuple[str, ...] = ("cluster", "traffic", "tenancy", "audit")
AUDIT_SHOWN = 200
KEYS_SHOWN = 200
"""Keys listed on the Tenancy page, newest first; the count says how many there are."""

Api = Callable[[str, str, Mapping[str, str], bytes], Awaitable[tuple[int, Any]]]
"""The admin API's handler, as the operator: method, path, query, body."""


class Dashboard:
    """The /dashboard pages; the server mounts it on admin_listen."""

    def __init__(
        self,
        settings: Settings,
        token: str,
        api: Api,
        metrics: GatewayMetrics,
        audit: AuditRepo,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings = settings
        self._token = token
        self._api = api
        self._metrics = metrics
        self._audit = audit
        self._clock = clock
        self._catalogs = load_catalogs()
        self._languages = tuple((code, m["lang_name"]) for code, m in self._catalogs.items())
        self._assets = load_assets(STATIC)
        self._renderer = Renderer()
        self.models: ModelsSource = lambda: ()
        """What `/v1/models` lists (set by the server once the gateway is built)."""
        self.has_control: Callable[[], bool] = lambda: False
        """Whether a control plane answers /api/control (set by the server)."""

    async def __call__(self, scope: Scope, proto: HTTPProtocol) -> None:
        path = scope.path.rstrip("/") or "/"
        if path in ("/", PREFIX):
            proto.response_bytes(303, [("location", PREFIX + "/cluster"), ("cache-control", "no-store")], b"")
        elif path.startswith(STATIC + "/"):
            serve_asset(self._assets, scope, proto)
        elif path == PREFIX + "/language":
            self._switch_language(scope, proto)
        elif path == PREFIX + "/login":
            await self._login(scope, proto)
        elif path == PREFIX + "/logout" and scope.method == "POST":
            await self._logout(scope, proto)
        elif path.startswith(PREFIX + "/") and path[len(PREFIX) + 1 :] in PAGES:
            if scope.method != "GET":
                self._plain(proto, 405, "GET only\n", [("allow", "GET")])
                return
            session = self._who(scope)
            if session is None:
                self._login_page(scope, proto, 401, error=False)
                return
            await self._page(scope, proto, path[len(PREFIX) + 1 :], session)
        elif path in (PREFIX + "/keys/revoke", PREFIX + "/models/scale"):
            await self._action(scope, proto, path)
        else:
            self._plain(proto, 404, f"{path} is not a dashboard page\n")

    # --- who is asking -----------------------------------------------------------------

    def _who(self, scope: Scope) -> str | None:
        """The credential the request came with: its session cookie's value, "" for the
        bearer header, None for no credential that holds."""
        headers = scope.headers
        if auth.bearer_matches(self._token, headers.get("authorization")):
            return ""
        value = cookie_value(headers.get("cookie"), auth.SESSION_COOKIE)
        if auth.session_valid(self._token, value, self._clock()):
            return value
        return None

    def _csrf(self, session: str) -> str:
        return auth.csrf_token(self._token, session or None)

    async def _login(self, scope: Scope, proto: HTTPProtocol) -> None:
        if scope.method == "GET":
            self._login_page(scope, proto, 200, error=False)
            return
        if scope.method != "POST":
            self._plain(proto, 405, "GET or POST\n", [("allow", "GET, POST")])
            return
        form = _form(await proto())
        if not auth.token_matches(self._token, form.get("token", "")):
            self._login_page(scope, proto, 401, error=True)
            return
        value = auth.new_session(self._token, self._clock())
        cookie = (
            f"{auth.SESSION_COOKIE}={value}; Path={PREFIX}; Max-Age={auth.SESSION_TTL_S}; "
            "HttpOnly; SameSite=Strict"
        )
        if scope.headers.get("x-forwarded-proto") == "https":
            cookie += "; Secure"
        location = PREFIX + "/cluster"
        proto.response_bytes(
            303, [("location", location), ("set-cookie", cookie), ("cache-control", "no-store")], b""
        )

    async def _logout(self, scope: Scope, proto: HTTPProtocol) -> None:
        session = self._who(scope)
        form = _form(await proto())
        if session is None or not auth.csrf_valid(self._token, session or None, form.get("csrf", "")):
            self._plain(proto, 403, "sign out from the dashboard's own form\n")
            return
        cookie = f"{auth.SESSION_COOKIE}=; Path={PREFIX}; Max-Age=0; HttpOnly; SameSite=Strict"
        proto.response_bytes(
            303, [("location", PREFIX + "/login"), ("set-cookie", cookie), ("cache-control", "no-store")], b""
        )

    # --- pages -------------------------------------------------------------------------

    def _language(self, scope: Scope) -> str:
        headers = scope.headers
        return pick_language(
            cookie_value(headers.get("cookie"), LANGUAGE_COOKIE),
            headers.get("accept-language"),
            self._settings.landing.language,
        )

    def _common(self, scope: Scope, page: str, session: str | None) -> dict[str, Any]:
        lang = self._language(scope)
        return {
            "lang": lang,
            "t": self._catalogs[lang],
            "languages": self._languages,
            "here": scope.path,
            "page": page,
            "static_prefix": STATIC,
            "language_url": PREFIX + "/language",
            "home_url": PREFIX + "/cluster",
            "signed_in": session is not None,
            "csrf": self._csrf(session) if session is not None else "",
            "notice": _notice(scope.query_string),
        }

    def _login_page(self, scope: Scope, proto: HTTPProtocol, status: int, *, error: bool) -> None:
        body = self._renderer.render(
            "dash_login.html", {**self._common(scope, "login", None), "error": error}
        )
        headers = page_headers()
        if status == 401:
            headers.append(("www-authenticate", "Bearer"))
        proto.response_bytes(status, headers, body)

    async def _page(self, scope: Scope, proto: HTTPProtocol, page: str, session: str) -> None:
        common = self._common(scope, page, session)
        try:
            context = await self.context(page)
        except ApiError as error:
            common["notice"] = error.message
            context = {"failed": True}
        body = self._renderer.render(f"dash_{page}.html", {**common, **context})
        headers = [*page_headers(), ("cache-control", "no-store")]
        headers = [h for h in headers if h != ("cache-control", "private, no-cache")]
        proto.response_bytes(200, headers, body)

    async def context(self, page: str) -> dict[str, Any]:
        """What a page shows (public for the bench, which renders without sockets)."""
        if page == "cluster":
            return await self._cluster()
        if page == "traffic":
            return {"rows": traffic_rows(self._metrics)}
        if page == "audit":
            entries = await self._audit.newest(AUDIT_SHOWN)
            return {"entries": [{"when": _utc(e.at), "entry": e} for e in entries]}
        return await self._tenancy()

    def render(self, page: str, context: Mapping[str, Any], lang: str = "en") -> bytes:
        """A page with `context`, as the operator signed in with the bearer header."""
        common = {
            "lang": lang,
            "t": self._catalogs[lang],
            "languages": self._languages,
            "here": f"{PREFIX}/{page}",
            "page": page,
            "static_prefix": STATIC,
            "language_url": PREFIX + "/language",
            "home_url": PREFIX + "/cluster",
            "signed_in": True,
            "csrf": self._csrf(""),
            "notice": None,
        }
        return self._renderer.render(f"dash_{page}.html", {**common, **context})

    async def _data(self, path: str, query: Mapping[str, str] | None = None) -> Any:
        _, payload = await self._api("GET", path, query or {}, b"")
        return payload

    async def _cluster(self) -> dict[str, Any]:
        served = [str(entry["id"]) for entry in self.models()]
        if not self.has_control():
            return {"control": False, "served": served, "nodes": [], "replicas": [], "models": []}
        nodes = (await self._data("/api/control/nodes"))["data"]
        replicas = (await self._data("/api/control/replicas"))["data"]
        models = (await self._data("/api/control/models"))["data"]
        by_node: dict[str, list[str]] = {}
        for replica in replicas:
            for node in replica["nodes"]:
                by_node.setdefault(node, []).append(f"{replica['model']} ({replica['phase']})")
        for model in models:
            # Why a model is short of what it asks for: the control plane's own account.
            model["why"] = []
            if model["ready"] < model["min"]:
                try:
                    explained = await self._data(f"/api/control/models/{model['name']}/explain")
                except ApiError as error:  # not yet in the running catalog: say so, show the rest
                    model["why"] = [error.message]
                else:
                    model["why"] = explained.get("lines", [])
        return {
            "control": True,
            "served": served,
            "nodes": nodes,
            "node_replicas": by_node,
            "replicas": replicas,
            "models": models,
        }

    async def _tenancy(self) -> dict[str, Any]:
        orgs = (await self._data("/api/orgs"))["data"]
        teams = (await self._data("/api/teams"))["data"]
        projects = (await self._data("/api/projects"))["data"]
        users = (await self._data("/api/users"))["data"]
        keys = await self._data("/api/keys", {"newest": str(KEYS_SHOWN)})
        budgets = (await self._data("/api/budgets"))["data"]
        return {
            "orgs": orgs,
            "teams": teams,
            "projects": projects,
            "keys": keys["data"],
            "key_count": keys["total"],
            "budgets": budgets,
            "pending": [u for u in users if u.get("status") == "pending"],
        }

    # --- actions -----------------------------------------------------------------------

    async def _action(self, scope: Scope, proto: HTTPProtocol, path: str) -> None:
        if scope.method != "POST":
            self._plain(proto, 405, "POST only\n", [("allow", "POST")])
            return
        session = self._who(scope)
        if session is None:
            self._plain(proto, 401, "sign in first: the admin token opens the dashboard\n")
            return
        form = _form(await proto())
        if not auth.csrf_valid(self._token, session or None, form.get("csrf", "")):
            self._plain(
                proto, 403, "the form's CSRF token is missing or wrong: reload the page and try again\n"
            )
            return
        back = "/tenancy" if path.endswith("/revoke") else "/cluster"
        if form.get("confirm") != "yes":
            self._done(proto, back, "not done: tick the confirmation box first")
            return
        who = f"operator (session {session.split('.')[1][:6]})" if session else "operator (bearer token)"
        if path.endswith("/revoke"):
            key = form.get("key", "")
            action, target = "key.revoke", f"key:{key}"
            call: tuple[str, str, dict[str, str], bytes] = (
                "POST",
                f"/api/keys/{quote(key, safe='')}/revoke",
                {},
                b"",
            )
            said = f"key {key} revoked"
        else:
            model = form.get("model", "")
            wanted = {"min": _int(form.get("min")), "max": _int(form.get("max"))}
            action, target = "model.scale", f"model:{model} min={wanted['min']} max={wanted['max']}"
            call = ("POST", f"/api/control/models/{model}/scale", {"by": "dashboard"}, orjson.dumps(wanted))
            said = f"model {model} scaled to min {wanted['min']}, max {wanted['max']}"
        try:
            await self._api(*call)
        except ApiError as error:
            said, outcome = f"not done: {error.message}", error.message
        else:
            outcome = "done"
        # Recorded whether or not it was done: an attempt refused is worth seeing too.
        await self._audit.record(AuditEntry(self._clock(), who, action, target, outcome))
        log.info("dashboard: %s %s by %s: %s", action, target, who, outcome)
        self._done(proto, back, said)

    def _done(self, proto: HTTPProtocol, page: str, notice: str) -> None:
        location = f"{PREFIX}{page}?notice={quote(notice)}"
        proto.response_bytes(303, [("location", location), ("cache-control", "no-store")], b"")

    # --- plumbing ----------------------------------------------------------------------

    def _plain(
        self, proto: HTTPProtocol, status: int, text: str, extra: list[tuple[str, str]] | None = None
    ) -> None:
        headers = [
            ("content-type", "text/plain; charset=utf-8"),
            ("cache-control", "no-store"),
            *(extra or []),
        ]
        proto.response_bytes(status, headers, text.encode())

    def _switch_language(self, scope: Scope, proto: HTTPProtocol) -> None:
        target = (parse_qs(scope.query_string).get("next") or [""])[0]
        if not target.startswith(PREFIX + "/") or any(c in target for c in "\\\r\n"):
            target = PREFIX + "/cluster"
        proto.response_bytes(303, language_switch(scope.query_string, self._catalogs, target), b"")


def _utc(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _form(body: bytes) -> dict[str, str]:
    """An urlencoded form's fields, the last of each name."""
    return {name: values[-1] for name, values in parse_qs(body.decode("utf-8", "replace")).items()}


def _notice(query_string: str) -> str | None:
    """The outcome an action redirected with (shown as text: it is escaped like all)."""
    found = parse_qs(query_string).get("notice")
    return found[-1][:300] if found else None


def _int(value: str | None) -> int | str | None:
    """A form's number as an int when it is one; else as sent, for the API to refuse."""
    if value is not None and value.strip().isdigit():
        return int(value.strip())
    return value
