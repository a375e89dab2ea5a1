"""Each check on one answer: passes, or fails with a reason naming what was wrong."""

from __future__ import annotations

from typing import Any

import pytest

from llmgw.evals.checks import check_answer, judge_messages, read_grade, rubric_verdict
from llmgw.evals.suite import Case, Rubric


def _case(check: dict[str, Any]) -> Case:
    return Case.model_validate({"id": "c", "messages": [{"role": "user", "content": "q?"}], "check": check})


@pytest.mark.parametrize(
    ("check", "answer", "reason"),
    [
        ({"type": "exact", "value": "5"}, " 5\n", None),
        ({"type": "exact", "value": "5"}, "5.", "expected '5', got '5.'"),
        ({"type": "exact", "value": "5"}, "The answer is 5", "expected '5', got 'The answer is 5'"),
        ({"type": "regex", "pattern": "(?i)hello"}, "Well, HELLO there", None),
        ({"type": "regex", "pattern": "^\\d+$"}, "five", "'five' does not match /^\\d+$/"),
        ({"type": "regex", "pattern": "("}, "x", "the case's pattern '(' is not a regular expression"),
    ],
)
def test_exact_and_regex(check: dict[str, Any], answer: str, reason: str | None) -> None:
    found = check_answer(_case(check), answer)
    if reason is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(reason)


PERSON = {
    "type": "json_schema",
    "schema": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    },
}


def test_json_schema_passes_valid_json_fenced_or_not() -> None:
    assert check_answer(_case(PERSON), '{"name": "Ada", "age": 36}') is None
    assert check_answer(_case(PERSON), '```json\n{"name": "Ada", "age": 36}\n```') is None


def test_json_schema_names_what_is_wrong() -> None:
    assert check_answer(_case(PERSON), "Ada, 36") == "'Ada, 36' is not JSON"
    wrong_type = check_answer(_case(PERSON), '{"name": "Ada", "age": "36"}')
    assert wrong_type == "JSON does not match the schema at age: '36' is not of type 'integer'"
    missing = check_answer(_case(PERSON), '{"name": "Ada"}')
    assert missing == "JSON does not match the schema at the answer: 'age' is a required property"


def test_a_long_answer_is_cut_short_in_the_reason() -> None:
    reason = check_answer(_case({"type": "exact", "value": "1"}), "word " * 100)
    assert reason is not None
    assert len(reason) < 120
    assert reason.endswith("…'")


def test_a_rubric_is_not_checked_without_a_judge() -> None:
    with pytest.raises(TypeError, match="graded by a judge"):
        check_answer(_case({"type": "rubric", "rubric": "polite"}), "hi")


@pytest.mark.parametrize(
    ("judged", "grade"),
    [("0.8", 0.8), ("Score: 1", 1.0), ("0", 0.0), ("7", None), ("good", None), ("-1", None)],
)
def test_the_judges_grade_is_its_first_number_from_0_to_1(judged: str, grade: float | None) -> None:
    assert read_grade(judged) == grade


def test_a_rubric_passes_at_its_pass_score() -> None:
    rubric = Rubric(type="rubric", rubric="polite", pass_score=0.7)
    assert rubric_verdict(rubric, "0.7") is None
    assert rubric_verdict(rubric, "0.6") == "the judge graded it 0.6, under the case's pass_score 0.7"
    assert rubric_verdict(rubric, "no idea") == "the judge's answer 'no idea' holds no score from 0 to 1"


def test_the_judge_is_sent_the_rubric_the_question_and_the_answer() -> None:
    case = _case({"type": "rubric", "rubric": "Declines politely"})
    assert isinstance(case.check, Rubric)
    messages = judge_messages(case.check, case, "No, thank you.")
    assert messages[0]["role"] == "system"
    assert "Rubric: Declines politely" in messages[1]["content"]
    assert "Question: q?" in messages[1]["content"]
    assert "Answer: No, thank you." in messages[1]["content"]
