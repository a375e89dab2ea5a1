"""Reading a judge model's answer in its format: safe or not, and the categories.

An answer the format cannot read is `Unreadable`, never a guess: the check's
`on_error` decides what happens to the text then.

- llamaguard3: `safe`, or `unsafe` and on the next line the codes (`S1,S10`);
- qwen3guard: `Safety: Safe|Unsafe|Controversial`, then `Categories: Violent, ...`
  (Controversial counts as unsafe: the operator narrows with `categories`);
- shieldgemma: `Yes` (the text violates the policy) or `No`, optionally with the
  probability of Yes (`Yes 0.92`), which counts as unsafe from 0.5;
- json: `{"safe": false, "categories": ["..."]}`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson


@dataclass(frozen=True, slots=True)
class Verdict:
    unsafe: bool
    categories: frozenset[str] = frozenset()


class Unreadable(ValueError):
    """The answer is not in the judge's format."""


_LLAMA_CODE = re.compile(r"S(?:1[0-4]|[1-9])(?![0-9])")
_QWEN_SAFETY = re.compile(r"Safety:\s*(Safe|Unsafe|Controversial)\b", re.IGNORECASE)
_QWEN_CATEGORIES = re.compile(r"Categories:\s*([^\n]*)", re.IGNORECASE)
_GEMMA = re.compile(r"\s*(Yes|No)\b(?:[\s:(]*([01](?:\.\d+)?))?", re.IGNORECASE)


def _llamaguard3(answer: str) -> Verdict:
    lines = [line.strip() for line in answer.strip().splitlines() if line.strip()]
    if not lines:
        raise Unreadable("an empty answer")
    head = lines[0].lower()
    if head == "safe":
        return Verdict(False)
    if head != "unsafe":
        raise Unreadable(f"the first line is neither safe nor unsafe: {lines[0][:40]!r}")
    codes = frozenset(_LLAMA_CODE.findall(lines[1])) if len(lines) > 1 else frozenset()
    return Verdict(True, frozenset(c.lower() for c in codes))


def _qwen3guard(answer: str) -> Verdict:
    safety = _QWEN_SAFETY.search(answer)
    if safety is None:
        raise Unreadable("no 'Safety:' line")
    level = safety.group(1).lower()
    found = _QWEN_CATEGORIES.search(answer)
    names = found.group(1).split(",") if found else []
    categories = frozenset(n.strip().lower() for n in names if n.strip() and n.strip().lower() != "none")
    return Verdict(level != "safe", categories)


def _shieldgemma(answer: str) -> Verdict:
    match = _GEMMA.match(answer)
    if match is None:
        raise Unreadable("neither Yes nor No")
    if match.group(2) is not None:
        return Verdict(float(match.group(2)) >= 0.5)
    return Verdict(match.group(1).lower() == "yes")


def _json(answer: str) -> Verdict:
    try:
        body = orjson.loads(answer)
    except orjson.JSONDecodeError as exc:
        raise Unreadable("not JSON") from exc
    if not isinstance(body, dict) or not isinstance(body.get("safe"), bool):
        raise Unreadable("no boolean 'safe'")
    categories = body.get("categories") or []
    if not isinstance(categories, list):
        raise Unreadable("'categories' is not a list")
    return Verdict(not body["safe"], frozenset(str(c).lower() for c in categories))


_READERS = {
    "llamaguard3": _llamaguard3,
    "qwen3guard": _qwen3guard,
    "shieldgemma": _shieldgemma,
    "json": _json,
}


def read_verdict(fmt: str, answer: str) -> Verdict:
    """The judge's verdict; raises Unreadable when `answer` is not in `fmt`."""
    reader = _READERS.get(fmt)
    if reader is None:
        raise Unreadable(f"format {fmt!r} is not known")
    return reader(answer)


def counts(
    verdict: Verdict, categories: frozenset[str], judged: frozenset[str] = frozenset(), fmt: str = ""
) -> bool:
    """Whether the verdict is a hit: unsafe with a category among the judge model's own
    (`judged`, its catalog entry's `guard.categories`) that is also among the check's
    `categories`; an empty list narrows nothing. All lowercase.

    A ShieldGemma answer names no category: its Yes is about the policies the model is
    configured with, so it carries those (and a check can narrow to one of them)."""
    if not verdict.unsafe:
        return False
    found = verdict.categories
    if fmt == "shieldgemma" and not found:
        found = judged
    if judged:
        found = found & judged  # the others do not count, for any check
        if not found:
            return False
    return not categories or bool(found & categories)
