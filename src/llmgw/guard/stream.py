"""Scanning a streamed answer: text held back a bounded distance, released once no
match can still reach it, never taken back.

The relay hands over whole events; each event's JSON is decoded, its choices' text
(`delta.content` of chat, `text` of completions) is added to that choice's pending
text, and everything but the last `HOLD_CHARS` characters is released (redacted where
a rule says so) in the event's place. A match that straddles the release point holds
back from its start, so a secret split across events is still seen whole. When a
choice finishes (its `finish_reason`, or `[DONE]`), what it holds is released.

A block ends the stream: a chunk with `finish_reason: "content_filter"` and an error
event in OpenAI's shape, and nothing after them. What was released before stays
released: the client has it.

An event whose text is held back entirely, and that carries nothing else, is not
sent: it costs a decode and no encode.

Judges (`model` rules on the output stage) are asked about the answer so far (the
prompt, and all the text generated, held back or not) at bounded points: before the
first text is released, then each time `JUDGE_EVERY_CHARS` more were generated, and at
the end before the last held-back text goes. The caller (the dispatcher's pump) asks
`judge_due()` after each `feed` and, when due, awaits the judges before sending what
`feed` returned; a block drops that and ends the stream as above (`block`). So no text
reaches the client that a judge has not seen, save what arrives between two points
(at most `JUDGE_EVERY_CHARS`), and nothing released is taken back. A stream costs at
most len / JUDGE_EVERY_CHARS + 2 judge round trips, each pausing it.

Limits: a match longer than `HOLD_CHARS` (a whole PEM private key) is caught by its
start only when it straddles the release point; the header alone is matched then.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from llmgw.guard.detectors import Finding
from llmgw.guard.inspect_text import BLOCK, REDACT, Hit, findings_for, redact
from llmgw.guard.policy import Rule

HOLD_CHARS = 128
"""How far back text is held: past the longest stretch a pattern needs to see before it
matches at all (an e-mail's 64-character local part and its domain), so a match that
begins before the release point has matched by then, and holds the release back."""
RELEASE_STEP_CHARS = 32
"""Text is released (and so scanned) once this much more than HOLD_CHARS is pending:
a scan per few tokens rather than per token."""
JUDGE_EVERY_CHARS = 1024
"""A stream's judges are asked again once this many more characters were generated
(about 256 tokens): a round trip per a few seconds of generation, not per token."""

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_LINE = re.compile(rb"\r\n|\n|\r")


def _data_of(event: bytes) -> bytes | None:
    """The event's data field (lines joined by LF), None when it has none."""
    if event.startswith(b"data: ") and b"\n" not in event and b"\r" not in event:
        return event[6:]  # the usual event: one data line
    data: list[bytes] = []
    for line in _LINE.split(event):
        if line.startswith(b"data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(b" ") else value)
    return b"\n".join(data) if data else None


def split_events(chunk: bytes) -> list[bytes]:
    """Whole events (without their blank line) of what the relay released."""
    parts = chunk.split(b"\n\n") if b"\r" not in chunk else _EVENT_END.split(chunk)
    return [e for e in parts if e.strip()]


def _event(body: Any) -> bytes:
    return b"data: " + orjson.dumps(body) + b"\n\n"


def blocked_events(template: dict[str, Any], index: int, hit: Hit) -> bytes:
    """The end of a stream a rule blocked after its first byte."""
    chunk = {**template, "choices": [{"index": index, "delta": {}, "finish_reason": "content_filter"}]}
    if template.get("object") == "text_completion":
        chunk["choices"] = [{"index": index, "text": "", "finish_reason": "content_filter"}]
    error = {
        "error": {
            "message": f"the answer was stopped by guard policy {hit.policy!r} (check {hit.check})",
            "type": "invalid_request_error",
            "param": None,
            "code": "content_filter",
        }
    }
    return _event(chunk) + _event(error)


@dataclass(slots=True)
class StreamScanner:
    """One stream's scanning state (made per streamed request with output rules)."""

    rules: tuple[Rule, ...]
    judges: tuple[Rule, ...] = ()
    """The output stage's `model` rules, asked at the points `judge_due` says."""
    hits: list[Hit] = field(default_factory=list)
    blocked: Hit | None = None
    _pending: dict[int, str] = field(default_factory=dict)
    _template: dict[str, Any] = field(default_factory=dict)
    _answer: dict[int, list[str]] = field(default_factory=dict)
    """Each choice's text as generated (kept only when there are judges)."""
    _generated: int = 0
    _judged: int = -1
    """How much of the generated text the judges have seen (-1: not asked yet)."""
    _released: bool = False
    _open: set[int] = field(default_factory=set)
    _finished: bool = False

    def judge_due(self) -> bool:
        """Whether the judges are to be asked before what `feed` returned is sent: text is
        about to be released for the first time, JUDGE_EVERY_CHARS more were generated
        since they were last asked, or the answer ended with text they have not seen."""
        if not self.judges or self.blocked is not None or self._generated <= self._judged:
            return False
        if self._finished:
            return True
        if self._judged < 0:
            return self._released
        return self._generated - self._judged >= JUDGE_EVERY_CHARS

    def answer_text(self) -> str:
        """The answer generated so far (every choice's), for the judges; marks it seen."""
        self._judged = self._generated
        return "\n\n".join("".join(self._answer[i]) for i in sorted(self._answer))

    def judged(self, hits: tuple[Hit, ...], blocked: Hit | None) -> bytes:
        """Takes the judges' outcome: their hits noted; on a block, returns the closing
        events to send instead of what `feed` returned, and sets `blocked`."""
        for hit in hits:
            self._note(hit)
        if blocked is None:
            return b""
        self.blocked = blocked
        return blocked_events(self._template, min(self._answer, default=0), blocked)

    def feed(self, chunk: bytes) -> bytes:
        """Rewrites whole events; after a block, returns the closing events and sets
        `blocked` (the caller sends them and ends the stream)."""
        if not chunk or self.blocked is not None:
            return b""
        out: list[bytes] = []
        for event in split_events(chunk):
            data = _data_of(event)
            if data is None:
                out.append(event + b"\n\n")
                continue
            if data == b"[DONE]":
                self._finished = True
                rest = self._release_all()
                if self.blocked is not None:
                    out.append(rest)
                    break
                out.append(rest)
                out.append(b"data: [DONE]\n\n")
                continue
            rewritten = self._one(data)
            if rewritten is None:
                out.append(event + b"\n\n")
            elif rewritten:
                out.append(rewritten)
            if self.blocked is not None:
                break
        return b"".join(out)

    def _one(self, data: bytes) -> bytes | None:
        """The event rewritten; None to pass it as it is; b"" to leave it out."""
        try:
            body = orjson.loads(data)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(body, dict):
            return None
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices:
            return None
        if not self._template:
            self._template = {k: v for k, v in body.items() if k not in ("choices", "usage")}
        omit = len(choices) == 1 and len(body) <= len(self._template) + 1
        for choice in choices:
            if not isinstance(choice, dict):
                omit = False
                continue
            index = choice.get("index", 0)
            holder, key = _text_place(choice)
            text = holder.get(key) if holder is not None else None
            if self.judges and isinstance(text, str):
                self._answer.setdefault(index, []).append(text)
                self._generated += len(text)
            pending = self._pending.get(index, "") + (text if isinstance(text, str) else "")
            final = choice.get("finish_reason") is not None
            if final:
                self._open.discard(index)
                self._finished = not self._open
            else:
                self._open.add(index)
            if not final and len(pending) < HOLD_CHARS + RELEASE_STEP_CHARS:
                self._pending[index] = pending
                released = ""
            else:
                released = self._release(index, pending, final)
            if self.blocked is not None:
                return blocked_events(self._template, index, self.blocked)
            if holder is not None and (isinstance(text, str) or released):
                holder[key] = released
            if released:
                self._released = True
            if omit and not _only_held_text(choice, released, final):
                omit = False
        return b"" if omit else _event(body)

    def _release(self, index: int, pending: str, final: bool) -> str:
        """What of `pending` may go now (redacted); keeps the rest for later."""
        found = findings_for(pending, self.rules) if pending else []
        cuts: list[Finding] = []
        for rule, findings in found:
            hit = Hit(rule.policy, rule.check, rule.action)
            if rule.action == BLOCK:
                self.blocked = hit
                self._note(hit)
                return ""
            self._note(hit)
            if rule.action == REDACT:
                cuts.extend(findings)
        point = len(pending) if final else max(0, len(pending) - HOLD_CHARS)
        for f in cuts:
            if f.start < point < f.end:
                point = f.start
        self._pending[index] = pending[point:]
        head = [f for f in cuts if f.end <= point]
        return redact(pending[:point], head) if head else pending[:point]

    def _release_all(self) -> bytes:
        """At [DONE]: whatever a choice still holds, in an event of its own."""
        out: list[bytes] = []
        for index, pending in list(self._pending.items()):
            if not pending:
                continue
            released = self._release(index, pending, True)
            if self.blocked is not None:
                return blocked_events(self._template, index, self.blocked)
            self._released = True
            place = "text" if self._template.get("object") == "text_completion" else "delta"
            choice: dict[str, Any] = {"index": index, "finish_reason": None}
            if place == "text":
                choice["text"] = released
            else:
                choice["delta"] = {"content": released}
            out.append(_event({**self._template, "choices": [choice]}))
        return b"".join(out)

    def _note(self, hit: Hit) -> None:
        if hit not in self.hits:
            self.hits.append(hit)


def _only_held_text(choice: dict[str, Any], released: str, final: bool) -> bool:
    """Whether the choice, its text held back, has nothing else to say (no event needed)."""
    if released or final or choice.get("logprobs") is not None:
        return False
    delta = choice.get("delta")
    if isinstance(delta, dict):
        # index, delta, and finish_reason and logprobs (both null) at most.
        return len(delta) <= 1 and len(choice) <= 4
    return all(k in _TEXT_CHOICE_KEYS for k in choice)


_TEXT_CHOICE_KEYS = frozenset({"index", "text", "finish_reason", "logprobs"})


def _text_place(choice: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    delta = choice.get("delta")
    if isinstance(delta, dict):
        return delta, "content"
    if "text" in choice:
        return choice, "text"
    return None, ""
