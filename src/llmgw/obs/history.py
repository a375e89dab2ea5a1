"""The dashboard's history, read back from the Prometheus that scrapes llmgw
(`monitoring.prometheus`): the range queries behind each chart, in one place.

llmgw publishes its series already; what a gauge cannot do is remember. Keeping a ring
buffer here would be a second copy with its own retention, lost on every restart and
disagreeing with the one an operator already has on screen, so the charts ask
Prometheus's HTTP API (`/api/v1/query_range`) for the last `monitoring.window`, each
query bounded by `monitoring.timeout`: somebody is waiting for a page, and a monitoring
system that is slow today is reported as such rather than waited for.

`HistoryReader.read` never raises for Prometheus's sake: the answer is either the
panels' series (a panel whose query failed says why) or `NoHistory` with its reason
(not configured, unreachable, timed out, a bad answer). The step is chosen from the
window (`plan_range`, pure), so a chart has a few hundred points whatever it covers.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from string import Template
from typing import Any, Literal

import aiohttp
import orjson
from yarl import URL

from llmgw.config.observability import Monitoring

Reason = Literal["not_configured", "unreachable", "timed_out", "bad_answer"]
Point = tuple[float, float | None]

# Steps a chart may take, in seconds: the first that keeps a window under MAX_POINTS.
STEPS_S: tuple[int, ...] = (15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
MAX_POINTS = 240
# A rate needs at least two scrapes inside its range; a minute holds four at the usual
# 15s scrape interval, and a range shorter than the step would skip samples between points.
MIN_RATE_WINDOW_S = 60
# Prometheus's answer for one query is a few hundred points per series; a body past this
# is not a chart's.
MAX_ANSWER_BYTES = 16 << 20
QUERY_RANGE_PATH = "/api/v1/query_range"


@dataclass(frozen=True)
class Query:
    """One PromQL range query; `$rate` stands for the rate window chosen with the step."""

    name: str
    promql: str

    def expression(self, rate_window_s: int) -> str:
        return Template(self.promql).substitute(rate=f"{rate_window_s}s")


@dataclass(frozen=True)
class Panel:
    key: str
    title: str
    unit: str
    queries: tuple[Query, ...]


_ERRORS = 'llmgw_requests_total{status=~"[45]..",status!="499"}'
_TTFT = "sum by (model, le) (rate(llmgw_time_to_first_token_seconds_bucket[$rate]))"

PANELS: tuple[Panel, ...] = (
    Panel(
        "requests",
        "Requests per second by model",
        "req/s",
        (Query("requests", "sum by (model) (rate(llmgw_requests_total[$rate]))"),),
    ),
    Panel(
        "error_rate",
        # 499 is a client that left, not a failure of the gateway's.
        "Share of answers that were errors (4xx and 5xx but 499), by model",
        "ratio",
        (
            Query(
                "error_rate",
                f"sum by (model) (rate({_ERRORS}[$rate]))"
                " / sum by (model) (rate(llmgw_requests_total[$rate]))",
            ),
        ),
    ),
    Panel(
        "ttft",
        "Time to first token by model, p50 and p95",
        "s",
        (
            Query("p50", f"histogram_quantile(0.5, {_TTFT})"),
            Query("p95", f"histogram_quantile(0.95, {_TTFT})"),
        ),
    ),
    Panel(
        "tokens",
        "Tokens per second by model and kind",
        "tokens/s",
        (Query("tokens", "sum by (model, kind) (rate(llmgw_tokens_total[$rate]))"),),
    ),
    Panel(
        "replicas_ready",
        # An endpoint is in routing while its breaker is closed on every gateway; several
        # gateways report the same endpoint, hence the max by endpoint before counting.
        "Replicas in routing (breaker closed)",
        "replicas",
        (Query("replicas_ready", "count(max by (endpoint) (llmgw_endpoint_breaker_open) == 0)"),),
    ),
    Panel(
        "queue",
        "Requests waiting for admission, by band",
        "requests",
        (Query("queue", "sum by (band) (llmgw_admission_queue_depth)"),),
    ),
)


@dataclass(frozen=True)
class NoHistory:
    """Why there is no history to show."""

    reason: Reason
    detail: str

    def as_json(self) -> dict[str, Any]:
        return {"available": False, "reason": self.reason, "detail": self.detail}


@dataclass(frozen=True)
class Series:
    """One labelled series of one query, its points as (unix seconds, value); a value
    that is not a number (a rate over no requests) is None."""

    query: str
    labels: Mapping[str, str]
    points: tuple[Point, ...]

    def as_json(self) -> dict[str, Any]:
        return {"query": self.query, "labels": dict(self.labels), "points": [list(p) for p in self.points]}


@dataclass(frozen=True)
class PanelHistory:
    panel: Panel
    series: tuple[Series, ...]
    problem: NoHistory | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.panel.key,
            "title": self.panel.title,
            "unit": self.panel.unit,
            "series": [s.as_json() for s in self.series],
            "problem": None
            if self.problem is None
            else {"reason": self.problem.reason, "detail": self.problem.detail},
        }


@dataclass(frozen=True)
class Range:
    """What a chart covers: unix seconds, the step between points and the rate window."""

    start: float
    end: float
    step_s: int
    rate_window_s: int


@dataclass(frozen=True)
class History:
    range: Range
    panels: tuple[PanelHistory, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "available": True,
            "start": self.range.start,
            "end": self.range.end,
            "step_s": self.range.step_s,
            "panels": [p.as_json() for p in self.panels],
        }


def step_for(window_s: float) -> int:
    """The smallest step that keeps `window_s` under MAX_POINTS points (the largest
    step for a window longer than that allows)."""
    for step in STEPS_S:
        if window_s / step <= MAX_POINTS:
            return step
    return STEPS_S[-1]


def plan_range(now: float, window_s: float) -> Range:
    """The range ending `now` and covering `window_s`."""
    step = step_for(window_s)
    return Range(now - window_s, now, step, max(step, MIN_RATE_WINDOW_S))


def _value(raw: object) -> float | None:
    if not isinstance(raw, str):
        raise TypeError
    value = float(raw)  # Prometheus sends numbers as strings, NaN and ±Inf included
    return value if math.isfinite(value) else None


def parse_matrix(payload: object, query: str) -> tuple[Series, ...] | NoHistory:
    """Prometheus's query_range answer (`{"status": "success", "data": {"resultType":
    "matrix", "result": [{"metric": {...}, "values": [[t, "v"], ...]}]}}`) as series,
    or why it is not one."""
    if not isinstance(payload, dict):
        return NoHistory("bad_answer", "Prometheus answered something that is not a JSON object")
    if payload.get("status") != "success":
        error = payload.get("error") or "no error given"
        return NoHistory("bad_answer", f"Prometheus refused the {query} query: {error}")
    data = payload.get("data")
    if (
        not isinstance(data, dict)
        or data.get("resultType") != "matrix"
        or not isinstance(data.get("result"), list)
    ):
        return NoHistory("bad_answer", f"Prometheus's answer to the {query} query is not a matrix")
    series = []
    try:
        for item in data["result"]:
            labels = item["metric"]
            if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
                raise TypeError
            points = tuple((float(t), _value(v)) for t, v in item["values"])
            series.append(Series(query, labels, points))
    except (KeyError, TypeError, ValueError):
        return NoHistory(
            "bad_answer", f"Prometheus's answer to the {query} query has a series of another shape"
        )
    return tuple(series)


def _problem_json(text: bytes) -> str:
    """Prometheus's own error text from an error answer, when it sent one."""
    try:
        payload = orjson.loads(text)
    except orjson.JSONDecodeError:
        return ""
    error = payload.get("error") if isinstance(payload, dict) else None
    return f": {error}" if isinstance(error, str) else ""


class HistoryReader:
    """The dashboard's charts from `monitoring`; `clock` gives unix seconds."""

    def __init__(self, monitoring: Monitoring, clock: Callable[[], float] = time.time) -> None:
        self._base = monitoring.prometheus.rstrip("/")
        self._window_s = monitoring.effective_window.total_seconds()
        self._timeout_s = monitoring.effective_timeout.total_seconds()
        self._clock = clock
        # Named without any user and password the URL may carry, for messages.
        self._where = str(URL(self._base).with_user(None)) if self._base else ""

    async def read(self, panels: tuple[Panel, ...] = PANELS) -> History | NoHistory:
        """Every panel's series over the window, or why there are none."""
        if not self._base:
            return NoHistory(
                "not_configured",
                "monitoring.prometheus is empty: set it to the Prometheus that scrapes llmgw, like "
                "http://prometheus:9090",
            )
        span = plan_range(self._clock(), self._window_s)
        async with aiohttp.ClientSession() as session:
            answers = await asyncio.gather(
                *(asyncio.gather(*(self._query(session, q, span) for q in p.queries)) for p in panels)
            )
        out = []
        for panel, results in zip(panels, answers, strict=True):
            problem = next((r for r in results if isinstance(r, NoHistory)), None)
            series = tuple(s for r in results if not isinstance(r, NoHistory) for s in r)
            out.append(PanelHistory(panel, series, problem))
        failed = [p.problem for p in out if p.problem is not None]
        if failed and len(failed) == len(out):
            return failed[0]  # nothing to chart: say why once
        return History(span, tuple(out))

    async def _query(
        self, session: aiohttp.ClientSession, query: Query, span: Range
    ) -> tuple[Series, ...] | NoHistory:
        params = {
            "query": query.expression(span.rate_window_s),
            "start": f"{span.start:.3f}",
            "end": f"{span.end:.3f}",
            "step": f"{span.step_s}s",
        }
        try:
            async with asyncio.timeout(self._timeout_s):
                async with session.get(self._base + QUERY_RANGE_PATH, params=params) as answer:
                    body = await _read_capped(answer.content, MAX_ANSWER_BYTES)
                    status = answer.status
        except TimeoutError:
            return NoHistory(
                "timed_out",
                f"Prometheus at {self._where} did not answer the {query.name} query within "
                f"{self._timeout_s:g}s (monitoring.timeout)",
            )
        except _TooLarge:
            return NoHistory(
                "bad_answer",
                f"Prometheus's answer to the {query.name} query is over {MAX_ANSWER_BYTES} bytes",
            )
        except (aiohttp.ClientError, OSError) as exc:
            why = getattr(getattr(exc, "os_error", None), "strerror", None) or type(exc).__name__
            return NoHistory("unreachable", f"Prometheus at {self._where} cannot be reached: {why}")
        if status != 200:
            return NoHistory(
                "bad_answer",
                f"Prometheus answered the {query.name} query with status {status}{_problem_json(body)}",
            )
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            return NoHistory("bad_answer", f"Prometheus's answer to the {query.name} query is not JSON")
        return parse_matrix(payload, query.name)


class _TooLarge(Exception):
    """An answer body past its bound (never leaves this module)."""


async def _read_capped(content: aiohttp.StreamReader, cap: int) -> bytes:
    chunks, size = [], 0
    async for chunk in content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > cap:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)
