"""Answers that depend on the prompt's text, for testing what the gateway does to it:
`echo` repeats the last user message (or the prompt), and `judge` answers as a guard
model in one of the guard formats, deterministically.

The judge finds `[[unsafe]]` or `[[unsafe:CAT1,CAT2]]` in the text and answers unsafe
with those categories (its format's first category when none is given), `[[garbage]]`
and answers something no format reads, and otherwise answers safe.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from llmgw.sim.textgen import FinishReason, OutputPlan

JUDGE_FORMATS: tuple[str, ...] = ("llamaguard3", "qwen3guard", "shieldgemma", "json")
ECHO_PIECE_CHARS = 8
"""An echoed answer is released this many characters a token, so a long word spans
several stream events."""

_MARK = re.compile(r"\[\[unsafe(?::([^\]]{1,200}))?\]\]")
_GARBAGE = "[[garbage]]"
_DEFAULT_CATEGORY = {"llamaguard3": "S1", "qwen3guard": "Violent", "shieldgemma": "", "json": "violence"}


def last_user_text(messages: tuple[Any, ...]) -> str:
    """The text of the last user message (its text parts joined)."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "".join(
                    p.get("text", "")
                    for p in content
                    if isinstance(p, dict) and isinstance(p.get("text"), str)
                )
    return ""


def all_text(messages: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for message in messages:
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            parts.append(message["content"])
    return "\n".join(parts)


def echo_plan(text: str, budget: int, limited: bool) -> OutputPlan:
    """`text` in pieces of ECHO_PIECE_CHARS, at most `budget` of them."""
    pieces = [text[i : i + ECHO_PIECE_CHARS] for i in range(0, len(text), ECHO_PIECE_CHARS)] or [""]
    finish: FinishReason = "stop"
    if len(pieces) > budget:
        pieces = pieces[:budget]
        finish = "length" if limited else "stop"
    return OutputPlan(tuple(pieces), finish)


def judge_answer(fmt: str, text: str) -> str:
    """What a judge model of `fmt` answers about `text`."""
    if _GARBAGE in text:
        return "I am not sure what you mean."
    mark = _MARK.search(text)
    if mark is None:
        return {
            "llamaguard3": "safe",
            "qwen3guard": "Safety: Safe\nCategories: None",
            "shieldgemma": "No",
            "json": '{"safe": true, "categories": []}',
        }[fmt]
    given = [c.strip() for c in (mark.group(1) or "").split(",") if c.strip()]
    categories = given or [_DEFAULT_CATEGORY[fmt]]
    if fmt == "llamaguard3":
        return "unsafe\n" + ",".join(categories)
    if fmt == "qwen3guard":
        return "Safety: Unsafe\nCategories: " + ", ".join(categories)
    if fmt == "shieldgemma":
        return "Yes"
    return orjson.dumps({"safe": False, "categories": categories}).decode()


def judge_plan(fmt: str, text: str) -> OutputPlan:
    answer = judge_answer(fmt, text)
    return OutputPlan((answer,), "stop")
