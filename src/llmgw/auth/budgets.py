"""Budgets: what each scope has spent in its current day or month, and whether a
budget is spent.

Spend reaches the store with the usage records (the `spend` ledger, one row per scope
and period), and every gateway pulls the totals back in the background; between pulls
it adds what it charged itself and has not written yet. Periods are calendar days and
months in UTC.

A request's cost is known only when it ends, so admission reserves what it may cost
at most (its prompt estimate and the output it may write, priced as the budget prices
them) and the reservation counts as spent until the request ends: then the real cost
is charged and the reservation released (`Reservation`). A budget is judged spent once
spend and reservations reach it, and the request that crosses the line is let through:
however many requests arrive at once, spend stays under the budget plus one request's
most.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

PERIODS: tuple[str, ...] = ("day", "month")
_DAY_S = 86_400

SpendKey = tuple[str, str, int]
"""(scope, period, period start)."""


@dataclass(frozen=True, slots=True)
class BudgetRule:
    """A budget a request is held to."""

    scope: str
    budget_micros: int
    period: str
    source: str
    """Where it is written: project, team, org, user or personal."""


def period_start(period: str, now: float) -> int:
    """The UNIX time the day or month containing `now` began, in UTC."""
    moment = datetime.fromtimestamp(now, UTC)
    if period == "day":
        begun = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    else:
        begun = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return int(begun.timestamp())


def period_end(period: str, now: float) -> int:
    """The UNIX time the day or month containing `now` ends, in UTC."""
    begun = datetime.fromtimestamp(period_start(period, now), UTC)
    if period == "day":
        return int(begun.timestamp()) + 86_400
    if begun.month == 12:
        return int(begun.replace(year=begun.year + 1, month=1).timestamp())
    return int(begun.replace(month=begun.month + 1).timestamp())


def day_of(ts: float) -> int:
    """The UNIX day `ts` falls on: what the ledger's periods and `PayerDay` count in."""
    return int(ts // _DAY_S)


def current_periods(now: float) -> dict[str, int]:
    """The start of the day and of the month containing `now`."""
    return dict(_periods_of_day(day_of(now)))


@functools.lru_cache(maxsize=8)
def _periods_of_day(day: int) -> Mapping[str, int]:
    # Looked up on every request: a calendar computation per request would cost more
    # than the rest of accounting, and the answer only changes at midnight. Shared by
    # every caller, so never to be changed.
    noon = day * _DAY_S + _DAY_S / 2
    return {period: period_start(period, noon) for period in PERIODS}


PayerDay = tuple[tuple[str, ...], int]
"""Whoever pays (their spend scopes) and the day (UNIX days) a cost falls on."""


def spread_spend(by_payer: Mapping[PayerDay, int]) -> dict[SpendKey, int]:
    """Costs summed per payer and day, as the ledger keeps them: each of the payer's
    scopes, in the day and the month."""
    out: dict[SpendKey, int] = {}
    for (scopes, day), cost in by_payer.items():
        for period, start in _periods_of_day(day).items():
            for scope in scopes:
                spend_key = (scope, period, start)
                out[spend_key] = out.get(spend_key, 0) + cost
    return out


class BudgetCheck:
    """One caller's budgets, and the ledger's last verdict on them: whether one is spent,
    valid for the day it was made on and until the ledger's spend next changes (once
    per batch of answers), so the requests in between are answered without a look.
    Reservations change what counts as spent on every request, so a verdict that none
    is spent also keeps the least room its budgets had left (`headroom`) and how much
    had been reserved in all by then (`reserved_mark`): while less than that room has
    been reserved since, by anyone, no budget of the caller's can have been reached."""

    __slots__ = ("headroom", "reserved_mark", "rules", "since", "spent", "until", "version")

    def __init__(self, rules: tuple[BudgetRule, ...]) -> None:
        self.rules = rules
        self.version: object = None
        self.since = self.until = 0.0
        self.spent: BudgetRule | None = None
        self.headroom = 0
        self.reserved_mark = 0


class Reservation:
    """What one admitted request may cost at most, held against its payer's scopes until
    it ends; released once (a second release does nothing), when its usage is accounted
    or when it fails without an answer."""

    __slots__ = ("micros", "scopes")

    def __init__(self, scopes: tuple[str, ...], micros: int) -> None:
        self.scopes = scopes
        self.micros = micros


class BudgetLedger:
    """Known spend (the store's, as last pulled) plus this gateway's unwritten spend and
    the reservations of its requests in flight."""

    def __init__(self) -> None:
        self._known: dict[SpendKey, int] = {}
        self._unwritten: dict[SpendKey, int] = {}
        self._reserved: dict[str, int] = {}
        """Per scope, whatever the period: requests in flight last seconds, not days."""
        self._reserved_ever = 0
        """Every micro ever reserved, released or not: what was reserved between two
        moments is the difference (see `BudgetCheck`)."""
        self._version = object()
        """Made anew whenever spend changes, which lapses every `BudgetCheck`'s verdict
        (an object, not a count, so a verdict of another ledger's never passes for one of
        this one's). Reservations do not change it: a release only leaves more room, and
        what was reserved is judged against a verdict's headroom."""

    def spent(self, scope: str, period: str, now: float) -> int:
        key = (scope, period, _periods_of_day(day_of(now))[period])
        return self._known.get(key, 0) + self._unwritten.get(key, 0)

    def reserved(self, scope: str) -> int:
        return self._reserved.get(scope, 0)

    def reserve(self, scopes: tuple[str, ...], micros: int) -> Reservation:
        """Holds `micros` against each of the scopes until the reservation is released."""
        reservation = Reservation(scopes, micros)
        if micros > 0:
            self._reserved_ever += micros
            reserved = self._reserved
            for scope in scopes:
                reserved[scope] = reserved.get(scope, 0) + micros
        return reservation

    def release(self, reservation: Reservation) -> None:
        """Lets a reservation go (once: a second release does nothing)."""
        micros = reservation.micros
        if micros <= 0:
            return
        reservation.micros = 0
        reserved = self._reserved
        for scope in reservation.scopes:
            left = reserved.get(scope, 0) - micros
            if left > 0:
                reserved[scope] = left
            else:
                reserved.pop(scope, None)

    def exceeded(self, check: BudgetCheck, now: float) -> BudgetRule | None:
        """The first of the caller's budgets that is spent, or None."""
        if (
            check.version is self._version
            and check.since <= now < check.until
            and self._reserved_ever - check.reserved_mark < check.headroom
        ):
            return None  # only a verdict that none is spent has headroom
        day = day_of(now)
        check.spent, check.headroom = self._first_spent(check.rules, day)
        check.version = self._version
        check.reserved_mark = self._reserved_ever
        check.since, check.until = float(day * _DAY_S), float((day + 1) * _DAY_S)
        return check.spent

    def _first_spent(self, rules: Sequence[BudgetRule], day: int) -> tuple[BudgetRule | None, int]:
        """The first spent budget, or None and the least room any of them has left."""
        starts = _periods_of_day(day)
        known, unwritten, reserved = self._known, self._unwritten, self._reserved
        headroom = -1
        for rule in rules:
            key = (rule.scope, rule.period, starts[rule.period])
            room = (
                rule.budget_micros - known.get(key, 0) - unwritten.get(key, 0) - reserved.get(rule.scope, 0)
            )
            if room <= 0:
                return rule, 0
            if headroom < 0 or room < headroom:
                headroom = room
        return None, headroom

    def charge(self, deltas: Mapping[SpendKey, int]) -> None:
        """Spend this gateway has incurred and not yet written."""
        self._version = object()
        for key, cost in deltas.items():
            self._unwritten[key] = self._unwritten.get(key, 0) + cost

    def written(self, deltas: Mapping[SpendKey, int]) -> None:
        """Spend now in the store: known from here on, until the next pull says more."""
        self._version = object()
        for key, cost in deltas.items():
            left = self._unwritten.get(key, 0) - cost
            if left > 0:
                self._unwritten[key] = left
            else:
                self._unwritten.pop(key, None)
            self._known[key] = self._known.get(key, 0) + cost

    def pulled(self, totals: Mapping[SpendKey, int], now: float) -> None:
        """The store's totals for the current periods replace what was known; older
        periods are forgotten."""
        starts = set(current_periods(now).items())
        self._version = object()
        self._known = {key: cost for key, cost in totals.items() if (key[1], key[2]) in starts}
        self._unwritten = {key: c for key, c in self._unwritten.items() if (key[1], key[2]) in starts}
