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

    @property
    def prompt_token_floor(self) -> int:
        """A number of prompt tokens the prompt is certainly not under."""
        return len(self.prompt) // CHARS_PER_TOKEN_CEILING

    def body_for(
        self, model_name: str | None, *, ask_usage: bool, priority: int | None = None, lora: int | None = None
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
            body["lora"] = [{"id": lora, "scale": 1.0}]
        else:
            body.pop("lora", None)
        return orjson.dumps(body)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def _chat_prompt(body: dict[str, Any]) -> str:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages is required: a non-empty list of chat messages", param="messages")
    parts: list[str] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest(f"messages[{index}] needs a role and content", param=f"messages[{index}]")
        parts.append(message["role"])
        parts.append("\n")
        parts.append(_text_of(message.get("content")))
        parts.append("\n")
    return "".join(parts)


def _completion_prompt(body: dict[str, Any]) -> str:
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        return "\n".join(prompt)
    if isinstance(prompt, list) and prompt:
        return ""  # token ids: nothing for the prefix tree to key on
    raise BadRequest("prompt is required: a string or a list of strings", param="prompt")


def _embedding_input(body: dict[str, Any]) -> str:
    value = body.get("input")
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value:
        return "\n".join(v for v in value if isinstance(v, str))
    raise BadRequest("input is required: a string or a list of strings", param="input")


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
        prompt = _completion_prompt(body)
    else:
        prompt = _embedding_input(body)
        stream = False
    max_tokens, max_tokens_field = _max_tokens(body) if kind is not Kind.EMBEDDINGS else (None, "max_tokens")
    options = body.get("stream_options")
    wants_usage = bool(isinstance(options, dict) and options.get("include_usage"))
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
