"""Response bodies in vLLM's shapes: streamed chunks and whole answers.

A streamed token is one Server-Sent Event, `data: {json}\\n\\n`, ending with
`data: [DONE]\\n\\n`. vLLM's chat stream opens with a chunk carrying the assistant role
and empty content, sends one chunk per token, puts `finish_reason` on the chunk of the
last token, and, when `stream_options.include_usage` is set, gives every chunk
`"usage": null` and adds a last chunk with no choices and the usage. Text completion
chunks carry `text` instead of a delta.

Token chunks are the hot path of every benchmark, so each stream pre-encodes the bytes
around the token text once and joins three pieces per token instead of serializing a
dict; `tests/unit/sim/test_sim_chunks.py` proves the bytes equal the JSON of the dict.
"""

from __future__ import annotations

from typing import Any

import orjson

DONE = b"data: [DONE]\n\n"


def sse(payload: dict[str, Any]) -> bytes:
    """One event carrying `payload`."""
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int | None) -> dict[str, Any]:
    """vLLM's UsageInfo; `cached_tokens` is shown when prompt-token details are enabled."""
    out: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
    }
    out["prompt_tokens_details"] = None if cached_tokens is None else {"cached_tokens": cached_tokens}
    return out


class StreamChunks:
    """The events of one streamed answer (chat or text completion)."""

    def __init__(
        self, *, chat: bool, response_id: str, created: int, model: str, include_usage: bool
    ) -> None:
        self.chat = chat
        self._head = {
            "id": response_id,
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": created,
            "model": model,
        }
        self.include_usage = include_usage
        head = orjson.dumps(self._head)[:-1]  # the object without its closing brace
        field = b'"delta":{"content":' if chat else b'"text":'
        close = b"}" if chat else b""
        self._before = b"data: " + head + b',"choices":[{"index":0,' + field
        self._after = close + b',"logprobs":null,"finish_reason":'
        self._tail = b',"stop_reason":null}]' + (b',"usage":null' if include_usage else b"") + b"}\n\n"

    def token(self, text: str, finish_reason: str | None = None) -> bytes:
        """The event of one token's text (and the finish reason, on the last one)."""
        reason = b"null" if finish_reason is None else b'"' + finish_reason.encode() + b'"'
        return self._before + orjson.dumps(text) + self._after + reason + self._tail

    def token_payload(self, text: str, finish_reason: str | None = None) -> dict[str, Any]:
        """The dict `token()` serializes; the reference its bytes are tested against."""
        choice: dict[str, Any] = {"index": 0}
        if self.chat:
            choice["delta"] = {"content": text}
        else:
            choice["text"] = text
        choice.update({"logprobs": None, "finish_reason": finish_reason, "stop_reason": None})
        payload: dict[str, Any] = {**self._head, "choices": [choice]}
        if self.include_usage:
            payload["usage"] = None
        return payload

    def role(self) -> bytes:
        """The chat stream's opening event: the assistant role with empty content."""
        choice = {
            "index": 0,
            "delta": {"role": "assistant", "content": ""},
            "logprobs": None,
            "finish_reason": None,
        }
        payload: dict[str, Any] = {**self._head, "choices": [choice]}
        if self.include_usage:
            payload["usage"] = None
        return sse(payload)

    def usage(self, usage_info: dict[str, Any]) -> bytes:
        """The closing usage event (no choices)."""
        return sse({**self._head, "choices": [], "usage": usage_info})


def chat_response(
    *, response_id: str, created: int, model: str, text: str, finish_reason: str, usage_info: dict[str, Any]
) -> dict[str, Any]:
    """A whole chat completion."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text,
        "reasoning_content": None,
        "tool_calls": [],
    }
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": finish_reason,
        "stop_reason": None,
    }
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": usage_info,
        "prompt_logprobs": None,
    }


def completion_response(
    *, response_id: str, created: int, model: str, text: str, finish_reason: str, usage_info: dict[str, Any]
) -> dict[str, Any]:
    """A whole text completion."""
    choice = {
        "index": 0,
        "text": text,
        "logprobs": None,
        "finish_reason": finish_reason,
        "stop_reason": None,
        "prompt_logprobs": None,
    }
    return {
        "id": response_id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": usage_info,
    }
