"""Requests-a-minute and tokens-a-minute counted across every gateway sharing a store,
without the request path ever waiting on it.

Each gateway counts locally per scope (a key, project, team, org or person) and
window, and a background loop (`AuthGate`, every `sync_interval`) pushes its own
absolute counts to the store and pulls the others' sums back, with the time of each
other gateway's last push. What another gateway admitted after its last push is
unknown; this module bets that each other live gateway admitted, unseen, as much as
this one admitted since the oldest of those pushes, and judges a request as if all G
gateways were admitting it at once. Each then takes at most its 1/G share of what is
left, and together they stay under the limit however the traffic is spread, and
however late one of them is with its exchanges. The one exception keeps a small
limit from locking up: the first request after an exchange is judged alone, which
can overshoot by at most G-1 requests (or their tokens) per exchange.

When the store cannot be reached the exchange simply does not happen: the last known
totals stay, and what was admitted since counts G times over, so each gateway keeps to
its share of what was left. A new window starts from the previous one's known total,
so the limits keep holding (more tightly than needed) until the store is back.
Everything here is pure: time is an argument, and the store exchange is done by the
caller with the rows `to_push` gives and `exchanged` takes back.

Admission runs on every request, so a full judgement (both windows, the bet on the
others) is not made for each. One that lets a request through also works out how much
more this gateway could admit right now and still pass, and leaves that with the scope
as an allowance: the requests after it only spend the allowance, until it runs out or
anything it was worked out from changes (an exchange, a correction, a new window), and
then the next one is judged in full again. The allowance is exact to spend, not a
guess: the estimate only falls as time passes within a window, and a unit admitted
here raises it by at most G units, so a request paid for from
(limit − estimate) / G would have passed the full judgement too.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from llmgw.auth import windows

HISTORY = 64
"""Pushes remembered per scope: at 250 ms, the last 16 s."""
Dimension = Literal[0, 1]
REQUESTS: Dimension = 0
TOKENS: Dimension = 1


@dataclass(frozen=True, slots=True)
class LimitRule:
    """The one limit a request is held to in one dimension, and the counter it uses."""

    scope: str
    """The counter: `key:ID`, `project:ID`, `team:ID`, `org:ID` or `user:ID`."""
    limit: int
    source: str
    """Where the limit is written: key, project, team, org, user, personal or default."""


class Verdict(NamedTuple):
    """A judgement (a tuple: one is made per limit per request)."""

    allowed: bool
    estimate: float
    retry_after: float
    reset_after: float


@dataclass(slots=True)
class _Entry:
    window: int
    local: list[int] = field(default_factory=lambda: [0, 0])
    local_prev: list[int] = field(default_factory=lambda: [0, 0])
    remote: list[int] = field(default_factory=lambda: [0, 0])
    remote_prev: list[int] = field(default_factory=lambda: [0, 0])
    synced: list[int] = field(default_factory=lambda: [0, 0])
    synced_prev: list[int] = field(default_factory=lambda: [0, 0])
    # This gateway's count as of the oldest other gateway's last push: what it admitted
    # since may have been matched, unseen, by every other gateway.
    before: list[int] = field(default_factory=lambda: [0, 0])
    before_prev: list[int] = field(default_factory=lambda: [0, 0])
    # (time, requests, tokens) of this gateway's recent pushes in the current window.
    history: deque[tuple[float, int, int]] = field(default_factory=lambda: deque(maxlen=HISTORY))
    history_prev: deque[tuple[float, int, int]] = field(default_factory=lambda: deque(maxlen=HISTORY))
    dirty: bool = False
    # What may still be admitted here without a full judgement, per dimension, and the
    # limit it was worked out for (-1: none; a different limit is a different rule).
    allowance: list[float] = field(default_factory=lambda: [0.0, 0.0])
    allowance_limit: list[int] = field(default_factory=lambda: [-1, -1])

    def revoke(self) -> None:
        """Drops the allowances: what they were worked out from has changed."""
        self.allowance_limit = [-1, -1]

    def roll(self, start: int, window_s: int) -> None:
        if start == self.window:
            return
        if start == self.window + window_s:
            self.local_prev, self.remote_prev = self.local, self.remote
            self.synced_prev, self.before_prev = self.synced, self.before
            self.history_prev = self.history
            self.dirty = self.dirty or self.local_prev != self.synced_prev
        else:
            self.local_prev, self.remote_prev = [0, 0], [0, 0]
            self.synced_prev, self.before_prev = [0, 0], [0, 0]
            self.history_prev = deque(maxlen=HISTORY)
        self.local, self.remote, self.synced, self.before = [0, 0], [0, 0], [0, 0], [0, 0]
        self.history = deque(maxlen=HISTORY)
        self.window = start
        self.revoke()


def _least(a: list[int], b: list[int]) -> list[int]:
    return [min(a[0], b[0]), min(a[1], b[1])]


def _count_at(history: deque[tuple[float, int, int]], moment: float) -> list[int]:
    """This gateway's count in a window as pushed at or before `moment`; none pushed
    that early is nothing, which bets on all of it."""
    found = [0, 0]
    for when, requests, tokens in history:
        if when > moment:
            break
        found = [requests, tokens]
    return found


class SharedCounters:
    """This gateway's counts, the others' last known sums, and the judgement."""

    def __init__(self, window_s: int = windows.WINDOW_S) -> None:
        self.window_s = window_s
        self.gateways = 1
        """Live gateways sharing the store, this one included, as last heard."""
        self._entries: dict[str, _Entry] = {}

    def _entry(self, scope: str, now: float) -> _Entry:
        return self._entry_at(scope, windows.window_start(now, self.window_s))

    def _entry_at(self, scope: str, start: int) -> _Entry:
        entry = self._entries.get(scope)
        if entry is None:
            entry = self._entries[scope] = _Entry(start)
        elif entry.window != start:
            entry.roll(start, self.window_s)
        return entry

    def _parts(self, entry: _Entry, dim: Dimension) -> tuple[float, float, float]:
        """The previous window's total and the current one's, each with the bet on what
        others did unseen, and this gateway's count since its last exchange."""
        local, local_prev = entry.local[dim], entry.local_prev[dim]
        previous = local_prev + entry.remote_prev[dim]
        current = local + entry.remote[dim]
        others = self.gateways - 1
        if others:  # alone, there is nobody to bet on (and this runs on every request)
            previous += max(local_prev - entry.before_prev[dim], 0) * others
            current += max(local - entry.before[dim], 0) * others
        since = local - entry.synced[dim]
        return previous, current, since if since > 0 else 0

    def judge(self, rule: LimitRule, dim: Dimension, cost: int, now: float) -> Verdict:
        """Whether `cost` more fits under the rule now; changes nothing."""
        entry = self._entry(rule.scope, now)
        previous, current, since = self._parts(entry, dim)
        est = windows.estimate(previous, current, now, entry.window, self.window_s)
        allowed = est + self.gateways * cost <= rule.limit or (since == 0 and est + cost <= rule.limit)
        wait = 0.0
        if not allowed:
            wait = windows.retry_after(previous, current, rule.limit, cost, now, entry.window, self.window_s)
        reset = windows.until_reset(previous, current, now, entry.window, self.window_s)
        return Verdict(allowed, est, wait, reset)

    def take(self, rpm: LimitRule | None, tpm: LimitRule | None, tokens: int, now: float) -> bool:
        """Admission's usual case in one pass: judges one request against its RPM rule
        (cost 1) and `tokens` against its TPM rule, as `judge` does, and when both fit
        counts them (as `add` does): True. False when either is refused, with nothing
        counted: `judge` then says why.

        It exists because admission runs on every request: one window computation and
        one counter lookup for the two rules when they share a scope (a limit written on
        a project is usually both), no `Verdict`, and mostly no judgement at all but the
        scopes' allowances spent (see the module's docstring)."""
        start = windows.window_start(now, self.window_s)
        requests_entry = tokens_entry = None
        if rpm is not None:
            requests_entry = self._entry_at(rpm.scope, start)
        if tpm is not None:
            if requests_entry is not None and rpm is not None and rpm.scope == tpm.scope:
                tokens_entry = requests_entry
            else:
                tokens_entry = self._entry_at(tpm.scope, start)
        # The usual case, written out rather than in helpers since it runs on every
        # request: both paid from allowances worked out for these very limits.
        requests_paid = (
            requests_entry is None
            or rpm is None
            or (
                requests_entry.allowance_limit[REQUESTS] == rpm.limit
                and requests_entry.allowance[REQUESTS] >= 1
            )
        )
        if requests_paid and (
            tokens_entry is None
            or tpm is None
            or (
                tokens_entry.allowance_limit[TOKENS] == tpm.limit and tokens_entry.allowance[TOKENS] >= tokens
            )
        ):
            if requests_entry is not None:
                requests_entry.local[REQUESTS] += 1
                requests_entry.allowance[REQUESTS] -= 1
                requests_entry.dirty = True
            if tokens_entry is not None:
                tokens_entry.local[TOKENS] += tokens
                tokens_entry.allowance[TOKENS] -= tokens
                tokens_entry.dirty = True
            return True
        requests_estimate = tokens_estimate = None
        if requests_entry is not None and rpm is not None:
            requests_estimate = self._fit(requests_entry, REQUESTS, rpm.limit, 1, now)
            if requests_estimate is None:
                return False
        if tokens_entry is not None and tpm is not None:
            tokens_estimate = self._fit(tokens_entry, TOKENS, tpm.limit, tokens, now)
            if tokens_estimate is None:
                return False
        # Counted only once both fit, so a refusal by one rule leaves the other untouched.
        if requests_entry is not None and rpm is not None and requests_estimate is not None:
            self._count(requests_entry, REQUESTS, rpm.limit, 1, requests_estimate)
        if tokens_entry is not None and tpm is not None and tokens_estimate is not None:
            self._count(tokens_entry, TOKENS, tpm.limit, tokens, tokens_estimate)
        return True

    def _count(self, entry: _Entry, dim: Dimension, limit: int, cost: int, estimate: float) -> None:
        """Counts `cost` let through at `estimate`, and leaves the allowance that is left:
        (limit − estimate) / G, less the cost."""
        entry.local[dim] += cost
        entry.dirty = True
        entry.allowance[dim] = (limit - estimate) / self.gateways - cost
        entry.allowance_limit[dim] = limit

    def _fit(self, entry: _Entry, dim: Dimension, limit: int, cost: int, now: float) -> float | None:
        """`judge`'s decision for an entry already rolled to `now`'s window: the estimate
        when `cost` fits, else None."""
        previous, current, since = self._parts(entry, dim)
        est = windows.estimate(previous, current, now, entry.window, self.window_s)
        if est + self.gateways * cost <= limit or (since == 0 and est + cost <= limit):
            return est
        return None

    def add(self, scope: str, requests: int, tokens: int, now: float) -> None:
        """Counts admitted work (tokens may be negative: a correction of an estimate)."""
        entry = self._entry(scope, now)
        entry.local[REQUESTS] += requests
        entry.local[TOKENS] += tokens
        entry.dirty = True
        entry.revoke()

    def to_push(self, now: float) -> list[tuple[str, int, int, int]]:
        """This gateway's counts that changed since the last exchange: (scope, window,
        requests, tokens), absolute, so pushing them twice is harmless."""
        rows: list[tuple[str, int, int, int]] = []
        for scope, entry in self._entries.items():
            entry.roll(windows.window_start(now, self.window_s), self.window_s)
            if not entry.dirty:
                continue
            prev = entry.window - self.window_s
            rows.append((scope, prev, entry.local_prev[REQUESTS], entry.local_prev[TOKENS]))
            rows.append((scope, entry.window, entry.local[REQUESTS], entry.local[TOKENS]))
        return rows

    def exchanged(
        self,
        pushed: Iterable[tuple[str, int, int, int]],
        others: Mapping[tuple[str, int], tuple[int, int]],
        gateways: int,
        now: float,
        pushed_at: float | None = None,
        others_pushed_at: float | None = None,
    ) -> None:
        """Takes in a successful exchange: what was pushed (at `pushed_at`) is now seen
        by the others, their sums (per scope and window) replace what was known, and
        `others_pushed_at`, the oldest of their last pushes, says how far back what they
        may have admitted unseen goes (None: no other gateway)."""
        self.gateways = max(1, gateways)
        start = windows.window_start(now, self.window_s)
        earlier: dict[str, tuple[list[int], list[int]]] = {}
        for scope, known in self._entries.items():
            known.roll(start, self.window_s)
            earlier[scope] = (list(known.synced), list(known.synced_prev))
        for scope, window, requests, tokens in pushed:
            entry = self._entries.get(scope)
            if entry is None:
                continue
            if window == entry.window:
                entry.synced = [requests, tokens]
            elif window == entry.window - self.window_s:
                entry.synced_prev = [requests, tokens]
            entry.dirty = entry.local != entry.synced or entry.local_prev != entry.synced_prev
        moment = now if pushed_at is None else pushed_at
        for scope, known in self._entries.items():
            if not known.history or known.history[-1][1:] != tuple(known.synced):
                known.history.append((moment, known.synced[REQUESTS], known.synced[TOKENS]))
            # At least since this gateway's exchange before last (another's last push
            # can be up to one interval older than this one's last pull), and since the
            # oldest other push when that is older still.
            before, before_prev = earlier.get(scope, ([0, 0], [0, 0]))
            if others_pushed_at is not None:
                before = _least(before, _count_at(known.history, others_pushed_at))
                if others_pushed_at < known.window:
                    before_prev = _least(before_prev, _count_at(known.history_prev, others_pushed_at))
            known.before, known.before_prev = before, before_prev
        for scope, _window in others:
            if scope not in self._entries:
                self._entries[scope] = _Entry(start)
        for scope, entry in self._entries.items():
            entry.roll(start, self.window_s)
            entry.revoke()  # the others' counts and the number of gateways may have changed
            entry.remote = list(others.get((scope, entry.window), (0, 0)))
            entry.remote_prev = list(others.get((scope, entry.window - self.window_s), (0, 0)))

    def prune(self, now: float) -> None:
        """Forgets scopes with nothing counted in the last two windows."""
        start = windows.window_start(now, self.window_s)
        stale = [
            scope
            for scope, entry in self._entries.items()
            if entry.window < start - self.window_s and not entry.dirty
        ]
        for scope in stale:
            del self._entries[scope]

    def counted(self, scope: str, now: float) -> tuple[int, int]:
        """This gateway's own (requests, tokens) in the current window."""
        entry = self._entry(scope, now)
        return entry.local[REQUESTS], entry.local[TOKENS]
