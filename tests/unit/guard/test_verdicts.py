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


def test_the_judge_models_own_categories_narrow_what_counts() -> None:
    # models[].guard.categories: only verdicts in the judge's list count, whatever the check says.
    llama = read_verdict("llamaguard3", "unsafe\nS9,S10")
    assert counts(llama, frozenset(), frozenset({"s10"}), "llamaguard3")
    assert not counts(llama, frozenset(), frozenset({"s1", "s2"}), "llamaguard3")
    # Both lists narrow: a verdict must be in each.
    assert not counts(llama, frozenset({"s9"}), frozenset({"s10"}), "llamaguard3")
    assert counts(llama, frozenset({"s9"}), frozenset({"s9", "s10"}), "llamaguard3")
    qwen = read_verdict("qwen3guard", "Safety: Unsafe\nCategories: Violent, Jailbreak")
    assert counts(qwen, frozenset(), frozenset({"jailbreak"}), "qwen3guard")
    assert not counts(qwen, frozenset(), frozenset({"pii"}), "qwen3guard")
    assert not counts(Verdict(False), frozenset(), frozenset({"s1"}), "llamaguard3")
    # An unsafe verdict with no category is outside any list.
    assert not counts(read_verdict("json", '{"safe": false}'), frozenset(), frozenset({"x"}), "json")


def test_a_shieldgemma_yes_carries_the_policies_it_was_asked_about() -> None:
    yes = read_verdict("shieldgemma", "Yes")
    policies = frozenset({"no dangerous content", "no harassment"})
    assert counts(yes, frozenset(), policies, "shieldgemma")
    assert counts(yes, frozenset({"no harassment"}), policies, "shieldgemma")
    assert not counts(yes, frozenset({"no hate speech"}), policies, "shieldgemma")
    assert not counts(read_verdict("shieldgemma", "No"), frozenset(), policies, "shieldgemma")
