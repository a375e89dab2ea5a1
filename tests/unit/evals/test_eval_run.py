"""The runner over a stand-in for the gateway's in-process path: each case asked of the
model, rubric cases graded by the judge, refusals counted as failed cases, the result
kept per model and passed to the gate."""

from __future__ import annotations

import asyncio
import json

import orjson

from llmgw.batch.eval_run import EvalResult, EvalResults, result_lines, run_suite
from llmgw.evals.suite import parse_suite
from llmgw.http.rsgi import HTTPProtocol, Scope

SUITE = parse_suite(
    "mixed",
    "".join(
        json.dumps(line) + "\n"
        for line in [
            {"suite": {"judge": "grader", "min_score": 0.5}},
            {
                "id": "sum",
                "messages": [{"role": "user", "content": "2+3"}],
                "check": {"type": "exact", "value": "5"},
            },
            {
                "id": "nice",
                "messages": [{"role": "user", "content": "be nice"}],
                "check": {"type": "rubric", "rubric": "kind"},
            },
            {
                "id": "down",
                "messages": [{"role": "user", "content": "fail"}],
                "check": {"type": "regex", "pattern": "."},
            },
        ]
    ),
    "test",
)


class Gateway:
    """Answers by model and prompt; records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    async def __call__(self, scope: Scope, proto: HTTPProtocol) -> None:
        assert scope.path == "/v1/chat/completions"
        body = orjson.loads(await proto())
        prompt = body["messages"][-1]["content"]
        self.asked.append((body["model"], prompt))
        if prompt == "fail":
            proto.response_bytes(503, [], orjson.dumps({"error": {"message": "no replica is ready"}}))
            return
        text = {"2+3": "5", "be nice": "You are great."}.get(prompt, "0.9")
        answer = {"choices": [{"message": {"role": "assistant", "content": text}}]}
        proto.response_bytes(200, [("content-type", "application/json")], orjson.dumps(answer))


def test_a_mixed_suite_through_the_runner() -> None:
    gateway = Gateway()
    result = asyncio.run(run_suite(gateway, "m", SUITE, concurrency=2, wall_clock=lambda: 0.0))
    assert result.score.score == 2 / 3
    assert [(f.id, f.reason) for f in result.score.failed] == [
        ("down", "no answer: 503: no replica is ready")
    ]
    judged = [prompt for model, prompt in gateway.asked if model == "grader"]
    assert len(judged) == 1
    assert "Answer: You are great." in judged[0]
    assert result.min_score == 0.5
    assert result.passed
    lines = result_lines(result.as_json())
    assert lines[0].startswith("eval mixed on m at 1970-01-01 00:00:00 UTC: score 0.67 (2/3 cases) passes")
    assert lines[1] == "  failed down: no answer: 503: no replica is ready"


def test_the_gates_judge_and_min_score_come_first() -> None:
    gateway = Gateway()
    result = asyncio.run(run_suite(gateway, "m", SUITE, gate_min_score=0.9, judge="other"))
    judges = {model for model, _ in gateway.asked if model != "m"}
    assert judges == {"other"}
    assert result.min_score == 0.9
    assert not result.passed


def test_results_are_kept_per_model_and_told() -> None:
    told: list[EvalResult] = []
    results = EvalResults(told.append)
    result = asyncio.run(run_suite(Gateway(), "m", SUITE))
    results.record(result)
    assert results.last("m") is result
    assert results.last("other") is None
    assert told == [result]
