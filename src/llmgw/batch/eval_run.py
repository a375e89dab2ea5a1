"""Running an evaluation suite against a model through the gateway's own request path.

Each case's messages go as a `POST /v1/chat/completions` for the model to
`GatewayApp.serve_as`, in process, as a batch's lines do (llmgw.batch.batch_capture):
the same resolution, routing, admission and usage as a client's request, with no key
to hold and no socket to open; an operator starts it from the admin API, behind its
token. Rubric cases then ask the judge model the same way. The answers are scored by
llmgw.evals.scorer, and the result kept per model in memory (`EvalResults`): the last
one is what `llmgw ctl explain` shows and what holds a canary candidate back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from llmgw.batch.batch_capture import Captured, LineHeaders, LineScope
from llmgw.evals.checks import judge_messages
from llmgw.evals.scorer import CaseOutcome, Score, grade, passing_score, score
from llmgw.evals.suite import Case, Rubric, Suite
from llmgw.http.rsgi import HTTPProtocol, Scope

EvalServe = Callable[[Scope, HTTPProtocol], Awaitable[None]]
"""The gateway's in-process path pinned to the model asked for: no canary split, no
fallback, so the score is the model's own (`GatewayApp.serve_as(..., pinned=True)`)."""

CHAT_PATH = "/v1/chat/completions"
ANSWER_MAX_TOKENS = 512
"""Room for an answer: the built-in suites' answers are a few tokens."""
DEFAULT_CONCURRENCY = 4


@dataclass(frozen=True, slots=True)
class EvalResult:
    model: str
    suite: str
    origin: str
    min_score: float
    score: Score
    seconds: float
    at: float
    """Unix seconds when it finished."""

    @property
    def passed(self) -> bool:
        return self.score.score >= self.min_score

    def as_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "suite": self.suite,
            "origin": self.origin,
            "min_score": self.min_score,
            "passed_gate": self.passed,
            "seconds": round(self.seconds, 3),
            "at": round(self.at, 3),
            **self.score.as_json(),
        }


def result_lines(result: dict[str, Any]) -> list[str]:
    """A result as `llmgw ctl eval` and `llmgw ctl explain` print it."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(result["at"]))
    verdict = "passes" if result["passed_gate"] else "fails"
    lines = [
        f"eval {result['suite']} on {result['model']} at {when}: score {result['score']:.2f} "
        f"({result['passed']}/{result['cases']} cases) {verdict} min_score {result['min_score']:g}, "
        f"in {result['seconds']:.1f}s"
    ]
    lines += [f"  failed {f['id']}: {f['reason']}" for f in result["failed"]]
    return lines


class EvalResults:
    """The last result of each model, this gateway's, in memory: a restart forgets them."""

    def __init__(self, on_result: Callable[[EvalResult], None] | None = None) -> None:
        self._last: dict[str, EvalResult] = {}
        self.on_result = on_result
        """Told of every result: the canaries hold back a candidate that failed."""

    def record(self, result: EvalResult) -> None:
        self._last[result.model] = result
        if self.on_result is not None:
            self.on_result(result)

    def last(self, model: str) -> EvalResult | None:
        return self._last.get(model)

    def all(self) -> list[EvalResult]:
        return list(self._last.values())


async def _ask(serve_as: EvalServe, model: str, messages: Any) -> tuple[str | None, str | None]:
    """The model's answer text, or None and why there is none."""
    body = orjson.dumps(
        {"model": model, "messages": messages, "max_tokens": ANSWER_MAX_TOKENS, "temperature": 0}
    )
    captured = Captured(body)
    scope = LineScope(CHAT_PATH, LineHeaders({"content-type": "application/json"}))
    await serve_as(scope, captured)
    status = captured.status or 500
    try:
        answer = orjson.loads(captured.answer)
    except orjson.JSONDecodeError:
        return None, f"{status}: the answer is not JSON"
    if status != 200:
        message = answer.get("error", {}).get("message", "") if isinstance(answer, dict) else ""
        return None, f"{status}: {message or 'refused'}"
    try:
        content = answer["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None, "the answer holds no message"
    return (content if isinstance(content, str) else ""), None


async def _case(serve_as: EvalServe, model: str, judge: str, case: Case) -> CaseOutcome:
    answer, error = await _ask(serve_as, model, list(case.messages))
    if answer is None or not isinstance(case.check, Rubric):
        return grade(case, answer, error)
    if not judge:
        return grade(case, answer, "no judge: set the model's eval.judge or the suite's judge")
    judged, why = await _ask(serve_as, judge, judge_messages(case.check, case, answer))
    return grade(case, answer, f"the judge {judge!r} answered {why}", judged)


async def run_suite(
    serve_as: EvalServe,
    model: str,
    suite: Suite,
    *,
    gate_min_score: float = 0,
    judge: str = "",
    concurrency: int = DEFAULT_CONCURRENCY,
    clock: Callable[[], float] = time.monotonic,
    wall_clock: Callable[[], float] = time.time,
) -> EvalResult:
    """Every case of `suite` asked of `model`, at most `concurrency` at once, scored."""
    slots = asyncio.Semaphore(max(1, concurrency))
    grader = judge or suite.judge

    async def one(case: Case) -> CaseOutcome:
        async with slots:
            return await _case(serve_as, model, grader, case)

    started = clock()
    outcomes = await asyncio.gather(*(one(case) for case in suite.cases))
    return EvalResult(
        model=model,
        suite=suite.name,
        origin=suite.origin,
        min_score=passing_score(gate_min_score, suite.min_score),
        score=score(outcomes),
        seconds=clock() - started,
        at=wall_clock(),
    )
