"""Asking judge models: one round trip per `model` rule, all of a stage's at once,
bounded by each rule's timeout; a judge that fails follows the rule's `on_error`.

The gateway supplies the `Judge` (an internal request through its own routing to the
judge model's replicas); this module only decides what the answers mean.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from llmgw.guard.counts import CLEAN, ERROR, HIT, GuardCounts
from llmgw.guard.inspect_text import BLOCK, Hit
from llmgw.guard.policy import Rule
from llmgw.guard.verdicts import counts, read_verdict

log = logging.getLogger(__name__)


class Judge(Protocol):
    """Sends chat messages to a judge model and returns its answer's text."""

    async def ask(self, model: str, messages: list[dict[str, str]]) -> str: ...


@dataclass(frozen=True, slots=True)
class JudgeOutcome:
    hits: tuple[Hit, ...]
    blocked: Hit | None


async def _one(
    judge: Judge,
    fmt: str,
    judged: frozenset[str],
    rule: Rule,
    messages: list[dict[str, str]],
    stage: str,
    tally: GuardCounts,
    clock: Callable[[], float],
) -> Hit | None:
    started = clock()
    try:
        answer = await asyncio.wait_for(judge.ask(rule.judge, messages), rule.timeout_s)
        verdict = read_verdict(fmt, answer)
    except Exception as exc:
        why = "did not answer in time" if isinstance(exc, TimeoutError) else f"failed: {exc}"
        log.warning(
            "guard judge %s for policy %s %s; on_error %s", rule.judge, rule.policy, why, rule.on_error
        )
        tally.add(rule.policy, rule.check, stage, rule.action, ERROR)
        if rule.on_error == BLOCK:
            return Hit(rule.policy, rule.check, BLOCK)
        return None
    finally:
        tally.judged(rule.judge, clock() - started)
    if counts(verdict, rule.categories, judged, fmt):
        tally.add(rule.policy, rule.check, stage, rule.action, HIT)
        return Hit(rule.policy, rule.check, rule.action)
    tally.add(rule.policy, rule.check, stage, rule.action, CLEAN)
    return None


async def judge_all(
    judge: Judge,
    formats: Mapping[str, str],
    rules: tuple[Rule, ...],
    messages: list[dict[str, str]],
    stage: str,
    tally: GuardCounts,
    clock: Callable[[], float] = time.monotonic,
    narrowed: Mapping[str, frozenset[str]] | None = None,
) -> JudgeOutcome:
    """Every judge rule of a stage on `messages`, concurrently. `narrowed`: each judge
    model's own categories (the catalog's `guard.categories`, lowercase)."""
    own = narrowed or {}
    results = await asyncio.gather(
        *(
            _one(
                judge,
                formats.get(r.judge, ""),
                own.get(r.judge, frozenset()),
                r,
                messages,
                stage,
                tally,
                clock,
            )
            for r in rules
        )
    )
    hits = tuple(h for h in results if h is not None)
    blocked = next((h for h in hits if h.action == BLOCK), None)
    return JudgeOutcome(hits, blocked)
