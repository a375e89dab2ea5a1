"""Whether a model is meeting its latency objective lately (`slo` in the catalog).

The usage accountant reports each finished request's time to first token and time
per output token; the tracker keeps the recent ones per model (a bounded window) and
says whether the p99 of either is past the model's objective. Admission holds the
bands below the top one back while it is, so the requests that matter most keep
their latency when there is not enough for everyone.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from llmgw.router.admission import p99

# How many recent requests the p99 is taken over, and how old they may be.
_WINDOW = 500
_MAX_AGE_SECONDS = 60.0
# The verdict is recomputed at most this often: sorting a window per request would cost.
_RECHECK_SECONDS = 0.5


@dataclass(frozen=True, slots=True)
class Objective:
    """A model's SLO in seconds; 0 is no objective on that measure."""

    ttft_p99: float
    tpot_p99: float


class SloTracker:
    """Recent latencies per model, against their objectives."""

    def __init__(self, objectives: dict[str, Objective]) -> None:
        self._objectives: dict[str, Objective] = {}
        self._ttft: dict[str, deque[tuple[float, float]]] = {}
        self._tpot: dict[str, deque[tuple[float, float]]] = {}
        self._verdicts: dict[str, tuple[float, bool]] = {}
        self.replace(objectives)

    def replace(self, objectives: dict[str, Objective]) -> None:
        """New objectives (a runtime catalog change); what was observed is kept, and each
        model's verdict is worked out again on the next look."""
        self._objectives = {m: o for m, o in objectives.items() if o.ttft_p99 > 0 or o.tpot_p99 > 0}
        self._verdicts.clear()

    @property
    def objectives(self) -> dict[str, Objective]:
        """The models with an objective, by name (do not modify)."""
        return self._objectives

    def observe(self, model: str, now: float, ttft: float | None, tpot: float | None) -> None:
        if model not in self._objectives:
            return
        if ttft is not None:
            self._ttft.setdefault(model, deque(maxlen=_WINDOW)).append((now, ttft))
        if tpot is not None:
            self._tpot.setdefault(model, deque(maxlen=_WINDOW)).append((now, tpot))

    def breached(self, model: str, now: float) -> bool:
        """Whether the recent p99 of either measure is past the model's objective."""
        objective = self._objectives.get(model)
        if objective is None:
            return False
        cached = self._verdicts.get(model)
        if cached is not None and now - cached[0] < _RECHECK_SECONDS:
            return cached[1]
        verdict = self._past(self._ttft.get(model), objective.ttft_p99, now) or self._past(
            self._tpot.get(model), objective.tpot_p99, now
        )
        self._verdicts[model] = (now, verdict)
        return verdict

    @staticmethod
    def _past(window: deque[tuple[float, float]] | None, bound: float, now: float) -> bool:
        if bound <= 0 or not window:
            return False
        recent = [value for at, value in window if now - at <= _MAX_AGE_SECONDS]
        return bool(recent) and p99(recent) > bound
