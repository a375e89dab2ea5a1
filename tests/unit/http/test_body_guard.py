"""The body deadline and the body memory budget (llmgw.http.body_guard), and the
path decoding that leaves an encoded slash alone (llmgw.http.http1_exchange)."""

from __future__ import annotations

from llmgw.http.body_guard import SMALL_BODY_BYTES, BodyBudget, BodyRules, body_overdue
from llmgw.http.http1_exchange import decode_path


def test_a_body_has_its_timeout_plus_a_second_per_min_rate_bytes() -> None:
    rules = BodyRules(timeout_s=10.0, min_rate=1000)
    assert not body_overdue(rules, since=100.0, received=0, now=110.0)
    assert body_overdue(rules, since=100.0, received=0, now=110.5)
    # 5,000 bytes in: five seconds more.
    assert not body_overdue(rules, since=100.0, received=5000, now=115.0)
    assert body_overdue(rules, since=100.0, received=5000, now=115.5)


def test_a_client_at_the_minimum_rate_is_never_cut_off() -> None:
    rules = BodyRules(timeout_s=1.0, min_rate=100)
    assert not any(body_overdue(rules, 0.0, 100 * t, float(t)) for t in range(0, 10_000, 7))


def test_zero_timeout_is_no_bound_and_zero_rate_no_extension() -> None:
    assert not body_overdue(BodyRules(timeout_s=0, min_rate=1), 0.0, 0, 1e9)
    assert body_overdue(BodyRules(timeout_s=1.0, min_rate=0), 0.0, 10**9, 1.5)


def test_the_budget_refuses_a_large_body_past_its_limit_and_counts_nothing_then() -> None:
    big = SMALL_BODY_BYTES + 1
    budget = BodyBudget(3 * big)
    assert budget.reserve(2 * big)
    assert not budget.reserve(big + 1)
    assert budget.used_bytes == 2 * big
    assert budget.reserve(big)
    budget.release(3 * big)
    assert budget.used_bytes == 0


def test_a_small_body_is_always_taken_and_counted_but_a_growing_one_is_not() -> None:
    budget = BodyBudget(100)
    assert budget.reserve(200)
    assert budget.reserve(SMALL_BODY_BYTES)
    assert budget.used_bytes == 200 + SMALL_BODY_BYTES
    # A chunked body past the small size, piece by piece.
    assert not budget.reserve(10, held=SMALL_BODY_BYTES)
    unlimited = BodyBudget(0)
    assert unlimited.reserve(10**12)


def test_an_encoded_slash_stays_encoded_and_the_rest_is_decoded() -> None:
    assert decode_path("/v1/chat%2Fcompletions") == "/v1/chat%2Fcompletions"
    assert decode_path("/a%2fb%20c") == "/a%2Fb c"
    assert decode_path("/a%20b/%41") == "/a b/A"
    assert decode_path("/%252F") == "/%2F"
