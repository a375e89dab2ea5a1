"""`POST /v1/responses`: the request read, its context gathered (the chain of earlier
responses, or the conversation's items), run as a chat completion through the gateway's
own request path (llmgw.batch.responses_chat), and answered as a response object or as
the Responses event stream. What is stored is stored once the answer is whole, in one
transaction: a refused or failed request leaves nothing behind."""

from __future__ import annotations

from typing import Any

import orjson

from llmgw.batch.responses_chat import Answer, ChatCall
from llmgw.batch.responses_context import Context, not_found, reply
from llmgw.batch.responses_request import Item, ResponseRequest, parse_request
from llmgw.batch.responses_stream import StreamTranslator, encode
from llmgw.batch.responses_translate import chat_body, output_of, response_object
from llmgw.errors import BadGateway
from llmgw.http.rsgi import App, HTTPProtocol, Scope
from llmgw.router.sse import SseRelay, event_data
from llmgw.store.responses import StoredResponse

# How many earlier responses a previous_response_id chain may reach back.
MAX_CHAIN = 256
# How many of a conversation's latest items a response reads as its context.
MAX_CONVERSATION_ITEMS = 10_000
# The chat answer's headers a client of the Responses API is also told.
_PASSED_HEADERS = ("retry-after", "x-ratelimit-", "x-llmgw-")


async def create(ctx: Context, app: App, scope: Scope, proto: HTTPProtocol, raw: bytes, owner: str) -> None:
    request = parse_request(raw, ctx.ids)
    if ctx.repo is None:
        if request.previous_response_id:
            ctx.needs_repo("previous_response_id")
        if request.conversation_id:
            ctx.needs_repo("conversation")
        request.store = False  # nothing can be kept; the response says so
    context = await _context(ctx, request, owner)
    body = orjson.dumps(chat_body(request, context))
    response_id, created_at = ctx.ids("resp"), int(ctx.clock())
    async with ChatCall(app, scope, proto, body) as answer:
        if answer.status != 200:
            await _relay_refusal(proto, answer)
            return
        if answer.stream is None:
            try:
                chat = orjson.loads(answer.body)
            except orjson.JSONDecodeError as exc:
                raise BadGateway("the model's chat answer was not JSON", code="upstream_error") from exc
            output, status, incomplete, usage = output_of(chat, ctx.ids)
            response = response_object(
                request,
                response_id,
                created_at,
                status=status,
                output=output,
                usage=usage,
                incomplete=incomplete,
            )
            await _keep(ctx, request, response, owner)
            reply(proto, response)
            return
        await _stream(ctx, request, answer, proto, response_id, created_at, owner)


async def _context(ctx: Context, request: ResponseRequest, owner: str) -> list[Item]:
    """The items that came before: the stored chain behind previous_response_id, oldest
    first, or the conversation's items."""
    repo, now = ctx.repo, ctx.clock()
    if repo is None:
        return []
    if request.conversation_id:
        if await repo.get_conversation(request.conversation_id, owner, now) is None:
            raise not_found("conversation", request.conversation_id)
        items, _ = await repo.items(request.conversation_id, limit=MAX_CONVERSATION_ITEMS, descending=True)
        return items[::-1]
    chain: list[StoredResponse] = []
    ident = request.previous_response_id
    while ident and len(chain) < MAX_CHAIN:
        stored = await repo.get_response(ident, owner, now)
        if stored is None:
            if not chain:
                raise not_found("response", ident)
            break  # an earlier link was deleted or expired: the chain starts after it
        chain.append(stored)
        ident = stored.previous_id
    context: list[Item] = []
    for stored in reversed(chain):
        context += stored.input_items
        context += stored.body.get("output") or []
    return context


async def _keep(ctx: Context, request: ResponseRequest, response: dict[str, Any], owner: str) -> None:
    """Stores the response (when asked) and appends its input and output to its
    conversation, in one transaction."""
    repo = ctx.repo
    if repo is None or not (request.store or request.conversation_id):
        return
    now = ctx.clock()
    stored = StoredResponse(
        response["id"],
        owner,
        request.previous_response_id,
        request.conversation_id,
        request.input_items,
        response,
        now,
        now + ctx.retain_s,
    )
    added = [(item["id"], item) for item in (*request.input_items, *response["output"])]
    if request.store:
        await repo.save_response(stored, added)
    elif request.conversation_id:
        await repo.add_items(request.conversation_id, added, now, now + ctx.retain_s)


async def _relay_refusal(proto: HTTPProtocol, answer: Answer) -> None:
    """The chat request's refusal (401, 404, 429, 503...) as it was made: already in
    OpenAI's error shape."""
    body = answer.body
    if answer.stream is not None:
        body = b"".join([piece async for piece in answer.stream])
    headers = [
        (k, v)
        for k, v in answer.headers
        if k.lower() == "content-type" or k.lower().startswith(_PASSED_HEADERS)
    ]
    proto.response_bytes(answer.status, headers, body)


async def _stream(
    ctx: Context,
    request: ResponseRequest,
    answer: Answer,
    proto: HTTPProtocol,
    response_id: str,
    created_at: int,
    owner: str,
) -> None:
    assert answer.stream is not None
    translator = StreamTranslator(request, response_id, created_at, ctx.ids)
    headers = [("content-type", "text/event-stream"), ("cache-control", "no-cache")]
    transport = proto.response_stream(200, headers, b"".join(encode(e) for e in translator.start()))
    relay = SseRelay(strip_usage=False)
    failed: str | None = None
    async for piece in answer.stream:
        out: list[bytes] = []
        for chunk in _chunks(relay.feed(piece)):
            error = chunk.get("error")
            if error is not None:
                failed = (
                    error.get("message", "the model's stream broke off")
                    if isinstance(error, dict)
                    else str(error)
                )
                break
            out += [encode(e) for e in translator.feed(chunk)]
        if out:
            await transport.send_bytes(b"".join(out))
        if failed is not None:
            break
    if failed is None:
        for chunk in _chunks(relay.flush()):
            await transport.send_bytes(b"".join(encode(e) for e in translator.feed(chunk)))
        if not relay.done:
            # Ended without `[DONE]` and without an error event: cut short, not whole.
            failed = "the model's stream ended before its last event"
    if failed is None:
        await transport.send_bytes(b"".join(encode(e) for e in translator.finish()))
        assert translator.response is not None
        await _keep(ctx, request, translator.response, owner)
    else:
        await transport.send_bytes(b"".join(encode(e) for e in translator.fail(failed)))


def _chunks(events: bytes) -> list[dict[str, Any]]:
    """The JSON chunks of whole events (the relay's output: LF line endings)."""
    chunks: list[dict[str, Any]] = []
    for event in events.split(b"\n\n"):
        data = event_data(event) if event else None
        if data is None or data == b"[DONE]":
            continue
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            continue
        if isinstance(chunk, dict):
            chunks.append(chunk)
    return chunks
