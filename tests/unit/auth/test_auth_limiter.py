"""Limits shared by gateways: one gateway alone, several exchanging through a store
(simulated here by summing their pushes), and several that cannot reach it."""

from __future__ import annotations

import pytest

from llmgw.auth.limiter import REQUESTS, TOKENS, LimitRule, Meter, SharedCounters

RULE = LimitRule("key:k1", 100, "key")
T0 = 6000.0  # the start of a window


class FakeStore:
    """What limit_counters does: each gateway's absolute count, summed for the others."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, int, str], tuple[int, int]] = {}
        self.pushed_at: dict[str, float] = {}

    def exchange(self, name: str, counters: SharedCounters, now: float, gateways: int) -> None:
        pushed = counters.to_push(now)
        self.pushed_at[name] = now
        for scope, window, requests, tokens in pushed:
            self.rows[(scope, window, name)] = (requests, tokens)
        others: dict[tuple[str, int], tuple[int, int]] = {}
        for (scope, window, gateway), (r, t) in self.rows.items():
            if gateway != name:
                acc = others.get((scope, window), (0, 0))
                others[(scope, window)] = (acc[0] + r, acc[1] + t)
        others_at = [when for gateway, when in self.pushed_at.items() if gateway != name]
        counters.exchanged(pushed, others, gateways, now, now, min(others_at) if others_at else None)


def admit(counters: SharedCounters, now: float, rule: LimitRule = RULE, cost: int = 1) -> bool:
    verdict = counters.judge(rule, REQUESTS, cost, now)
    if verdict.allowed:
        counters.add(rule.scope, cost, 0, now)
    return verdict.allowed


def test_one_gateway_admits_exactly_the_limit_in_a_window() -> None:
    counters = SharedCounters()
    admitted = sum(admit(counters, T0 + i * 0.01) for i in range(300))
    assert admitted == 100


def test_a_refusal_says_when_to_retry() -> None:
    counters = SharedCounters()
    for i in range(100):
        admit(counters, T0 + i * 0.01)
    verdict = counters.judge(RULE, REQUESTS, 1, T0 + 10)
    assert not verdict.allowed
    assert verdict.retry_after == pytest.approx(50 + 0.6)  # 1% of the next window must slide out
    assert verdict.reset_after == 110


def test_two_gateways_exchanging_hold_the_limit_together() -> None:
    store = FakeStore()
    a, b = SharedCounters(), SharedCounters()
    store.exchange("a", a, T0, 2)
    store.exchange("b", b, T0, 2)
    store.exchange("a", a, T0, 2)
    admitted = 0
    now = T0
    for _tick in range(40):  # 40 exchanges, 0.25 s apart, both gateways hammering
        for _ in range(50):
            admitted += admit(a, now) + admit(b, now)
        now += 0.25
        store.exchange("a", a, now, 2)
        store.exchange("b", b, now, 2)
    assert 100 - 2 <= admitted <= 100 + 1


def test_gateways_that_cannot_reach_the_store_keep_to_their_share() -> None:
    store = FakeStore()
    gateways = [SharedCounters() for _ in range(4)]
    for i, counters in enumerate(gateways):
        store.exchange(str(i), counters, T0, 4)
    for i, counters in enumerate(gateways):
        store.exchange(str(i), counters, T0, 4)
    # From here on no exchange succeeds.
    admitted = [sum(admit(c, T0 + 1 + j * 0.01) for j in range(200)) for c in gateways]
    assert sum(admitted) <= 100 + 3
    assert all(count <= 100 // 4 + 1 for count in admitted)


def test_unreachable_store_across_a_window_boundary_still_holds() -> None:
    store = FakeStore()
    a, b = SharedCounters(), SharedCounters()
    for name, c in (("a", a), ("b", b), ("a", a)):
        store.exchange(name, c, T0, 2)
    first = sum(admit(a, T0 + 1 + i * 0.01) for i in range(100)) + sum(
        admit(b, T0 + 1 + i * 0.01) for i in range(100)
    )
    # A full minute later neither has heard from the other since the start.
    later = T0 + 60 + 15
    second = sum(admit(a, later) for _ in range(200)) + sum(admit(b, later) for _ in range(200))
    assert first <= 101
    # In the sliding minute ending at `later`, at most the limit (plus the exception).
    assert first * (1 - 15 / 60) + second <= 100 + 2


def test_tokens_corrected_after_the_answer() -> None:
    rule = LimitRule("project:p", 1000, "project")
    counters = SharedCounters()
    assert counters.judge(rule, TOKENS, 600, T0).allowed
    counters.add(rule.scope, 0, 600, T0)
    assert not counters.judge(rule, TOKENS, 600, T0 + 1).allowed
    counters.add(rule.scope, 0, -500, T0 + 1)  # the answer used 100 tokens, not 600
    assert counters.judge(rule, TOKENS, 600, T0 + 2).allowed


def test_a_request_larger_than_the_whole_limit_fits_only_an_empty_window() -> None:
    rule = LimitRule("key:k", 100, "key")
    counters = SharedCounters()
    assert counters.judge(rule, TOKENS, 100, T0).allowed
    assert not counters.judge(rule, TOKENS, 101, T0).allowed


def test_counts_of_old_windows_are_forgotten() -> None:
    counters = SharedCounters()
    admit(counters, T0)
    store = FakeStore()
    store.exchange("a", counters, T0 + 1, 1)
    counters.prune(T0 + 200)
    assert counters.to_push(T0 + 200) == []


def test_a_gateway_late_with_its_exchanges_is_bet_on_for_all_its_silence() -> None:
    store = FakeStore()
    a, b = SharedCounters(), SharedCounters()
    for name, c in (("a", a), ("b", b), ("a", a), ("b", b)):
        store.exchange(name, c, T0, 2)
    admitted = 0
    now = T0
    for tick in range(40):  # a exchanges every tick, b only every fourth
        for _ in range(50):
            admitted += admit(a, now) + admit(b, now)
        now += 0.25
        store.exchange("a", a, now, 2)
        if tick % 4 == 3:
            store.exchange("b", b, now, 2)
    assert 100 - 4 <= admitted <= 100 + 1


def test_take_admits_exactly_the_limit_spending_allowances() -> None:
    counters = SharedCounters()
    meter = Meter(LimitRule("project:p", 100, "project"), LimitRule("project:p", 10_000, "project"))
    admitted = sum(counters.take(meter, 30, T0 + i * 0.01) for i in range(300))
    assert admitted == 100
    assert counters.counted("project:p", T0 + 3) == (100, 3000)


def test_an_allowance_does_not_outlive_an_exchange_that_brings_others_counts() -> None:
    # b admits 60 of 100 unseen by a; once a has exchanged, its allowance (granted when
    # it saw nothing) must not let it past the 40 left.
    store = FakeStore()
    a, b = SharedCounters(), SharedCounters()
    rule = LimitRule("project:p", 100, "project")
    meter_a, meter_b = Meter(rule, None), Meter(rule, None)
    assert a.take(meter_a, 0, T0)
    for i in range(60):
        assert b.take(meter_b, 0, T0 + 0.001 * i)
    store.exchange("b", b, T0 + 0.1, 2)
    store.exchange("a", a, T0 + 0.1, 2)
    admitted_after = sum(a.take(meter_a, 0, T0 + 0.2 + 0.001 * i) for i in range(100))
    assert 1 + 60 + admitted_after <= 100 + 1  # at most one over: the first after an exchange


def test_a_correction_takes_back_the_allowance() -> None:
    counters = SharedCounters()
    meter = Meter(None, LimitRule("team:t", 1000, "team"))
    assert counters.take(meter, 100, T0)
    counters.add("team:t", 0, 850, T0 + 1)  # the answer was far longer than estimated
    assert not counters.take(meter, 100, T0 + 2)


@pytest.mark.parametrize("gateways", [1, 3])
def test_take_judges_and_counts_as_judge_and_add_do(gateways: int) -> None:
    """Admission's one-pass path against the rules it stands for, limits shared by
    RPM and TPM (one scope) and apart, through refusals and a window boundary."""
    rpm, tpm = LimitRule("project:p", 50, "project"), LimitRule("project:p", 4000, "project")
    key_rpm = LimitRule("key:k", 30, "key")
    project_meter, key_meter = Meter(rpm, tpm), Meter(key_rpm, tpm)
    fast, slow = SharedCounters(), SharedCounters()
    for counters in (fast, slow):
        counters.gateways = gateways
    for i in range(400):
        now = T0 + i * 0.4
        cost = 40 + i % 70
        requests_rule, meter = (key_rpm, key_meter) if i % 3 else (rpm, project_meter)
        taken = fast.take(meter, cost, now)
        verdicts = [slow.judge(requests_rule, REQUESTS, 1, now), slow.judge(tpm, TOKENS, cost, now)]
        assert taken == all(v.allowed for v in verdicts)
        if taken:
            slow.add(requests_rule.scope, 1, 0, now)
            slow.add(tpm.scope, 0, cost, now)
    for scope in ("project:p", "key:k"):
        assert fast.counted(scope, T0 + 200) == slow.counted(scope, T0 + 200)
