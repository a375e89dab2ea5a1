"""What the gateway reads of a client's request: just enough to route it.

The body is decoded once (orjson) to find the model, whether to stream, the output
bound, and the prompt text the prefix tree keys on. Everything else is forwarded
untouched, as the bytes the client sent, unless the gateway must change the body
(rename the model for an adapter or an external provider, ask for usage, set or drop
the engine's `priority`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from llmgw.errors import BadRequest

if TYPE_CHECKING:
    from llmgw.guard import Applied
    from llmgw.obs.spans import RequestTrace
    from llmgw.router.usage import Account

# A token is rarely longer than this many characters of prompt; dividing by it gives a
# count the prompt cannot be under, so a prompt refused on it is over-long for certain.
# Closer estimates are the engine's business: it tokenizes, and its refusal is passed on.
CHARS_PER_TOKEN_CEILING = 6


class Kind(enum.StrEnum):
    """The OpenAI routes the gateway forwards."""

    CHAT = "chat"
    COMPLETIONS = "completions"
    EMBEDDINGS = "embeddings"

    @property
    def path(self) -> bytes:
        return _PATHS[self]


_PATHS = {
    Kind.CHAT: b"/v1/chat/completions",
    Kind.COMPLETIONS: b"/v1/completions",
    Kind.EMBEDDINGS: b"/v1/embeddings",
}


@dataclass(slots=True)
class ClientRequest:
    """A decoded request, with the few fields routing needs lifted out."""

    kind: Kind
    body: dict[str, Any]
    raw: bytes
    model: str
    stream: bool
    wants_usage: bool
    max_tokens: int | None
    prompt: str
    max_tokens_field: str = "max_tokens"
    session: str | None = None
    account: Account | None = None
    """Set with auth on: who the request is charged to."""
    engine_priority: int = 0
    """vLLM's request priority for the request's band (0 for the top band, lower served
    sooner), sent to replicas that schedule by priority."""
    guard: Applied | None = None
    """The guard rules the caller's answer is checked by; None with no guard at all."""
    guard_flagged: str = ""
    """What flagged the request at the input stage (`policy/check,…`), for its usage record."""
    band: str = ""
    """The admission band it was admitted in, for its access line."""
    trace: RequestTrace | None = None
    """With tracing on and the request sampled: its span, which the steps hang below."""
    trace_context: bytes = b""
    """The client's `traceparent` (and `tracestate`) as header lines, passed on to the
    replica when this gateway records nothing of the request."""
    cache: tuple[bytes, float] | None = None
    """A cacheable request the cache did not hold: its key and its project's lifetime,
    for keeping the whole answer (llmgw.router.response_cache)."""

    @property
    def prompt_token_floor(self) -> int:
        """A number of prompt tokens the prompt is certainly not under."""
        return len(self.prompt) // CHARS_PER_TOKEN_CEILING

    def body_for(
        self,
        model_name: str | None,
        *,
        ask_usage: bool,
        priority: int | None = None,
        lora: int | None = None,
        lora_scale: float = 1.0,
    ) -> bytes:
        """The body to send a replica: the client's own bytes unless something changes.

        `priority` is the engine's request priority for a replica that schedules by it,
        None for one that does not. Either way a client's own `priority` is not passed
        on: the gateway decides it, and an engine without priority scheduling refuses it.
        Priority 0 is the engine's default, so it is left implicit.

        `lora` is the number of the adapter asked for on a llama-server replica, which
        selects adapters by number, not by name. A client's own `lora` is never passed
        on: it would reach adapters the caller may not see.
        """
        rename = model_name is not None and model_name != self.model
        add_usage = ask_usage and self.stream and not self.wants_usage
        set_priority = bool(priority) or "priority" in self.body
        set_lora = lora is not None or "lora" in self.body
        if not rename and not add_usage and not set_priority and not set_lora:
            return self.raw
        body = dict(self.body)
        if rename:
            body["model"] = model_name
        if add_usage:
            options = body.get("stream_options")
            body["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
        if priority:
            body["priority"] = priority
        else:
            body.pop("priority", None)
        if lora is not None:
            body["lora"] = [{"id": lora, "scale": lora_scale}]
        else:
            body.pop("lora", None)
        return orjson.dumps(body)


# Part types OpenAI defines whose text the gateway reads; every other type (images,
# audio, files, and engines' own such as vLLM's video_url) is forwarded unread, so only
# its shape (an object with a string `type`) is checked.
_TEXT_FIELDS = {"text": "text", "refusal": "refusal"}


def _content_text(content: Any, index: int, role: str) -> str:
    """The text of messages[index]'s content when it is not a plain string (an array
    of parts), refusing what the gateway would read wrongly, with the parameter's path.
    The path is built only for a refusal: this runs for every message of every request."""
    if isinstance(content, list):
        texts: list[str] = []
        for number, part in enumerate(content):
            if not isinstance(part, dict):
                where = f"messages[{index}].content[{number}]"
                raise BadRequest(f"{where} must be an object with a type", param=where)
            kind = part.get("type")
            if not isinstance(kind, str):
                where = f"messages[{index}].content[{number}].type"
                raise BadRequest(f'{where} must be a string such as "text"', param=where)
            field = _TEXT_FIELDS.get(kind)
            if field is None:
                continue
            text = part.get(field)
            if not isinstance(text, str):
                where = f"messages[{index}].content[{number}].{field}"
                raise BadRequest(f"{where} must be a string", param=where)
            if kind == "text":
                texts.append(text)
        return "".join(texts)
    if content is None and role == "assistant":
        return ""  # an assistant turn that only calls tools
    where = f"messages[{index}].content"
    raise BadRequest(f"{where} must be a string or an array of content parts", param=where)


def _check_tool_calls(calls: Any, where: str) -> None:
    """An assistant turn's tool calls: each a function with a name and its arguments as
    a JSON string (OpenAI's shape; an object there is a common client mistake)."""
    if not isinstance(calls, list):
        raise BadRequest(f"{where} must be an array of tool calls", param=where)
    for index, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise BadRequest(
                f"{where}[{index}].function must be an object", param=f"{where}[{index}].function"
            )
        if not isinstance(function.get("name"), str):
            raise BadRequest(
                f"{where}[{index}].function.name must be a string", param=f"{where}[{index}].function.name"
            )
        if not isinstance(function.get("arguments"), str):
            raise BadRequest(
                f"{where}[{index}].function.arguments must be a string of JSON",
                param=f"{where}[{index}].function.arguments",
            )


def _chat_prompt(body: dict[str, Any]) -> str:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages is required: a non-empty list of chat messages", param="messages")
    parts: list[str] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise BadRequest(f"messages[{index}] must be an object with a role", param=f"messages[{index}]")
        role = message.get("role")
        if not isinstance(role, str):
            raise BadRequest(
                f'messages[{index}].role must be a string such as "user"', param=f"messages[{index}].role"
            )
        content = message.get("content")
        parts.append(role)
        parts.append("\n")
        parts.append(content if type(content) is str else _content_text(content, index, role))
        parts.append("\n")
        if "tool_calls" in message and message["tool_calls"] is not None:
            _check_tool_calls(message["tool_calls"], f"messages[{index}].tool_calls")
    return "".join(parts)


def _token_ids(value: list[Any]) -> bool:
    """Whether `value` is a list of token ids (whole numbers, not booleans)."""
    return all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def _text_or_tokens(value: Any, field: str) -> str:
    """A completion's prompt or an embedding's input: a string, an array of strings, an
    array of token ids, or an array of such arrays. Returns the text the prefix tree
    keys on (none for token ids)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list) or not value:
        raise BadRequest(
            f"{field} is required: a string, an array of strings or an array of token ids", param=field
        )
    first = value[0]
    if isinstance(first, str):
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise BadRequest(
                    f"{field}[{index}] must be a string, like the items before it", param=f"{field}[{index}]"
                )
        return "\n".join(value)
    if isinstance(first, list):
        for index, item in enumerate(value):
            if not isinstance(item, list) or not item or not _token_ids(item):
                raise BadRequest(
                    f"{field}[{index}] must be a non-empty array of token ids (whole numbers)",
                    param=f"{field}[{index}]",
                )
        return ""
    if not _token_ids(value):
        raise BadRequest(
            f"{field} must be a string, an array of strings or an array of token ids (whole numbers)",
            param=field,
        )
    return ""  # token ids: nothing for the prefix tree to key on


def _max_tokens(body: dict[str, Any]) -> tuple[int | None, str]:
    """The output bound and the field it was given in (the newer name wins)."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BadRequest(f"{key} must be a whole number of at least 1", param=key)
        return value, key
    return None, "max_tokens"


def parse_request(kind: Kind, raw: bytes) -> ClientRequest:
    """Decodes a request body; refuses malformed JSON and missing fields with 400."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("model is required: name one of the models listed at /v1/models", param="model")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest("stream must be true or false", param="stream")
    if kind is Kind.CHAT:
        prompt = _chat_prompt(body)
    elif kind is Kind.COMPLETIONS:
        prompt = _text_or_tokens(body.get("prompt"), "prompt")
    else:
        prompt = _text_or_tokens(body.get("input"), "input")
        stream = False
    max_tokens, max_tokens_field = _max_tokens(body) if kind is not Kind.EMBEDDINGS else (None, "max_tokens")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise BadRequest(
            'stream_options must be an object such as {"include_usage": true}', param="stream_options"
        )
    wants_usage = bool(options and options.get("include_usage"))
    return ClientRequest(
        kind=kind,
        body=body,
        raw=raw,
        model=model,
        stream=stream,
        wants_usage=wants_usage,
        max_tokens=max_tokens,
        prompt=prompt,
        max_tokens_field=max_tokens_field,
    )
