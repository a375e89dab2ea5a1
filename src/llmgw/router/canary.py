"""The canaries of one gateway: which requests go to a candidate, what each side
served, and the automatic rollback.

For every catalog model with `canary: {model, percent}` a `Canary` holds the split in
force, the model's request count (the split's sequence) and the outcome window
(llmgw.router.canary_window). The request path asks `choose` once per request (one
dictionary lookup for a model without a canary) and the dispatcher reports each try's
outcome to `observed`, which judges the candidate right there: the split goes to 0
on the try that crosses a threshold, so only requests already sent to the candidate
can still reach it. The decision is logged, counted (`llmgw_canary_rollbacks_total`),
kept with its figures for `llmgw ctl explain` and the admin API, and sent as the
`canary.rolled_back` event.

A candidate whose last evaluation failed its gate (`eval_result`, told by the
admin API's eval runs, llmgw.batch.eval_run) gets nothing either, until an evaluation
passes: a reset does not lift that hold.

A rolled-back candidate gets nothing until an operator resets it (`reset`: the admin
API's `POST /api/router/canaries/<model>/reset`, `llmgw ctl model canary-reset`), which
also clears the window, so it is judged afresh. The state is this process's: each
gateway judges the traffic it serves, and a restarted gateway starts the canary again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from llmgw.catalog import Catalog
from llmgw.core.events import NO_EVENTS, EventSink
from llmgw.router.canary_split import to_candidate
from llmgw.router.canary_window import (
    CANDIDATE,
    DEFAULT_SPAN_S,
    MODEL,
    Limits,
    OutcomeWindow,
    SideFigures,
    Verdict,
)

log = logging.getLogger(__name__)

ROLLED_BACK_EVENT = "canary.rolled_back"


@dataclass(frozen=True, slots=True)
class Rollback:
    """A rollback as decided: when (unix seconds), why, and the figures."""

    at: float
    verdict: Verdict
    sequence: int
    """The candidate's requests in the window when it was decided."""

    def as_json(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "at": round(self.at, 3),
            "reason": v.reason,
            "why": v.sentence(),
            "model_side": v.model.as_json(),
            "candidate_side": v.candidate.as_json(),
            "limits": {
                "min_requests": v.limits.min_requests,
                "max_error_increase": v.limits.max_error_increase,
                "max_ttft_ratio": v.limits.max_ttft_ratio,
            },
        }


class Canary:
    """One model's canary: its configured split, the split in force, the window."""

    __slots__ = (
        "after_rollback",
        "candidate",
        "configured",
        "eval_hold",
        "limits",
        "model",
        "percent",
        "rollback",
        "sent",
        "sequence",
        "window",
    )

    def __init__(self, model: str, candidate: str, percent: int, limits: Limits, span_s: float) -> None:
        self.model = model
        self.candidate = candidate
        self.configured = percent
        self.percent = percent
        """The split in force: the configured one, or 0 once rolled back."""
        self.limits = limits
        self.window = OutcomeWindow(span_s)
        self.sequence = 0
        self.sent = 0
        """Requests sent to the candidate by the split since it started (or was reset)."""
        self.rollback: Rollback | None = None
        self.after_rollback = 0
        """Candidate tries that finished after the rollback (those already under way)."""
        self.eval_hold: str | None = None
        """Why the candidate's last evaluation failed its gate, while it holds it at 0."""

    def apply(self) -> None:
        """The split in force from the configured one, a rollback and an eval hold."""
        self.percent = 0 if self.rollback is not None or self.eval_hold is not None else self.configured


