"""Suites: the JSONL format, the built-in suites, control.eval_dir first, and a suite
that exists nowhere named in one sentence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmgw.evals.scorer import grade, score
from llmgw.evals.suite import (
    BUILTIN_SUITES,
    Exact,
    JsonSchema,
    SuiteError,
    load_suite,
    parse_suite,
    suite_exists,
)

CASE = {
    "id": "a",
    "messages": [{"role": "user", "content": "1+1?"}],
    "check": {"type": "exact", "value": "2"},
}


def _lines(*objects: object) -> str:
    return "".join(json.dumps(o) + "\n" for o in objects)


def test_the_built_in_suites_load_and_their_reference_answers_pass() -> None:
    arithmetic = load_suite("arithmetic", "")
    assert arithmetic.origin == "built-in"
    assert len(arithmetic.cases) == 20
    assert all(isinstance(c.check, Exact) for c in arithmetic.cases)
    assert arithmetic.min_score == 0.9
    formats = load_suite("json-format", "")
    assert all(isinstance(c.check, JsonSchema) for c in formats.cases)
    for name in BUILTIN_SUITES:
        suite = load_suite(name, "")
        assert score([grade(c, c.answer) for c in suite.cases]).score == 1.0
        assert score([grade(c, "wrong") for c in suite.cases]).score == 0.0


def test_a_header_line_gives_the_suites_own_score_and_judge() -> None:
    suite = parse_suite("s", _lines({"suite": {"min_score": 0.5, "judge": "grader"}}, CASE), "x.jsonl")
    assert (suite.min_score, suite.judge, len(suite.cases)) == (0.5, "grader", 1)


def test_the_eval_dir_comes_first_and_replaces_a_built_in(tmp_path: Path) -> None:
    (tmp_path / "arithmetic.jsonl").write_text(_lines(CASE))
    (tmp_path / "mine.jsonl").write_text(_lines(CASE))
    assert len(load_suite("arithmetic", str(tmp_path)).cases) == 1
    assert load_suite("mine", str(tmp_path)).origin == str(tmp_path / "mine.jsonl")
    assert suite_exists("mine", str(tmp_path))
    assert suite_exists("json-format", str(tmp_path))
    assert not suite_exists("mine", "")


def test_a_missing_suite_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(SuiteError) as raised:
        load_suite("nope", str(tmp_path))
    assert str(raised.value) == (
        f"eval suite 'nope' is neither {tmp_path}/nope.jsonl nor one llmgw carries (arithmetic, "
        "json-format): add the file to control.eval_dir or name a built-in suite"
    )
    with pytest.raises(SuiteError, match="not a plain name"):
        load_suite("../etc/passwd", str(tmp_path))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("not json\n", "line 1 is not JSON"),
        ("[1]\n", "line 1 is not a JSON object"),
        (_lines({**CASE, "check": {"type": "fuzzy"}}), "line 1: check"),
        (_lines({**CASE, "messages": []}), "line 1: messages"),
        (_lines(CASE, CASE), "line 2: case id 'a' is repeated"),
        ("\n", "has no cases"),
    ],
)
def test_a_bad_suite_names_its_line(text: str, problem: str) -> None:
    with pytest.raises(SuiteError, match=problem):
        parse_suite("s", text, "s.jsonl")
