"""What the Responses API's handlers share: the stored objects' repository (None when
nothing is kept), their retention, the clock, id minting, and answering in JSON."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import orjson

from llmgw.errors import BadRequest, NotFound
from llmgw.http.responses import JSON
from llmgw.http.rsgi import HTTPProtocol
from llmgw.store.responses import ResponsesRepo

NO_STORE_HINT = (
    "this gateway keeps no responses or conversations: with auth off, set threads.store and "
    "threads.retain_hours to keep them"
)
_MAX_LIMIT = 100


def new_id(prefix: str) -> str:
    """An id as OpenAI's look: the object's prefix and 48 random hex digits."""
    return f"{prefix}_{secrets.token_hex(24)}"


@dataclass
class Context:
    repo: ResponsesRepo | None
    retain_s: float
    clock: Callable[[], float] = time.time
    ids: Callable[[str], str] = field(default=new_id)

    def needs_repo(self, what: str) -> ResponsesRepo:
        """The repository, or 400 naming the settings that would make one."""
        if self.repo is None:
            raise BadRequest(f"{what}: {NO_STORE_HINT}", code="store_not_configured")
        return self.repo


def reply(proto: HTTPProtocol, body: Any, status: int = 200) -> None:
    proto.response_bytes(status, [("content-type", JSON)], orjson.dumps(body))


def not_found(kind: str, ident: str) -> NotFound:
    return NotFound(f"no {kind} with id {ident!r} is visible to this caller", code="not_found")


def listing(query: str) -> tuple[str | None, int, bool]:
    """A list's `after`, `limit` (1 to 100, default 20) and whether `order` is desc (the
    default)."""
    params = parse_qs(query)
    after = params.get("after", [None])[0]
    raw_limit = params.get("limit", ["20"])[0]
    if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= _MAX_LIMIT:
        raise BadRequest(f"limit must be a whole number from 1 to {_MAX_LIMIT}", param="limit")
    order = params.get("order", ["desc"])[0]
    if order not in ("asc", "desc"):
        raise BadRequest("order must be asc or desc", param="order")
    return after, int(raw_limit), order == "desc"


def item_page(items: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    return {
        "object": "list",
        "data": items,
        "first_id": items[0]["id"] if items else None,
        "last_id": items[-1]["id"] if items else None,
        "has_more": has_more,
    }
