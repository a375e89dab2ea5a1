"""The sim's answer table: the built-in suites' prompts answered right, or wrong with
--eval-wrong; any other prompt is not its business."""

from __future__ import annotations

from llmgw.evals.scorer import grade, score
from llmgw.evals.suite import BUILTIN_SUITES, load_suite
from llmgw.sim.eval_answers import eval_answer


def test_right_and_wrong_answers_score_1_and_0() -> None:
    for name in BUILTIN_SUITES:
        cases = load_suite(name, "").cases
        right = [grade(c, eval_answer(c.prompt(), wrong=False)) for c in cases]
        wrong = [grade(c, eval_answer(c.prompt(), wrong=True)) for c in cases]
        assert score(right).score == 1.0
        assert score(wrong).score == 0.0


def test_other_prompts_get_no_table_answer() -> None:
    assert eval_answer("hello", wrong=False) is None
    assert eval_answer("hello", wrong=True) is None
