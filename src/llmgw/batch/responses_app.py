"""The Responses API and conversations as an RSGI application the server mounts on the
client port at /v1/responses and /v1/conversations.

Each request's owner is the caller's project (or, for a personal key, the person) with
auth on, and the `threads` pool without: another owner's id is answered 404, as one
that does not exist. Generation itself is a chat completion run through `chat` (the
client port's own application, set by the server once it is built), so the caller's key
is checked there again, with its limits, budgets and usage, as for any chat request.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from llmgw.batch import conversations_routes
from llmgw.batch.responses_context import Context, item_page, listing, not_found, reply
from llmgw.batch.responses_create import create
from llmgw.errors import ApiError, MethodNotAllowed, PayloadTooLarge
from llmgw.http.responses import api_error_response
from llmgw.http.rsgi import App, HTTPProtocol, Scope

if TYPE_CHECKING:
    from llmgw.auth.gate import AuthGate

RESPONSES_PREFIX = "/v1/responses"
CONVERSATIONS_PREFIX = conversations_routes.PREFIX
POOL_OWNER = "threads"


class ResponsesApp:
    """`POST/GET/DELETE /v1/responses…` and `/v1/conversations…`."""

    def __init__(
        self,
        ctx: Context,
        max_body_bytes: int,
        auth: AuthGate | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.ctx = ctx
        self.chat: App | None = None
        """The client port's application, which runs the chat completions (set once built)."""
        self._max_body_bytes = max_body_bytes
        self._auth = auth
        self._wall_clock = wall_clock

    @property
    def prefixes(self) -> tuple[str, str]:
        return (RESPONSES_PREFIX, CONVERSATIONS_PREFIX)

    async def __call__(self, scope: Scope, proto: HTTPProtocol) -> None:
        try:
            await self._serve(scope, proto)
        except ApiError as error:
            status, headers, body = api_error_response(error)
            proto.response_bytes(status, headers, body)

    async def _owner(self, scope: Scope) -> str:
        auth = self._auth
        if auth is None:
            return POOL_OWNER
        header, now = scope.headers.get("authorization"), self._wall_clock()
        principal = auth.known(header, now) or await auth.authenticate(header, now)
        if principal.kind == "personal" or principal.project_id is None:
            return f"user:{principal.user_id}"
        return f"project:{principal.project_id}"

    async def _body(self, proto: HTTPProtocol) -> bytes:
        parts: list[bytes] = []
        size = 0
        async for part in proto:
            size += len(part)
            if size > self._max_body_bytes:
                raise PayloadTooLarge(
                    f"the request body is over {self._max_body_bytes} bytes (router.max_body_bytes)",
                    code="body_too_large",
                )
            parts.append(part)
        return b"".join(parts)

    async def _serve(self, scope: Scope, proto: HTTPProtocol) -> None:
        owner = await self._owner(scope)
        path, method = scope.path, scope.method
        raw = await self._body(proto) if method == "POST" else b""
        if path.startswith(CONVERSATIONS_PREFIX):
            rest = path[len(CONVERSATIONS_PREFIX) :]
            await conversations_routes.serve(self.ctx, method, rest, scope.query_string, raw, proto, owner)
            return
        rest = path[len(RESPONSES_PREFIX) :].lstrip("/")
        if rest == "":
            if method != "POST":
                raise MethodNotAllowed(f"{RESPONSES_PREFIX} takes POST", allow="POST")
            assert self.chat is not None, "the server sets `chat` before it listens"
            await create(self.ctx, self.chat, scope, proto, raw, owner)
            return
        ident, _, tail = rest.partition("/")
        repo = self.ctx.repo
        stored = None if repo is None else await repo.get_response(ident, owner, self.ctx.clock())
        if repo is None or stored is None:
            raise not_found("response", ident)
        if tail == "input_items":
            if method != "GET":
                raise MethodNotAllowed(f"{RESPONSES_PREFIX}/{{id}}/input_items takes GET", allow="GET")
            after, limit, descending = listing(scope.query_string)
            items = list(reversed(stored.input_items)) if descending else list(stored.input_items)
            if after is not None:
                ids = [item["id"] for item in items]
                items = items[ids.index(after) + 1 :] if after in ids else items
            reply(proto, item_page(items[:limit], len(items) > limit))
        elif tail:
            raise not_found("route", path)
        elif method == "GET":
            reply(proto, stored.body)
        elif method == "DELETE":
            await repo.delete_response(ident, owner)
            reply(proto, {"id": ident, "object": "response", "deleted": True})
        else:
            raise MethodNotAllowed(f"{RESPONSES_PREFIX}/{{id}} takes GET or DELETE", allow="GET, DELETE")
