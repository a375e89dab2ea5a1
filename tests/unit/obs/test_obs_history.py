"""The dashboard history's pure parts: the step and rate window chosen from the window,
and Prometheus's query_range answer read into series or refused with the reason."""

from __future__ import annotations

from typing import Any

import pytest

from llmgw.obs.history import MAX_POINTS, PANELS, NoHistory, Series, parse_matrix, plan_range, step_for


@pytest.mark.parametrize(
    ("window_s", "step_s"),
    [(60, 15), (3600, 15), (3601, 30), (6 * 3600, 120), (24 * 3600, 600), (7 * 86400, 3600), (10**9, 86400)],
)
def test_the_step_keeps_a_chart_to_a_few_hundred_points(window_s: int, step_s: int) -> None:
    assert step_for(window_s) == step_s
    if window_s < 10**9:
        assert window_s / step_s <= MAX_POINTS


def test_a_range_ends_now_and_rates_cover_at_least_a_minute() -> None:
    short = plan_range(1000.0, 3600)
    assert (short.start, short.end, short.step_s, short.rate_window_s) == (-2600.0, 1000.0, 15, 60)
    long = plan_range(1000.0, 86400)
    assert long.rate_window_s == long.step_s == 600


def test_every_rate_takes_the_window_it_is_given() -> None:
    for panel in PANELS:
        for query in panel.queries:
            expression = query.expression(90)
            assert "$" not in expression
            assert expression.count("rate(") == expression.count("[90s]))")


def _answer(result: Any, **top: Any) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "matrix", "result": result}, **top}


def test_a_matrix_becomes_series_and_a_value_that_is_no_number_none() -> None:
    payload = _answer([{"metric": {"band": "gold"}, "values": [[10, "1.5"], [25.5, "+Inf"], [40, "NaN"]]}])
    assert parse_matrix(payload, "queue") == (
        Series("queue", {"band": "gold"}, ((10.0, 1.5), (25.5, None), (40.0, None))),
    )
    assert parse_matrix(_answer([]), "queue") == ()


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ([], "not a JSON object"),
        ({"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}, "at char 3"),
        ({"status": "success", "data": {"resultType": "vector", "result": []}}, "not a matrix"),
        (_answer([{"metric": {"model": "m"}}]), "another shape"),
        (_answer([{"metric": {"model": "m"}, "values": [[1, 2]]}]), "another shape"),
        (_answer([{"metric": {"model": 3}, "values": []}]), "another shape"),
        (_answer([{"metric": {}, "values": [[1, "x"]]}]), "another shape"),
    ],
)
def test_an_answer_of_another_shape_is_a_bad_answer(payload: object, words: str) -> None:
    answer = parse_matrix(payload, "queue")
    assert isinstance(answer, NoHistory)
    assert answer.reason == "bad_answer"
    assert words in answer.detail
