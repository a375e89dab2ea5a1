"""Planned answers: deterministic per seed, one token per piece, cut at stop strings."""

from __future__ import annotations

import pytest

from llmgw.sim.textgen import _VOCAB, plan_output, request_seed
from llmgw.sim.tokenizer import Tokenizer


def test_every_vocabulary_entry_is_exactly_one_token() -> None:
    assert all(Tokenizer.pieces(word) == [word] for word in _VOCAB)


def test_same_seed_same_answer_and_another_seed_another() -> None:
    a = plan_output(seed=7, max_tokens=40, finish_reason="length")
    b = plan_output(seed=7, max_tokens=40, finish_reason="length")
    c = plan_output(seed=8, max_tokens=40, finish_reason="length")
    assert a == b
    assert a.text != c.text


def test_the_answer_is_as_long_as_asked_and_retokenizes_to_its_count() -> None:
    plan = plan_output(seed=1, max_tokens=50, finish_reason="length")
    assert plan.tokens == 50
    assert plan.finish_reason == "length"
    assert Tokenizer(32000).count(plan.text) == 50


def test_request_seed_depends_on_engine_seed_request_seed_and_prompt() -> None:
    base = request_seed(0, None, [1, 2, 3])
    assert base == request_seed(0, None, [1, 2, 3])
    assert base != request_seed(1, None, [1, 2, 3])
    assert base != request_seed(0, 5, [1, 2, 3])
    assert base != request_seed(0, None, [1, 2, 4])


def _stop_inside(seed: int, tokens: int) -> tuple[str, int]:
    """A stop string spanning pieces 3 and 4 of a planned answer, and where it starts."""
    full = plan_output(seed=seed, max_tokens=tokens, finish_reason="length")
    first_three = "".join(full.deltas[:3])
    stop = full.deltas[2][-2:] + full.deltas[3][:3]
    return stop, len(first_three) - 2


def test_a_stop_string_ends_the_answer_before_it_with_reason_stop() -> None:
    stop, start = _stop_inside(seed=3, tokens=20)
    full = plan_output(seed=3, max_tokens=20, finish_reason="length").text
    plan = plan_output(seed=3, max_tokens=20, finish_reason="length", stop=[stop])
    assert plan.finish_reason == "stop"
    assert stop not in plan.text
    assert plan.text == full[: full.index(stop)]
    # The token that completed the stop string is counted, as engines count it.
    assert plan.tokens == 4
    assert start == full.index(stop)


def test_a_stop_string_that_never_occurs_changes_nothing() -> None:
    plan = plan_output(seed=3, max_tokens=10, finish_reason="stop", stop=["ZZZ", ""])
    assert plan == plan_output(seed=3, max_tokens=10, finish_reason="stop")


def test_max_tokens_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        plan_output(seed=0, max_tokens=0, finish_reason="length")
