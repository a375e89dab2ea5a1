"""The sim's echo and judge answers: deterministic, made from the request's text."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from llmgw.sim.echo import echo_plan, judge_answer, last_user_text
from llmgw.sim.options import SimOptions


def test_echo_is_the_text_in_pieces_cut_at_the_budget() -> None:
    plan = echo_plan("abcdefghijklmnopq", 10, limited=False)
    assert plan.deltas == ("abcdefgh", "ijklmnop", "q")
    assert plan.finish_reason == "stop"
    cut = echo_plan("abcdefghijklmnopq", 2, limited=True)
    assert cut.text == "abcdefghijklmnop"
    assert cut.finish_reason == "length"


def test_last_user_text_reads_parts() -> None:
    messages = (
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "reply"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    )
    assert last_user_text(messages) == "ab"


def test_judge_answers_with_the_marked_categories() -> None:
    assert judge_answer("llamaguard3", "x [[unsafe:S2,S9]]") == "unsafe\nS2,S9"
    assert judge_answer("qwen3guard", "[[unsafe]]") == "Safety: Unsafe\nCategories: Violent"
    assert judge_answer("shieldgemma", "fine") == "No"


def test_an_unknown_judge_format_is_refused() -> None:
    with pytest.raises(ValidationError, match="is not a guard format"):
        SimOptions(judge="llama")
