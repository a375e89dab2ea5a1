"""A suite's score from its cases' outcomes: pure, no I/O.

Each case ends as a `CaseOutcome`: passed, or failed with a reason (a wrong answer,
or no answer at all: the model's error counts as a failed case, not as a missing
one, so a model that answers nothing scores 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llmgw.evals.checks import check_answer, rubric_verdict
from llmgw.evals.suite import DEFAULT_MIN_SCORE, Case, Rubric


@dataclass(frozen=True, slots=True)
class CaseOutcome:
    id: str
    reason: str | None
    """None when the case passed."""

    @property
    def passed(self) -> bool:
        return self.reason is None


@dataclass(frozen=True, slots=True)
class Score:
    score: float
    """Fraction of cases passed, 0 to 1."""
    cases: int
    failed: tuple[CaseOutcome, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "score": round(self.score, 4),
            "cases": self.cases,
            "passed": self.cases - len(self.failed),
            "failed": [{"id": f.id, "reason": f.reason} for f in self.failed],
        }


def grade(case: Case, answer: str | None, error: str | None = None, judged: str | None = None) -> CaseOutcome:
    """One case's outcome: `answer` the model's text (None with `error` when it gave
    none); `judged` the judge's answer for a rubric case."""
    if answer is None:
        return CaseOutcome(case.id, f"no answer: {error or 'the request failed'}")
    if isinstance(case.check, Rubric):
        if judged is None:
            return CaseOutcome(case.id, f"no grade: {error or 'the judge gave none'}")
        return CaseOutcome(case.id, rubric_verdict(case.check, judged))
    return CaseOutcome(case.id, check_answer(case, answer))


def score(outcomes: Sequence[CaseOutcome]) -> Score:
    """The fraction passed and the failures, in the cases' order."""
    failed = tuple(o for o in outcomes if not o.passed)
    total = len(outcomes)
    return Score((total - len(failed)) / total if total else 0.0, total, failed)


def passing_score(gate_min: float, suite_min: float) -> float:
    """The score to pass at: the gate's, else the suite's, else DEFAULT_MIN_SCORE."""
    return gate_min if gate_min > 0 else suite_min if suite_min > 0 else DEFAULT_MIN_SCORE
