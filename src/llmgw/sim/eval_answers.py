"""The sim's answers to the evaluation suites llmgw carries, for testing eval gates.

A chat request whose last user message is a built-in suite case's prompt is answered
with the case's reference answer, so `llmgw ctl eval MODEL --suite arithmetic` passes
against a sim; started with `--eval-wrong`, the sim answers every such prompt wrongly
(a sum one too high, JSON that is not JSON), so the same suite fails every case. Other
prompts are answered as before.
"""

from __future__ import annotations

from functools import cache

from llmgw.evals.suite import BUILTIN_SUITES, load_suite

WRONG_JSON = "I cannot answer in JSON."


@cache
def answer_table() -> dict[str, str]:
    """Prompt → reference answer, over every built-in suite."""
    table: dict[str, str] = {}
    for name in BUILTIN_SUITES:
        for case in load_suite(name, "").cases:
            if case.answer:
                table[case.prompt()] = case.answer
    return table


def eval_answer(prompt: str, wrong: bool) -> str | None:
    """The answer to a built-in suite's prompt, right or wrong; None for any other prompt."""
    right = answer_table().get(prompt)
    if right is None or not wrong:
        return right
    return str(int(right) + 1) if right.lstrip("-").isdigit() else WRONG_JSON
