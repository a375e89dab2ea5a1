"""What an answer says about itself, as OpenTelemetry's GenAI attributes: the model that
answered, its token counts and finish reasons.

Read only for a request that is being traced, and then once: from a whole answer's
JSON, or from the last events of a stream (the finish reason comes in the last content
chunk, the usage in the chunk after it), never from every chunk as it passes. Pure
functions of bytes, so they are tested without a gateway.
"""

from __future__ import annotations

from typing import Any

import orjson

OPERATION = "gen_ai.operation.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
FINISH_REASONS = "gen_ai.response.finish_reasons"

Attributes = dict[str, str | int | tuple[str, ...]]


def from_answer(body: bytes) -> Attributes:
    """The attributes of a whole answer (a chat completion, a completion, embeddings);
    empty where the body is not such JSON."""
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    out: Attributes = {}
    if isinstance(decoded, dict):
        _read(decoded, out, [])
    return out


def from_stream_tail(tail: bytes) -> Attributes:
    """The attributes the last events of a stream carry: `tail` is its last bytes as
    the relay sent them (LF line endings), whose first event may be cut (it is
    skipped). Read from the end up to the last chunk with choices, which holds the
    finish reason: a few events (that chunk, the usage chunk, [DONE]), however long
    the stream."""
    out: Attributes = {}
    reasons: list[str] = []
    events = tail.split(b"\n\n")
    for event in reversed(events[1:] if len(events) > 1 else events):
        for line in event.split(b"\n"):
            payload = line[5:].strip() if line.startswith(b"data:") else b""
            if not payload.startswith(b"{"):
                continue
            try:
                decoded = orjson.loads(payload)
            except orjson.JSONDecodeError:
                continue
            if isinstance(decoded, dict) and _read(decoded, out, reasons):
                return out
    return out


def _read(decoded: dict[str, Any], out: Attributes, reasons: list[str]) -> bool:
    """Adds what `decoded` says to `out`; whether it had choices."""
    model, ident = decoded.get("model"), decoded.get("id")
    if isinstance(model, str) and model:
        out[RESPONSE_MODEL] = model
    if isinstance(ident, str) and ident:
        out[RESPONSE_ID] = ident
    usage = decoded.get("usage")
    if isinstance(usage, dict):
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int):
            out[INPUT_TOKENS] = prompt
        if isinstance(completion, int):
            out[OUTPUT_TOKENS] = completion
    choices = decoded.get("choices")
    if isinstance(choices, list):
        for choice in choices:
            reason = choice.get("finish_reason") if isinstance(choice, dict) else None
            if isinstance(reason, str) and reason not in reasons:
                reasons.append(reason)
    if reasons:
        out[FINISH_REASONS] = tuple(reasons)
    return isinstance(choices, list) and bool(choices)
