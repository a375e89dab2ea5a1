"""Where the text of a request or an answer is in its JSON, and rewriting it there.

A slot is a container and a key whose value is a string the guard inspects: chat
messages' text (a string or the `text` parts), tool calls' arguments, completions'
prompt, embeddings' input; in an answer, each choice's message content and tool call
arguments, or its `text`.
"""

from __future__ import annotations

from typing import Any

Slot = tuple[Any, Any]


def _content(holder: dict[str, Any], out: list[Slot]) -> None:
    content = holder.get("content")
    if isinstance(content, str):
        out.append((holder, "content"))
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append((part, "text"))
    calls = holder.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                out.append((function, "arguments"))


def _strings(holder: dict[str, Any], key: str, out: list[Slot]) -> None:
    value = holder.get(key)
    if isinstance(value, str):
        out.append((holder, key))
    elif isinstance(value, list):
        out.extend((value, i) for i, item in enumerate(value) if isinstance(item, str))


def request_slots(kind: str, body: dict[str, Any]) -> list[Slot]:
    """The texts of a request (`kind` chat, completions or embeddings)."""
    out: list[Slot] = []
    if kind == "chat":
        messages = body.get("messages")
        if isinstance(messages, list):
            for message in messages:
                if isinstance(message, dict):
                    _content(message, out)
    elif kind == "completions":
        _strings(body, "prompt", out)
    else:
        _strings(body, "input", out)
    return out


def answer_slots(body: dict[str, Any]) -> list[Slot]:
    """The texts of a non-streamed answer (chat or completions)."""
    out: list[Slot] = []
    choices = body.get("choices")
    if isinstance(choices, list):
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            message = choice.get("message")
            if isinstance(message, dict):
                _content(message, out)
            elif isinstance(choice.get("text"), str):
                out.append((choice, "text"))
    return out
