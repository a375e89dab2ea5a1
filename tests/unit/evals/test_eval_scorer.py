"""The score: the fraction of cases passed, failures in order with their reasons; no
answer is a failed case; rubric cases pass by the judge's grade."""

from __future__ import annotations

from llmgw.evals.scorer import grade, passing_score, score
from llmgw.evals.suite import Case


def _case(cid: str, check: dict[str, object]) -> Case:
    return Case.model_validate({"id": cid, "messages": [{"role": "user", "content": "q"}], "check": check})


ADD = _case("add", {"type": "exact", "value": "5"})
POLITE = _case("polite", {"type": "rubric", "rubric": "polite"})


def test_fraction_passed_and_failures_in_order() -> None:
    cases = [_case(f"c{i}", {"type": "exact", "value": str(i)}) for i in range(4)]
    answers = ["0", "x", "2", "y"]
    result = score([grade(c, a) for c, a in zip(cases, answers, strict=True)])
    assert result.score == 0.5
    assert result.cases == 4
    assert [(f.id, f.reason) for f in result.failed] == [
        ("c1", "expected '1', got 'x'"),
        ("c3", "expected '3', got 'y'"),
    ]
    assert result.as_json()["passed"] == 2


def test_no_answer_is_a_failed_case_with_the_error() -> None:
    outcome = grade(ADD, None, "503: no replica of model 'm' is ready")
    assert outcome.reason == "no answer: 503: no replica of model 'm' is ready"
    assert score([outcome]).score == 0.0


def test_rubric_cases_pass_by_the_judges_grade() -> None:
    assert grade(POLITE, "Thanks!", judged="0.9").passed
    assert grade(POLITE, "Go away", judged="0.1").reason == (
        "the judge graded it 0.1, under the case's pass_score 0.5"
    )
    assert grade(POLITE, "Thanks!", "no judge: set one").reason == "no grade: no judge: set one"


def test_an_empty_suite_scores_zero() -> None:
    assert score([]).score == 0.0


def test_the_passing_score_is_the_gates_else_the_suites_else_1() -> None:
    assert passing_score(0.7, 0.9) == 0.7
    assert passing_score(0, 0.9) == 0.9
    assert passing_score(0, 0) == 1.0
