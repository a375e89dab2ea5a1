"""The chat page on the client port, for signed-in people:

    GET  /chat        the form: a model by way of one of the person's keys (personal, or
                      a project's they belong to), a message, and the budget left
    POST /chat/send   the message sent (form: csrf_token, target, message). Asked with
                      `accept: text/event-stream` (the page's script) the answer streams
                      back as the gateway's own SSE; otherwise (no script) the page comes
                      back with the whole answer on it.

The request goes through the gateway's own path (`GatewayApp.serve_as`) as the chosen
key's principal, so limits, budgets, guardrails and usage are those of any API call
with that key. The person never handles the key itself: the session and its CSRF token
are what is checked here. Only the signed-in person's own keys are offered or taken,
and only their budgets are shown. No conversation is kept: each message is sent alone.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import orjson

from llmgw.auth.principal import Principal
from llmgw.errors import ApiError, BadRequest, Forbidden, NotFound, StoreError
from llmgw.http.rsgi import HTTPProtocol, Scope, StreamTransport
from llmgw.identity.app import check_csrf
from llmgw.web.guide import model_rows
from llmgw.web.i18n import LANGUAGE_COOKIE, Messages, cookie_value, load_catalogs, pick_language
from llmgw.web.render import Renderer, page_headers

if TYPE_CHECKING:
    from llmgw.auth.gate import AuthGate
    from llmgw.config import Settings
    from llmgw.identity import SessionManager
    from llmgw.identity.sessions import SignedIn

PAGE = "/chat"
SEND = "/chat/send"
CHAT_PATH = "/v1/chat/completions"
MAX_MESSAGE_CHARS = 32_000
_MAX_FORM_BYTES = 256 * 1024
_MAX_FORM_FIELDS = 10
_NO_STORE = ("cache-control", "no-store")

ServeAs = Callable[[Scope, HTTPProtocol, Principal | None, str | None], Awaitable[None]]
ModelsSource = Callable[[], Sequence[Mapping[str, Any]]]


@dataclass(frozen=True)
class Choice:
    """A model by way of one key: the form's `target` value is `key_id:model`."""

    value: str
    key_label: str
    model: str
    principal: Principal


@dataclass(frozen=True)
class BudgetLeft:
    source: str
    period: str
    left_micros: int
    budget_micros: int

    @property
    def left(self) -> str:
        return f"${max(self.left_micros, 0) / 1_000_000:.4f}"

    @property
    def budget(self) -> str:
        return f"${self.budget_micros / 1_000_000:.4f}"


def budgets_left(
    principal: Principal, spent: Callable[[str, str, float], int], now: float
) -> list[BudgetLeft]:
    """What is left of each budget the key's requests are held to (its own, its
    person's or project's and above), as the ledger has it."""
    return [
        BudgetLeft(r.source, r.period, r.budget_micros - spent(r.scope, r.period, now), r.budget_micros)
        for r in principal.budgets
    ]


def split_target(value: str) -> tuple[str, str]:
    """`key_id:model` as its two parts (model names may hold colons; key ids do not)."""
    key_id, sep, model = value.partition(":")
    if not sep or not key_id or not model:
        raise BadRequest("target must be a model picked on the page (key:model)", code="bad_form")
    return key_id, model


class _Headers:
    def __init__(self, values: dict[str, str]) -> None:
        self._values = values

    def get(self, name: str, /) -> str | None:
        return self._values.get(name.lower())


@dataclass(frozen=True)
class _ChatScope:
    headers: _Headers
    proto: str = "http"
    method: str = "POST"
    path: str = CHAT_PATH
    query_string: str = ""


class _Relay:
    """The browser's protocol, with the chat request's JSON body in place of the form:
    the gateway's answer, streamed or whole, goes straight back to the browser."""

    def __init__(self, body: bytes, browser: HTTPProtocol) -> None:
        self._body = body
        self._browser = browser

    async def __call__(self) -> bytes:
        return self._body

    def __aiter__(self) -> Any:
        return self._once()

    async def _once(self) -> Any:
        yield self._body

    def response_bytes(self, status: int, headers: list[tuple[str, str]], body: bytes, /) -> None:
        self._browser.response_bytes(status, [*headers, _NO_STORE], body)

    def response_stream(
        self, status: int, headers: list[tuple[str, str]], first: bytes = b"", /
    ) -> StreamTransport:
        return self._browser.response_stream(status, [*headers, _NO_STORE], first)

    async def client_disconnect(self) -> None:
        await self._browser.client_disconnect()


