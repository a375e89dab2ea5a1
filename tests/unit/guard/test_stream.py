"""The stream scanner: held back a bounded distance, never taking back what it released."""

from __future__ import annotations

import orjson

from llmgw.config.guard import GuardPolicy
from llmgw.guard import HOLD_CHARS, StreamScanner, compile_policy
from llmgw.guard.policy import Rule
from llmgw.guard.stream import RELEASE_STEP_CHARS


def rules(action: str) -> tuple[Rule, ...]:
    policy = GuardPolicy.model_validate(
        {"name": "p", "checks": [{"type": "secrets", "stage": "output", "action": action}]}
    )
    return compile_policy(policy).output


def event(text: str | None, finish: str | None = None, sep: bytes = b"\n\n") -> bytes:
    delta = {} if text is None else {"content": text}
    body = {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(body) + sep


def texts(out: bytes) -> list[str]:
    found = []
    for part in out.split(b"\n\n"):
        if part.startswith(b"data: {"):
            body = orjson.loads(part[6:])
            for choice in body.get("choices", []):
                found.append(choice.get("delta", {}).get("content") or "")
    return found


KEY = "sk-proj-" + "Q" * 30


def test_a_key_split_across_events_is_redacted_whole() -> None:
    scanner = StreamScanner(rules("redact"))
    out = b"".join(
        [
            scanner.feed(event("my key is " + KEY[:10])),
            scanner.feed(event(KEY[10:] + " ok")),
            scanner.feed(event(None, "stop")),
            scanner.feed(b"data: [DONE]\n\n"),
        ]
    )
    assert "".join(texts(out)) == "my key is [API_KEY] ok"
    assert out.endswith(b"data: [DONE]\n\n")


def test_text_is_held_back_at_most_hold_chars_and_a_step() -> None:
    scanner = StreamScanner(rules("redact"))
    assert scanner.feed(event("a" * (HOLD_CHARS + RELEASE_STEP_CHARS - 1))) == b""  # held whole: no event
    out = scanner.feed(event("a"))
    assert "".join(texts(out)) == "a" * RELEASE_STEP_CHARS


def test_block_after_release_ends_with_content_filter_and_error() -> None:
    scanner = StreamScanner(rules("block"))
    first = scanner.feed(event("b" * (HOLD_CHARS + RELEASE_STEP_CHARS)))
    assert "".join(texts(first)) == "b" * RELEASE_STEP_CHARS
    out = scanner.feed(event(" " + KEY) + event(" more"))
    assert scanner.blocked is not None
    assert b'"finish_reason":"content_filter"' in out
    assert b'"code":"content_filter"' in out
    assert KEY[:8].encode() not in out
    assert b"more" not in out
    assert scanner.feed(event("late")) == b""


def test_crlf_events_and_usage_events_pass() -> None:
    scanner = StreamScanner(rules("redact"))
    usage = b'data: {"choices":[],"usage":{"total_tokens":3}}\r\n\r\n'
    out = scanner.feed(event("hi", "stop", sep=b"\r\n\r\n") + usage)
    assert "".join(texts(out)) == "hi"
    assert b'"usage"' in out
