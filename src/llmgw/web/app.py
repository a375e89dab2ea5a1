"""The public pages on the client port, as an RSGI-shaped application (llmgw.http.rsgi)
the server mounts beside the API:

    GET /                the landing page: what this is, the models, how to get a key
    GET /docs            the docs portal: base URL, auth, models, limits, routes, errors
    GET /openapi.json    the client API as an OpenAPI 3.1 document
    GET /language        remembers a language (?set=tr&next=/docs) in a cookie
    GET /static/…        the stylesheet and script, cached

None of this is on the request path: the API's routes are matched before any mount.
With `landing.docs_sign_in`, /docs and /openapi.json are for signed-in people (sent to
sign in) or, without sign-in, for callers with an API key.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote

import orjson

from llmgw.config import Settings
from llmgw.errors import ApiError
from llmgw.http.responses import JSON
from llmgw.http.rsgi import HTTPProtocol, Scope
from llmgw.web import guide
from llmgw.web.i18n import (
    LANGUAGE_COOKIE,
    Messages,
    cookie_value,
    language_switch,
    load_catalogs,
    pick_language,
)
from llmgw.web.openapi import openapi_document
from llmgw.web.render import SECURITY_HEADERS, Renderer, page_headers
from llmgw.web.static import STATIC_PREFIX, load_assets, serve_asset

if TYPE_CHECKING:
    from llmgw.auth.gate import AuthGate
    from llmgw.identity import SessionManager

PREFIXES: tuple[str, ...] = ("/", "/docs", "/openapi.json", "/language", STATIC_PREFIX)
ERROR_STATUSES: tuple[int, ...] = (400, 401, 403, 404, 413, 429, 503, 504)

ModelsSource = Callable[[], Sequence[Mapping[str, Any]]]


def _no_models() -> Sequence[Mapping[str, Any]]:
    return ()


def _local(path: str) -> str:
    """`path` if it is a page of this site, else "/" (the switcher cannot send anyone
    elsewhere)."""
    if path.startswith("/") and not path.startswith("//") and not any(c in path for c in "\\\r\n"):
        return path
    return "/"


class WebApp:
    """The landing page, the docs portal, the OpenAPI document and their assets."""

    def __init__(
        self,
        settings: Settings,
        *,
        sessions: SessionManager | None = None,
        gate: AuthGate | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`sessions` when sign-in is served (auth on with OIDC), `gate` with auth on."""
        self._settings = settings
        self._sessions = sessions
        self._gate = gate
        self._clock = clock
        self._catalogs = load_catalogs()
        self._languages = tuple((code, m["lang_name"]) for code, m in self._catalogs.items())
        self._assets = load_assets()
        self._renderer = Renderer()
        signs_in = sessions is not None and settings.auth.oidc.enabled
        self._signs_in = signs_in
        self._key = guide.key_route(settings, identity=signs_in)
        self.models: ModelsSource = _no_models
        """What `/v1/models` lists (set by the server once the gateway is built)."""

    @property
    def prefixes(self) -> tuple[str, ...]:
        return PREFIXES

    async def __call__(self, scope: Scope, proto: HTTPProtocol) -> None:
        path = scope.path
        lang = self._language(scope)
        t = self._catalogs[lang]
        if scope.method != "GET":
            proto.response_bytes(
                405, [("allow", "GET"), ("content-type", "text/plain; charset=utf-8")], b"GET only\n"
            )
            return
        if path.startswith(STATIC_PREFIX + "/"):
            serve_asset(self._assets, scope, proto)
        elif path == "/language":
            self._switch_language(scope, proto)
        elif path == "/":
            proto.response_bytes(200, page_headers(), self._landing(scope, lang, t))
        elif path in ("/docs", "/openapi.json"):
            if not await self._may_read_docs(scope, proto, lang, t):
                return
            if path == "/docs":
                proto.response_bytes(200, page_headers(), self._docs(scope, lang, t))
            else:
                body = orjson.dumps(self._openapi(scope), option=orjson.OPT_INDENT_2)
                proto.response_bytes(200, [("content-type", JSON), *SECURITY_HEADERS], body)
        else:
            self._message(scope, proto, lang, 404, t["not_found_title"], t["not_found_text"])

    def _language(self, scope: Scope) -> str:
        headers = scope.headers
        return pick_language(
            cookie_value(headers.get("cookie"), LANGUAGE_COOKIE),
            headers.get("accept-language"),
            self._settings.landing.language,
        )

    def _base(self, scope: Scope) -> str:
        headers = scope.headers
        return guide.base_url(headers.get("host"), headers.get("x-forwarded-proto"), self._settings.listen)

    def _common(self, scope: Scope, lang: str, t: Messages, page: str) -> dict[str, Any]:
        """What every page's frame shows: the language, its words, the switcher."""
        return {
            "lang": lang,
            "t": t,
            "languages": self._languages,
            "here": scope.path,
            "page": page,
            "account_url": "/account" if self._signs_in else None,
        }

    def _rows(self) -> list[guide.ModelRow]:
        return guide.model_rows(self.models())

    def _landing(self, scope: Scope, lang: str, t: Messages) -> bytes:
        base = self._base(scope)
        rows = self._rows()
        chat, _ = guide.example_models(rows)
        needs_key = self._key.needs_key
        hello = {"model": chat, "messages": [{"role": "user", "content": "Hello!"}]}
        return self._renderer.render(
            "landing.html",
            {
                **self._common(scope, lang, t, "landing"),
                "notice": self._settings.landing.notice,
                "models": rows,
                "key": self._key,
                "base": base,
                "python": guide.python_snippet(base, chat, needs_key),
                "curl": guide.curl_snippet(base, "/chat/completions", hello, needs_key),
            },
        )

    def _docs(self, scope: Scope, lang: str, t: Messages) -> bytes:
        base = self._base(scope)
        rows = self._rows()
        chat, embed = guide.example_models(rows)
        needs_key = self._key.needs_key
        auth = self._settings.auth
        streamed = {"model": chat, "messages": [{"role": "user", "content": "Hello!"}], "stream": True}
        return self._renderer.render(
            "docs.html",
            {
                **self._common(scope, lang, t, "docs"),
                "models": rows,
                "key": self._key,
                "base": base,
                "limits": {
                    "body_bytes": self._settings.router.max_body_bytes,
                    "rpm": auth.default_rpm,
                    "tpm": auth.default_tpm,
                },
                "routes": guide.route_examples(base, chat, embed, needs_key),
                "stream_curl": guide.curl_snippet(base, "/chat/completions", streamed, needs_key).replace(
                    "curl ", "curl -N ", 1
                ),
                "error_statuses": ERROR_STATUSES,
            },
        )

    def _openapi(self, scope: Scope) -> dict[str, Any]:
        names = [row.name for row in self._rows()]
        return openapi_document(self._base(scope), names, needs_key=self._key.needs_key)

    def _message(
        self, scope: Scope, proto: HTTPProtocol, lang: str, status: int, heading: str, text: str
    ) -> None:
        t = self._catalogs[lang]
        body = self._renderer.render(
            "message.html", {**self._common(scope, lang, t, "message"), "heading": heading, "text": text}
        )
        headers = page_headers()
        if status == 401:
            headers.append(("www-authenticate", "Bearer"))
        proto.response_bytes(status, headers, body)

    async def _may_read_docs(self, scope: Scope, proto: HTTPProtocol, lang: str, t: Messages) -> bool:
        """True when the docs are open to this visitor; else answers (a redirect to sign
        in, or a page saying what is needed) and returns False."""
        if not self._settings.landing.docs_sign_in:
            return True
        gate = self._gate
        header = scope.headers.get("authorization")
        if gate is not None and header:
            now = self._clock()
            try:
                if gate.known(header, now) or await gate.authenticate(header, now):
                    return True
            except ApiError:
                pass  # a bad key reads as none: the visitor is told what is needed below
        if self._sessions is not None and self._signs_in:
            signed = await self._sessions.signed_in(scope.headers)
            if signed is not None and signed.active:
                return True
            # A person whose signup waits for approval is shown that (at /auth), not
            # sent round the sign-in again.
            target = "/auth" if signed is not None else "/auth/login?return_to=" + quote(scope.path, safe="/")
            proto.response_bytes(302, [("location", target), ("cache-control", "no-store")], b"")
            return False
        if gate is not None:
            self._message(scope, proto, lang, 401, t["signin_needed_title"], t["signin_needed_key"])
        else:
            self._message(scope, proto, lang, 403, t["signin_needed_title"], t["signin_needed_off"])
        return False

    def _switch_language(self, scope: Scope, proto: HTTPProtocol) -> None:
        target = _local((parse_qs(scope.query_string).get("next") or ["/"])[0])
        proto.response_bytes(303, language_switch(scope.query_string, self._catalogs, target), b"")
