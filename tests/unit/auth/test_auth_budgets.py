"""Budget periods in UTC and the ledger of known and unwritten spend."""

from __future__ import annotations

from datetime import UTC, datetime

from llmgw.auth.budgets import (
    BudgetCheck,
    BudgetLedger,
    BudgetRule,
    SpendKey,
    day_of,
    period_end,
    period_start,
    spread_spend,
)


def spend_deltas(scopes: list[str] | tuple[str, ...], cost: int, at: float) -> dict[SpendKey, int]:
    """What one request of `cost` at `at` adds to the ledger."""
    return spread_spend({(tuple(scopes), day_of(at)): cost}) if cost > 0 else {}


def ts(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> float:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()


def test_periods_are_utc_days_and_months() -> None:
    now = ts(2026, 12, 31, 23, 59, 59)
    assert period_start("day", now) == ts(2026, 12, 31)
    assert period_end("day", now) == ts(2027, 1, 1)
    assert period_start("month", now) == ts(2026, 12, 1)
    assert period_end("month", now) == ts(2027, 1, 1)
    assert period_end("month", ts(2026, 2, 10)) == ts(2026, 3, 1)


def test_a_budget_is_spent_when_spend_reaches_it() -> None:
    now = ts(2026, 5, 5, 12)
    ledger = BudgetLedger()
    rule = BudgetRule("project:p", 1000, "day", "project")
    ledger.charge(spend_deltas(["project:p"], 999, now))
    assert ledger.exceeded(BudgetCheck((rule,)), now) is None
    ledger.charge(spend_deltas(["project:p"], 1, now))
    assert ledger.exceeded(BudgetCheck((rule,)), now) is rule
    assert ledger.exceeded(BudgetCheck((rule,)), ts(2026, 5, 6, 0, 0, 1)) is None  # a new day


def test_written_spend_moves_to_known_and_a_pull_replaces_it() -> None:
    now = ts(2026, 5, 5, 12)
    ledger = BudgetLedger()
    deltas = spend_deltas(["team:t"], 500, now)
    ledger.charge(deltas)
    ledger.written(deltas)
    assert ledger.spent("team:t", "month", now) == 500
    pulled = dict.fromkeys(deltas, 800)  # the store also holds another gateway's 300
    ledger.pulled(pulled, now)
    assert ledger.spent("team:t", "day", now) == 800
    ledger.charge(spend_deltas(["team:t"], 50, now))
    assert ledger.spent("team:t", "day", now) == 850


def test_costs_summed_per_payer_and_day_spread_as_each_request_would() -> None:
    now = ts(2026, 5, 31, 23, 59)
    scopes = ("project:p", "team:t", "org:o")
    one, other = BudgetLedger(), BudgetLedger()
    by_payer: dict[tuple[tuple[str, ...], int], int] = {}
    for cost, moment in ((7, now), (5, now + 120), (3, now - 60)):  # the second falls in June
        one.charge(spend_deltas(scopes, cost, moment))
        by_payer[(scopes, day_of(moment))] = by_payer.get((scopes, day_of(moment)), 0) + cost
    other.charge(spread_spend(by_payer))
    for moment in (now, now + 120):
        for scope in scopes:
            for period in ("day", "month"):
                assert one.spent(scope, period, moment) == other.spent(scope, period, moment)
    assert other.spent("org:o", "month", now) == 10
    assert other.spent("org:o", "month", now + 120) == 5


def test_a_remembered_verdict_follows_every_change_of_spend() -> None:
    # The gateway asks with the same principal's check on every request; the verdict is
    # remembered in it, and must change as soon as spend or the day does, and never be
    # taken for another ledger's.
    now = ts(2026, 5, 5, 12)
    ledger = BudgetLedger()
    rules = (BudgetRule("team:t", 1000, "day", "team"), BudgetRule("org:o", 5000, "month", "org"))
    check = BudgetCheck(rules)
    assert ledger.exceeded(check, now) is None
    ledger.charge(spend_deltas(("team:t", "org:o"), 1000, now))
    assert ledger.exceeded(check, now) is rules[0]
    assert ledger.exceeded(check, ts(2026, 5, 6, 0, 0, 1)) is None  # the next day
    assert ledger.exceeded(check, now) is rules[0]  # and back: the day is part of the verdict
    ledger.pulled({}, now)  # the store knows nothing of it: the unwritten spend stays
    assert ledger.exceeded(check, now) is rules[0]
    ledger.pulled({("org:o", "month", int(ts(2026, 5, 1))): 9000}, now)
    assert ledger.exceeded(check, now) is rules[0]
    deltas = spend_deltas(["team:t", "org:o"], 1000, now)
    ledger.written(deltas)
    assert ledger.spent("org:o", "month", now) == 10_000
    fresh = BudgetLedger()
    assert fresh.exceeded(check, now) is None
    fresh.pulled({("org:o", "month", int(ts(2026, 5, 1))): 5000}, now)
    assert fresh.exceeded(check, now) is rules[1]


def test_reservations_count_as_spent_until_released_once() -> None:
    now = ts(2026, 12, 3, 12)
    ledger = BudgetLedger()
    check = BudgetCheck((BudgetRule("team:t", 1000, "day", "team"),))
    scopes = ("project:p", "team:t", "org:o")
    first = ledger.reserve(scopes, 400)
    second = ledger.reserve(scopes, 400)
    assert ledger.exceeded(check, now) is None  # 800 held: the next one may still cross the line
    third = ledger.reserve(scopes, 400)
    assert ledger.exceeded(check, now) == check.rules[0]
    assert ledger.reserved("org:o") == 1200
    # The first one ends: its real cost is charged, its reservation let go.
    ledger.charge(spend_deltas(scopes, 100, now))
    ledger.release(first)
    ledger.release(first)  # released once only, whoever releases it again
    assert ledger.reserved("team:t") == 800
    assert ledger.exceeded(check, now) is None  # 100 spent + 800 held
    for reservation in (second, third):
        ledger.release(reservation)
    assert ledger.reserved("team:t") == 0
    assert ledger.spent("team:t", "day", now) == 100


def test_a_verdict_holds_while_less_than_its_room_is_reserved_by_anyone() -> None:
    now = ts(2026, 12, 3, 12)
    ledger = BudgetLedger()
    check = BudgetCheck((BudgetRule("team:t", 1000, "day", "team"),))
    teammate = ("project:q", "team:t")
    assert ledger.exceeded(check, now) is None  # 1000 of room, remembered
    ledger.reserve(teammate, 600)  # another caller of the same team
    assert ledger.exceeded(check, now) is None
    held = ledger.reserve(teammate, 400)  # 1000 held: the budget is reached
    assert ledger.exceeded(check, now) is check.rules[0]
    ledger.release(held)  # a release alone, nothing charged, gives the room back
    assert ledger.exceeded(check, now) is None
    ledger.reserve(("project:z",), 5000)  # held elsewhere: judged again, still room
    assert ledger.exceeded(check, now) is None
    ledger.reserve(teammate, 400)
    assert ledger.exceeded(check, now) is check.rules[0]