class Canaries:
    """Every canary of the catalog in force, by model and by candidate."""

    def __init__(
        self,
        catalog: Catalog,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        span_s: float = DEFAULT_SPAN_S,
    ) -> None:
        self._clock = clock
        self._wall_clock = wall_clock
        self._span_s = span_s
        self.events: EventSink = NO_EVENTS
        """Where `canary.rolled_back` goes: the server's webhook outbox, where it has one."""
        self.rollbacks: dict[tuple[str, str, str], int] = {}
        """(model, candidate, reason) → rollbacks, for llmgw_canary_rollbacks_total."""
        self._by_model: dict[str, Canary] = {}
        # Both names of each canary → (its canary, the side it is): one lookup per try.
        self._sides: dict[str, tuple[Canary, int]] = {}
        self._eval_holds: dict[str, str] = {}
        """Candidate model → why its last evaluation failed, across catalog changes."""
        self.replace(catalog)

    def replace(self, catalog: Catalog) -> None:
        """The catalog in force changed: canaries follow it. One whose model, candidate
        and percent are unchanged keeps its window and any rollback; a changed one
        starts afresh (a new percent, a new candidate is an operator's decision)."""
        kept: dict[str, Canary] = {}
        for model in catalog.models():
            spec = model.canary
            if spec is None or not spec.model:
                continue
            target = catalog.resolve(spec.model)
            if target is None:
                continue
            old = self._by_model.get(model.name)
            if old is not None and old.candidate == target.name and old.configured == spec.percent:
                kept[model.name] = old
                continue
            fresh = Canary(model.name, target.name, spec.percent, Limits(*spec.limits()), self._span_s)
            fresh.eval_hold = self._eval_holds.get(target.name)
            fresh.apply()
            kept[model.name] = fresh
        self._by_model = kept
        sides: dict[str, tuple[Canary, int]] = {}
        for canary in kept.values():
            sides[canary.model] = (canary, MODEL)
            sides[canary.candidate] = (canary, CANDIDATE)
        self._sides = sides

    def choose(self, model: str, session: str | None) -> str | None:
        """The candidate to send this request of `model` to, or None for the model."""
        canary = self._by_model.get(model)
        if canary is None or canary.percent <= 0:
            return None
        canary.sequence += 1
        if to_candidate(canary.percent, canary.sequence, session):
            canary.sent += 1
            return canary.candidate
        return None

    def observed(self, model: str, *, error: bool, ttft_s: float | None = None) -> None:
        """One try on `model`'s replicas finished; judged at once when it was the candidate's."""
        found = self._sides.get(model)
        if found is None:
            return
        canary, side = found
        now = self._clock()
        window = canary.window
        window.record(side, now, error, ttft_s)
        if side != CANDIDATE:
            return
        if canary.rollback is not None:
            canary.after_rollback += 1
            return
        verdict = window.judge(canary.limits, now)
        if verdict is not None:
            self._roll_back(canary, verdict)

    def _roll_back(self, canary: Canary, verdict: Verdict) -> None:
        canary.percent = 0
        decided = Rollback(self._wall_clock(), verdict, verdict.candidate.requests)
        canary.rollback = decided
        key = (canary.model, canary.candidate, verdict.reason)
        self.rollbacks[key] = self.rollbacks.get(key, 0) + 1
        log.warning(
            "canary of model %r: candidate %r rolled back, its split set to 0: %s; it gets no "
            "requests until `llmgw ctl model canary-reset %s`",
            canary.model,
            canary.candidate,
            verdict.sentence(),
            canary.model,
        )
        data = {"model": canary.model, "candidate": canary.candidate, "percent": canary.configured}
        data.update(decided.as_json())
        self.events.emit(ROLLED_BACK_EVENT, f"{canary.model}\n{canary.candidate}\n{decided.at}", data)

    def eval_result(self, model: str, passed: bool, why: str) -> None:
        """`model` was evaluated against its gate: a failure holds every canary whose
        candidate it is at 0 until an evaluation passes."""
        if passed:
            self._eval_holds.pop(model, None)
        else:
            self._eval_holds[model] = why
        for canary in self._by_model.values():
            if canary.candidate != model:
                continue
            canary.eval_hold = None if passed else why
            canary.apply()
            log.info(
                "canary of model %r: candidate %r %s its eval gate; split in force %d%%",
                canary.model,
                model,
                "passed" if passed else "failed",
                canary.percent,
            )

    def reset(self, model: str) -> dict[str, Any] | None:
        """An operator's word: the candidate gets its configured split again, judged
        afresh. None when `model` has no canary."""
        canary = self._by_model.get(model)
        if canary is None:
            return None
        canary.rollback = None
        canary.apply()
        canary.after_rollback = 0
        canary.sent = 0
        canary.window.clear()
        log.info("canary of model %r: candidate %r reset to %d%%", model, canary.candidate, canary.percent)
        return self.describe(model)

    def describe(self, model: str) -> dict[str, Any] | None:
        """The canary of `model` as the admin API shows it, or None."""
        canary = self._by_model.get(model)
        if canary is None:
            return None
        now = self._clock()
        limits = canary.limits
        return {
            "model": canary.model,
            "candidate": canary.candidate,
            "percent": canary.configured,
            "percent_in_force": canary.percent,
            "state": "rolled_back"
            if canary.rollback is not None
            else "eval_failed"
            if canary.eval_hold is not None
            else "running",
            "eval_hold": canary.eval_hold,
            "sent_to_candidate": canary.sent,
            "window_s": self._span_s,
            "limits": {
                "min_requests": limits.min_requests,
                "max_error_increase": limits.max_error_increase,
                "max_ttft_ratio": limits.max_ttft_ratio,
            },
            "model_side": canary.window.figures(MODEL, now).as_json(),
            "candidate_side": canary.window.figures(CANDIDATE, now).as_json(),
            "rollback": None if canary.rollback is None else canary.rollback.as_json(),
            "candidate_tries_after_rollback": canary.after_rollback,
        }

    def names(self) -> list[str]:
        """The models with a canary."""
        return list(self._by_model)

    def figures(self) -> Iterator[tuple[Canary, SideFigures, SideFigures]]:
        """Each canary with both sides' figures now, for the metrics."""
        now = self._clock()
        for canary in self._by_model.values():
            yield canary, canary.window.figures(MODEL, now), canary.window.figures(CANDIDATE, now)


def explain_lines(described: dict[str, Any]) -> list[str]:
    """`describe`'s answer in sentences, for `llmgw ctl explain`."""
    model, candidate = described["model"], described["candidate"]
    c, m = described["candidate_side"], described["model_side"]
    lines = [
        f"canary: {described['percent']}% of model {model}'s requests go to {candidate} "
        f"(in force now: {described['percent_in_force']}%)",
        f"canary window: {candidate} served {c['requests']} ({c['errors']} errors, mean TTFT "
        f"{_seconds(c['mean_ttft_s'])}); {model} served {m['requests']} ({m['errors']} errors, "
        f"mean TTFT {_seconds(m['mean_ttft_s'])})",
    ]
    rollback = described.get("rollback")
    if rollback is not None:
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(rollback["at"]))
        lines.append(f"canary rolled back at {when}: {rollback['why']}")
        lines.append(f"{candidate} gets no requests until `llmgw ctl model canary-reset {model}`")
    hold = described.get("eval_hold")
    if hold:
        lines.append(f"{candidate} failed its eval gate ({hold}): it gets no requests until an eval passes")
    return lines


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}s"
