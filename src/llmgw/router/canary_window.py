"""What a canary is judged on: both sides' outcomes over one sliding window, and the
judgement itself. Pure: the clock is passed in, nothing here reads one.

Each side (the model, its candidate) keeps the tries it served in the last `span_s`
seconds (at most `max_per_side` of them) with running sums, so recording one and
reading a side's figures are O(1) on the request path. A try is an error when the
replica failed it: a 5xx, a timeout, a connection refused or cut, a stream broken off;
never when the client was refused for its own request (a 4xx) or went away. TTFT is
the time from the try's start to the first byte of the answer (for a whole answer,
its head), measured the same way on both sides so the two are comparable.

`judge` decides from the two sides' figures: nothing until the candidate has served
`min_requests` in the window; then a rollback when its error rate is more than
`max_error_increase` above the model's, or its mean TTFT more than `max_ttft_ratio`
times the model's (that comparison once the model has a few TTFTs of its own).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Protocol

MODEL = 0
CANDIDATE = 1

DEFAULT_SPAN_S = 600.0
"""Ten minutes: long enough for a canary at a few percent to reach min_requests on a
quiet model, short enough that a candidate fixed in place is judged on its present."""
DEFAULT_MAX_PER_SIDE = 10_000
_MIN_MODEL_TTFTS = 10
"""The model's TTFTs needed before the ratio is taken: a mean of one or two is noise."""


class Counts(Protocol):
    """What `judge` reads of a side: `SideFigures`, or the window's live counts."""

    @property
    def requests(self) -> int: ...
    @property
    def errors(self) -> int: ...
    @property
    def ttft_samples(self) -> int: ...
    @property
    def ttft_sum_s(self) -> float: ...


@dataclass(frozen=True, slots=True)
class SideFigures:
    """One side's tries in the window."""

    requests: int = 0
    errors: int = 0
    ttft_samples: int = 0
    ttft_sum_s: float = 0.0

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0

    @property
    def mean_ttft_s(self) -> float | None:
        return self.ttft_sum_s / self.ttft_samples if self.ttft_samples else None

    def as_json(self) -> dict[str, object]:
        mean = self.mean_ttft_s
        return {
            "requests": self.requests,
            "errors": self.errors,
            "error_rate": round(self.error_rate, 6),
            "mean_ttft_s": None if mean is None else round(mean, 6),
        }


@dataclass(frozen=True, slots=True)
class Limits:
    """The catalog's rollback thresholds, defaults filled in (`Canary.limits`)."""

    min_requests: int
    max_error_increase: float
    max_ttft_ratio: float


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why a candidate is rolled back, with the figures that decided it."""

    reason: str
    """`error_rate` or `ttft`."""
    model: SideFigures
    candidate: SideFigures
    limits: Limits

    def sentence(self) -> str:
        """The decision in words, for the log and `llmgw ctl explain`."""
        m, c = self.model, self.candidate
        if self.reason == "error_rate":
            return (
                f"error rate {c.error_rate:.1%} over its {c.requests} requests against the model's "
                f"{m.error_rate:.1%} over {m.requests}, more than the {self.limits.max_error_increase:.1%} "
                "allowed above it (canary.max_error_increase)"
            )
        return (
            f"mean time to first token {c.mean_ttft_s or 0:.3f}s over its {c.ttft_samples} answers "
            f"against the model's {m.mean_ttft_s or 0:.3f}s over {m.ttft_samples}, more than "
            f"{self.limits.max_ttft_ratio:g} times it (canary.max_ttft_ratio)"
        )


def judge(model: Counts, candidate: Counts, limits: Limits) -> Verdict | None:
    """A rollback verdict, or None while the candidate is within its limits (or has not
    served `min_requests` yet). Plain arithmetic on the counts, nothing built unless it
    decides: it runs on every candidate try (bench/router/micro_canary.py)."""
    served = candidate.requests
    if served < limits.min_requests:
        return None
    seen = model.requests
    model_rate = model.errors / seen if seen else 0.0
    if candidate.errors / served - model_rate > limits.max_error_increase:
        return Verdict("error_rate", _snapshot(model), _snapshot(candidate), limits)
    base_n, mean_n = model.ttft_samples, candidate.ttft_samples
    if base_n >= min(_MIN_MODEL_TTFTS, limits.min_requests) and mean_n and model.ttft_sum_s > 0:
        base, mean = model.ttft_sum_s / base_n, candidate.ttft_sum_s / mean_n
        if mean > limits.max_ttft_ratio * base:
            return Verdict("ttft", _snapshot(model), _snapshot(candidate), limits)
    return None


def _snapshot(counts: Counts) -> SideFigures:
    return SideFigures(counts.requests, counts.errors, counts.ttft_samples, counts.ttft_sum_s)


class _Side:
    """One side's tries in the window and their running sums."""

    __slots__ = ("errors", "events", "requests", "ttft_samples", "ttft_sum_s")

    def __init__(self) -> None:
        # (when, error, ttft or -1 when the try had none)
        self.events: deque[tuple[float, bool, float]] = deque()
        self.requests = 0
        self.errors = 0
        self.ttft_samples = 0
        self.ttft_sum_s = 0.0

    def drop_oldest(self) -> None:
        _, error, ttft_s = self.events.popleft()
        self.requests -= 1
        if error:
            self.errors -= 1
        if ttft_s >= 0:
            self.ttft_samples -= 1
            self.ttft_sum_s -= ttft_s
        if not self.events:
            self.ttft_sum_s = 0.0  # no float drift survives an empty window

    def figures(self) -> SideFigures:
        return SideFigures(self.requests, self.errors, self.ttft_samples, self.ttft_sum_s)


class OutcomeWindow:
    """The model's and its candidate's tries over the last `span_s` seconds."""

    __slots__ = ("_max", "_sides", "_span_s")

    def __init__(self, span_s: float = DEFAULT_SPAN_S, max_per_side: int = DEFAULT_MAX_PER_SIDE) -> None:
        self._span_s = span_s
        self._max = max_per_side
        self._sides = (_Side(), _Side())

    def record(self, side: int, now: float, error: bool, ttft_s: float | None = None) -> None:
        """One try on `side` (MODEL or CANDIDATE) finished at `now`."""
        # Written out rather than a method of _Side: this runs on every try of a model with
        # a canary (bench/router/micro_canary.py).
        window = self._sides[side]
        events = window.events
        if ttft_s is None:
            events.append((now, error, -1.0))
        else:
            events.append((now, error, ttft_s))
            window.ttft_samples += 1
            window.ttft_sum_s += ttft_s
        window.requests += 1
        if error:
            window.errors += 1
        if events[0][0] < now - self._span_s or len(events) > self._max:
            self._expire(window, now)

    def figures(self, side: int, now: float) -> SideFigures:
        """`side`'s tries within the window at `now`."""
        window = self._sides[side]
        self._expire(window, now)
        return window.figures()

    def judge(self, limits: Limits, now: float) -> Verdict | None:
        """`judge` on both sides' live counts at `now`, just after the candidate's side
        recorded a try at `now`: nothing is copied on the way."""
        model, candidate = self._sides
        events = model.events
        if events and events[0][0] < now - self._span_s:
            self._expire(model, now)  # the candidate's side was brought up to date as it recorded
        return judge(model, candidate, limits)

    def clear(self) -> None:
        """Forgets both sides: a candidate reset by an operator starts afresh."""
        self._sides = (_Side(), _Side())

    def _expire(self, window: _Side, now: float) -> None:
        events, oldest = window.events, now - self._span_s
        while events and (events[0][0] < oldest or len(events) > self._max):
            window.drop_oldest()
