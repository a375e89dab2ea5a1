"""The dashboard history's reader against a stand-in Prometheus on loopback: the range
queries it sends (step and rate window from the window, the timeout), the series it
makes of the documented answer, and the "no history" answer with its reason when
Prometheus is not configured, not listening, hangs past the timeout, answers 500 or
answers something that is not JSON; never an exception."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from llmgw.config.observability import Monitoring
from llmgw.obs.history import PANELS, History, HistoryReader, NoHistory, Reason
from llmgw.testing.server import free_port
from support.prometheus import Mode, stand_in_prometheus

NOW = 1_800_000_000.0


def read(url: str, *, window: str = "1h", timeout: str = "5s") -> History | NoHistory:
    monitoring = Monitoring.model_validate({"prometheus": url, "window": window, "timeout": timeout})
    reader = HistoryReader(monitoring, clock=lambda: NOW)
    return asyncio.run(asyncio.wait_for(reader.read(), timeout=30))


def test_every_panel_is_asked_over_the_window_and_its_series_come_back() -> None:
    with stand_in_prometheus() as prometheus:
        answer = read(prometheus.url, window="6h")
    assert isinstance(answer, History)
    queries = [q for p in PANELS for q in p.queries]
    assert sorted(q["query"] for q in prometheus.queries) == sorted(q.expression(120) for q in queries)
    # 6h at a 2-minute step is 180 points; the rate window follows the step.
    assert {(q["start"], q["end"], q["step"]) for q in prometheus.queries} == {
        (f"{NOW - 6 * 3600:.3f}", f"{NOW:.3f}", "120s")
    }
    assert all("[120s]" in q["query"] for q in prometheus.queries if "rate(" in q["query"])
    assert [p.panel.key for p in answer.panels] == [p.key for p in PANELS]
    ttft = next(p for p in answer.panels if p.panel.key == "ttft")
    assert ttft.problem is None
    assert sorted((s.query, s.labels["model"]) for s in ttft.series) == [
        ("p50", "m"),
        ("p50", "other"),
        ("p95", "m"),
        ("p95", "other"),
    ]
    first = next(s for s in ttft.series if s.query == "p95" and s.labels["model"] == "m")
    expression = ttft.panel.queries[1].expression(120)
    start = NOW - 6 * 3600
    size = float(len(expression))
    assert first.points == ((start, size), (start + 120, size + 1), (start + 240, None))
    body = answer.as_json()
    assert body["available"] is True
    assert body["step_s"] == 120
    assert body["panels"][0]["series"][0]["points"][2] == [start + 240, None]


def test_not_configured_asks_nothing() -> None:
    answer = read("")
    assert answer == NoHistory("not_configured", answer.detail if isinstance(answer, NoHistory) else "")
    assert isinstance(answer, NoHistory)
    assert "monitoring.prometheus" in answer.detail


@pytest.mark.parametrize(
    ("mode", "reason", "words"),
    [
        (Mode.HANG, "timed_out", "within 0.3s (monitoring.timeout)"),
        (Mode.ERROR_500, "bad_answer", "status 500: storage is sick"),
        (Mode.NOT_JSON, "bad_answer", "is not JSON"),
    ],
)
def test_a_failing_prometheus_is_a_reason_not_an_exception(mode: Mode, reason: Reason, words: str) -> None:
    with stand_in_prometheus(mode) as prometheus:
        answer = read(prometheus.url, timeout="300ms")
    assert isinstance(answer, NoHistory), answer
    assert answer.reason == reason
    assert words in answer.detail
    assert answer.as_json() == {"available": False, "reason": reason, "detail": answer.detail}


def test_a_panel_whose_query_fails_says_why_and_the_others_are_charted() -> None:
    with stand_in_prometheus(Mode.REFUSE_QUANTILES) as prometheus:
        answer = read(prometheus.url)
    assert isinstance(answer, History)
    problems = {p.panel.key: p.problem for p in answer.panels if p.problem is not None}
    assert list(problems) == ["ttft"]
    assert problems["ttft"] == NoHistory(
        "bad_answer", "Prometheus answered the p50 query with status 400: no quantiles today"
    )
    assert all(p.series for p in answer.panels if p.panel.key != "ttft")
    assert answer.as_json()["panels"][2]["problem"]["reason"] == "bad_answer"


def test_nothing_listening_is_unreachable_and_names_no_credentials() -> None:
    answer = read(f"http://watcher:s3cret@127.0.0.1:{free_port()}")
    assert isinstance(answer, NoHistory)
    assert answer.reason == "unreachable"
    assert "127.0.0.1" in answer.detail
    assert "s3cret" not in answer.detail


def test_the_window_defaults_to_an_hour_at_a_15s_step() -> None:
    with stand_in_prometheus() as prometheus:
        answer = read(prometheus.url, window="0s")
    assert isinstance(answer, History)
    assert answer.range.step_s == 15
    assert answer.range.end - answer.range.start == timedelta(hours=1).total_seconds()