class _Parts:
    def __init__(self, parts: list[bytes]) -> None:
        self._parts = parts

    async def send_bytes(self, data: bytes, /) -> None:
        self._parts.append(data)


class _Caught(_Relay):
    """The whole answer kept for the page (the form without a script)."""

    def __init__(self, body: bytes, browser: HTTPProtocol) -> None:
        super().__init__(body, browser)
        self.status = 500
        self.parts: list[bytes] = []

    def response_bytes(self, status: int, headers: list[tuple[str, str]], body: bytes, /) -> None:
        self.status = status
        self.parts.append(body)

    def response_stream(
        self, status: int, headers: list[tuple[str, str]], first: bytes = b"", /
    ) -> StreamTransport:
        self.status = status
        self.parts.append(first)
        return _Parts(self.parts)


def answer_of(status: int, body: bytes) -> tuple[str, str, dict[str, Any]]:
    """(answer text, error message, usage) of a whole chat completion answer."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return "", f"the gateway answered {status} without JSON", {}
    if status != 200 or not isinstance(data, dict):
        error = data.get("error", {}) if isinstance(data, dict) else {}
        return "", str(error.get("message") or f"the gateway answered {status}"), {}
    choices = data.get("choices") or [{}]
    text = str((choices[0].get("message") or {}).get("content") or "")
    return text, "", dict(data.get("usage") or {})


class ChatPage:
    """/chat and /chat/send, mounted on the client port with sign-in and auth on."""

    def __init__(
        self,
        settings: Settings,
        sessions: SessionManager,
        gate: AuthGate,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings = settings
        self._sessions = sessions
        self._gate = gate
        self._clock = clock
        self._catalogs = load_catalogs()
        self._languages = tuple((code, m["lang_name"]) for code, m in self._catalogs.items())
        self._renderer = Renderer()
        self.models: ModelsSource = tuple
        """What `/v1/models` lists (set by the server once the gateway is built)."""
        self.serve_as: ServeAs | None = None
        """The gateway's in-process request path (set once the gateway is built)."""

    async def __call__(self, scope: Scope, proto: HTTPProtocol) -> None:
        if scope.proto != "http":
            return
        t = self._catalogs[self._language(scope)]
        if scope.path not in (PAGE, SEND):
            self._message(scope, proto, 404, t["not_found_title"], t["not_found_text"])
            return
        try:
            who = await self._sessions.signed_in(scope.headers)
        except StoreError:
            self._message(scope, proto, 503, t["chat_title"], t["chat_store_down"])
            return
        if who is None:
            if scope.method == "GET":
                proto.response_bytes(302, [("location", f"/auth/login?return_to={PAGE}"), _NO_STORE], b"")
            else:
                self._message(scope, proto, 401, t["signin_needed_title"], t["chat_signin"])
            return
        if not who.active:
            proto.response_bytes(302, [("location", "/auth"), _NO_STORE], b"")
            return
        if scope.path == PAGE and scope.method == "GET":
            self._page(scope, proto, 200, who, t)
        elif scope.path == SEND and scope.method == "POST":
            await self._send(scope, proto, who, t)
        else:
            allow = "GET" if scope.path == PAGE else "POST"
            proto.response_bytes(405, [("allow", allow), ("content-type", "text/plain")], b"not here\n")

    async def _send(self, scope: Scope, proto: HTTPProtocol, who: SignedIn, t: Messages) -> None:
        streaming = "text/event-stream" in (scope.headers.get("accept") or "")
        form: dict[str, str] = {}
        try:
            form = await _form(proto)
            check_csrf(form.get("csrf_token", ""), who.csrf_token)
            choice = self._choice(who, form.get("target", ""))
            message = form.get("message", "").strip()
            if not message or len(message) > MAX_MESSAGE_CHARS:
                raise BadRequest(
                    f"message must be 1 to {MAX_MESSAGE_CHARS} characters: write one and send it again",
                    code="bad_message",
                )
            serve_as = self.serve_as
            if serve_as is None:
                raise NotFound("the gateway is still starting: try again shortly", code="not_ready")
        except ApiError as error:
            if streaming:
                body = orjson.dumps({"error": {"message": error.message, "code": error.code}})
                proto.response_bytes(error.status, [("content-type", "application/json"), _NO_STORE], body)
            else:
                self._page(scope, proto, error.status, who, t, error=error.message, form=form)
            return
        request: dict[str, Any] = {
            "model": choice.model,
            "messages": [{"role": "user", "content": message}],
            "stream": streaming,
        }
        if streaming:
            request["stream_options"] = {"include_usage": True}
        body = orjson.dumps(request)
        headers = {"content-type": "application/json", "content-length": str(len(body))}
        if streaming:
            headers["accept"] = "text/event-stream"
        inner = _ChatScope(_Headers(headers))
        if streaming:
            await serve_as(inner, _Relay(body, proto), choice.principal, None)
            return
        caught = _Caught(body, proto)
        await serve_as(inner, caught, choice.principal, None)
        text, error_text, usage = answer_of(caught.status, b"".join(caught.parts))
        status = 200 if not error_text else caught.status
        self._page(
            scope, proto, status, who, t, error=error_text, form=form, answer=text, usage=usage, sent=message
        )

    def _choices(self, who: SignedIn) -> list[Choice]:
        projects = frozenset(role.id for role in who.roles if role.kind == "project")
        rows = [row for row in model_rows(self.models()) if not row.embeddings]
        choices = []
        for key, principal in self._gate.directory.usable_by(who.user_id, projects, self._clock()):
            label = key.project_id or "personal"
            label = f"{label} · {key.name or key.id}"
            choices += [
                Choice(f"{key.id}:{row.name}", label, row.name, principal)
                for row in rows
                if self._gate.visible(principal, row.name, None)
            ]
        return choices

    def _choice(self, who: SignedIn, target: str) -> Choice:
        split_target(target)
        for choice in self._choices(who):
            if choice.value == target:
                return choice
        raise Forbidden("that model is not one of yours to use: pick one on the page", code="model_not_yours")

    def _page(
        self,
        scope: Scope,
        proto: HTTPProtocol,
        status: int,
        who: SignedIn,
        t: Messages,
        *,
        error: str = "",
        form: Mapping[str, str] | None = None,
        answer: str = "",
        usage: Mapping[str, Any] | None = None,
        sent: str = "",
    ) -> None:
        choices = self._choices(who)
        picked = (form or {}).get("target", "")
        current = next((c for c in choices if c.value == picked), choices[0] if choices else None)
        groups: dict[str, list[Choice]] = {}
        for choice in choices:
            groups.setdefault(choice.key_label, []).append(choice)
        spent = self._gate.ledger.spent
        budgets = budgets_left(current.principal, spent, self._clock()) if current is not None else []
        body = self._renderer.render(
            "chat.html",
            {
                **self._common(scope, t),
                "who": who.name or who.user_id,
                "csrf_token": who.csrf_token,
                "groups": groups,
                "picked": current.value if current is not None else "",
                "budgets": budgets,
                "error": error,
                "answer": answer,
                "sent": sent,
                "usage": usage or {},
                "max_chars": MAX_MESSAGE_CHARS,
            },
        )
        proto.response_bytes(status, [*page_headers(), _NO_STORE], body)

    def _language(self, scope: Scope) -> str:
        headers = scope.headers
        return pick_language(
            cookie_value(headers.get("cookie"), LANGUAGE_COOKIE),
            headers.get("accept-language"),
            self._settings.landing.language,
        )

    def _common(self, scope: Scope, t: Messages) -> dict[str, Any]:
        return {
            "lang": self._language(scope),
            "t": t,
            "languages": self._languages,
            "here": PAGE,
            "page": "chat",
            "account_url": "/account/keys",
            "chat_url": PAGE,
        }

    def _message(self, scope: Scope, proto: HTTPProtocol, status: int, heading: str, text: str) -> None:
        t = self._catalogs[self._language(scope)]
        body = self._renderer.render(
            "message.html", {**self._common(scope, t), "page": "message", "heading": heading, "text": text}
        )
        proto.response_bytes(status, [*page_headers(), _NO_STORE], body)


async def _form(proto: HTTPProtocol) -> dict[str, str]:
    raw = await proto()
    if len(raw) > _MAX_FORM_BYTES:
        raise BadRequest("the form is too large: send a shorter message", code="bad_form")
    try:
        text = raw.decode()
        return {k: v[-1] for k, v in parse_qs(text, max_num_fields=_MAX_FORM_FIELDS).items()}
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequest("the form is not URL-encoded text: send it from the page", code="bad_form") from exc
