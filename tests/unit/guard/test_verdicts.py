"""Judges' answers read in each format, and the sim's judge answers read back."""

from __future__ import annotations

import pytest

from llmgw.guard.verdicts import Unreadable, Verdict, counts, read_verdict
from llmgw.sim.echo import JUDGE_FORMATS, judge_answer


@pytest.mark.parametrize(
    ("fmt", "answer", "verdict"),
    [
        ("llamaguard3", "safe", Verdict(False)),
        ("llamaguard3", "\n\nunsafe\nS1,S10", Verdict(True, frozenset({"s1", "s10"}))),
        ("qwen3guard", "Safety: Safe\nCategories: None", Verdict(False)),
        (
            "qwen3guard",
            "Safety: Unsafe\nCategories: Violent, PII",
            Verdict(True, frozenset({"violent", "pii"})),
        ),
        (
            "qwen3guard",
            "Safety: Controversial\nCategories: Politically Sensitive Topics",
            Verdict(True, frozenset({"politically sensitive topics"})),
        ),
        ("shieldgemma", "No", Verdict(False)),
        ("shieldgemma", "Yes", Verdict(True)),
        ("shieldgemma", "Yes 0.31", Verdict(False)),
        ("shieldgemma", "No (0.87)", Verdict(True)),
        ("json", '{"safe": false, "categories": ["Hate"]}', Verdict(True, frozenset({"hate"}))),
    ],
)
def test_reads(fmt: str, answer: str, verdict: Verdict) -> None:
    assert read_verdict(fmt, answer) == verdict


@pytest.mark.parametrize("fmt", JUDGE_FORMATS)
def test_garbage_is_unreadable_in_every_format(fmt: str) -> None:
    with pytest.raises(Unreadable):
        read_verdict(fmt, judge_answer(fmt, "[[garbage]]"))


@pytest.mark.parametrize("fmt", JUDGE_FORMATS)
def test_sim_judge_answers_read_back(fmt: str) -> None:
    assert not read_verdict(fmt, judge_answer(fmt, "hello")).unsafe
    assert read_verdict(fmt, judge_answer(fmt, "x [[unsafe]] y")).unsafe


def test_categories_narrow_what_counts() -> None:
    verdict = read_verdict("llamaguard3", "unsafe\nS9")
    assert counts(verdict, frozenset())
    assert counts(verdict, frozenset({"s9", "s1"}))
    assert not counts(verdict, frozenset({"s1"}))
    assert not counts(Verdict(False), frozenset())
