"""`/v1/conversations`: create one (with items to start from), read and delete it, add
items and list them. A conversation is context a response can run in
(`conversation` on `POST /v1/responses`): its items go before the new input, and the
input and the output are appended to it."""

from __future__ import annotations

from typing import Any

import orjson

from llmgw.batch.responses_context import Context, item_page, listing, not_found, reply
from llmgw.batch.responses_request import normalize_items
from llmgw.errors import BadRequest, MethodNotAllowed
from llmgw.http.rsgi import HTTPProtocol
from llmgw.store.responses import StoredConversation

PREFIX = "/v1/conversations"
# How many items one call may add, as OpenAI bounds it.
MAX_ITEMS_PER_CALL = 20


def _json(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the body is not JSON: {exc}", code="invalid_json") from exc
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object", code="invalid_request")
    return body


def _items(ctx: Context, body: dict[str, Any]) -> list[dict[str, Any]]:
    value = body.get("items") or []
    if isinstance(value, list) and len(value) > MAX_ITEMS_PER_CALL:
        raise BadRequest(f"items holds at most {MAX_ITEMS_PER_CALL} items per call", param="items")
    return normalize_items(value, ctx.ids, "items")


def _conversation(stored: StoredConversation) -> dict[str, Any]:
    return {
        "id": stored.id,
        "object": "conversation",
        "created_at": int(stored.created_at),
        "metadata": stored.metadata,
    }


async def serve(
    ctx: Context, method: str, rest: str, query: str, raw: bytes, proto: HTTPProtocol, owner: str
) -> None:
    """Answers `method` on PREFIX + `rest`."""
    repo = ctx.needs_repo("conversations")
    now = ctx.clock()
    if rest == "":
        if method != "POST":
            raise MethodNotAllowed(f"{PREFIX} takes POST", allow="POST")
        body = _json(raw)
        metadata = body.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise BadRequest("metadata must be an object of strings", param="metadata")
        items = _items(ctx, body)
        stored = StoredConversation(ctx.ids("conv"), owner, metadata, now, now + ctx.retain_s)
        await repo.create_conversation(stored, [(item["id"], item) for item in items])
        reply(proto, _conversation(stored))
        return
    ident, _, tail = rest.lstrip("/").partition("/")
    conversation = await repo.get_conversation(ident, owner, now)
    if conversation is None:
        raise not_found("conversation", ident)
    if tail == "":
        if method == "GET":
            reply(proto, _conversation(conversation))
        elif method == "DELETE":
            await repo.delete_conversation(ident, owner)
            reply(proto, {"id": ident, "object": "conversation.deleted", "deleted": True})
        else:
            raise MethodNotAllowed(f"{PREFIX}/{{id}} takes GET or DELETE", allow="GET, DELETE")
        return
    if tail != "items":
        raise not_found("route", f"{PREFIX}/{ident}/{tail}")
    if method == "POST":
        items = _items(ctx, _json(raw))
        if not items:
            raise BadRequest("items is required: the items to add", param="items")
        await repo.add_items(ident, [(item["id"], item) for item in items], now, now + ctx.retain_s)
        reply(proto, item_page(items, False))
    elif method == "GET":
        after, limit, descending = listing(query)
        found, more = await repo.items(ident, after=after, limit=limit, descending=descending)
        reply(proto, item_page(found, more))
    else:
        raise MethodNotAllowed(f"{PREFIX}/{{id}}/items takes GET or POST", allow="GET, POST")
