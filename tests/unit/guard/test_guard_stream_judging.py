"""Judging a streamed answer: the judges see text before the client does, at bounded
points, and a block ends the stream without taking back what was released."""

from __future__ import annotations

import asyncio

import orjson

from llmgw.config.guard import Guard
from llmgw.guard import Guardrails, PolicySet
from llmgw.guard.stream import HOLD_CHARS, JUDGE_EVERY_CHARS, RELEASE_STEP_CHARS

GUARD = Guard.model_validate(
    {
        "default": "judged",
        "policies": [
            {
                "name": "judged",
                "checks": [{"type": "model", "model": "judge", "stage": "output", "action": "block"}],
            }
        ],
    }
)


class FakeJudge:
    """Answers in llamaguard3: unsafe once the answer it is shown holds BAD."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def ask(self, model: str, messages: list[dict[str, str]]) -> str:
        answer = messages[-1]["content"]
        self.seen.append(answer)
        return "unsafe\nS1" if "BAD" in answer else "safe"


def event(text: str | None, finish: str | None = None) -> bytes:
    delta = {} if text is None else {"content": text}
    body = {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(body) + b"\n\n"


def run(events: list[bytes]) -> tuple[bytes, FakeJudge]:
    """What a client receives: each event fed, then judged when due, as the pump does."""
    judge = FakeJudge()
    guard = Guardrails(PolicySet.from_settings(GUARD), {"judge": "llamaguard3"}, judge)
    scanner = guard.scanner(guard.applied())
    assert scanner is not None
    sent: list[bytes] = []

    async def pump() -> None:
        for e in events:
            out = scanner.feed(e)
            if scanner.judge_due():
                out = await guard.judge_stream(scanner, "the prompt") or out
            sent.append(out)
            if scanner.blocked is not None:
                return

    asyncio.run(pump())
    return b"".join(sent), judge


def contents(out: bytes) -> str:
    found = []
    for part in out.split(b"\n\n"):
        if part.startswith(b"data: {"):
            for choice in orjson.loads(part[6:]).get("choices", []):
                found.append(choice.get("delta", {}).get("content") or "")
    return "".join(found)


PIECE = "word " * 2  # 10 characters an event


def test_a_safe_stream_passes_whole_judged_at_bounded_points() -> None:
    pieces = [PIECE] * 300  # 3000 characters
    out, judge = run([*(event(p) for p in pieces), event(None, "stop"), b"data: [DONE]\n\n"])
    assert contents(out) == "".join(pieces)
    assert out.endswith(b"data: [DONE]\n\n")
    # First before any text went, then every JUDGE_EVERY_CHARS, then the end: bounded.
    assert len(judge.seen) <= 3000 // JUDGE_EVERY_CHARS + 2
    assert len(judge.seen[0]) >= HOLD_CHARS + RELEASE_STEP_CHARS
    assert judge.seen[-1] == "".join(pieces)


def test_no_text_reaches_the_client_before_the_first_judgement() -> None:
    out, judge = run([event("BAD " + PIECE * 20), event(None, "stop"), b"data: [DONE]\n\n"])
    assert contents(out) == ""
    assert b'"finish_reason":"content_filter"' in out
    assert b'"code":"content_filter"' in out
    assert b"[DONE]" not in out
    assert len(judge.seen) == 1


def test_a_block_later_ends_the_stream_and_keeps_what_was_released() -> None:
    safe = [PIECE] * 150  # 1500 characters, judged safe along the way
    late = [PIECE] * 10 + ["BAD " + PIECE]
    out, judge = run([*(event(p) for p in safe + late), event(None, "stop"), b"data: [DONE]\n\n"])
    released = contents(out)
    assert released  # the client had text before the block
    assert "".join(safe + late).startswith(released)
    assert "BAD" not in released
    assert out.rstrip().endswith(b'"code":"content_filter"}}')
    assert b'"finish_reason":"content_filter"' in out
    assert any("BAD" in seen for seen in judge.seen)
