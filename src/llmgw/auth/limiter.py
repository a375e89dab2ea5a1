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

Allowances last one epoch of the counters: any change they were worked out from (an
exchange, a correction, a prune, a new window) starts a new epoch, which lapses them
all at once. Each caller holds a `Meter`: its two counters, looked up once an epoch,
so a request paid from allowances costs a comparison of epochs and four sums.
"""

from __future__ import annotations

import math
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


@dataclass(slots=True, eq=False)
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
    # What may still be admitted here without a full judgement, per dimension (named,
    # not indexed: the request path spends them), the epoch they were worked out in and
    # the limit they were worked out for (-1: none; a different limit is another rule).
    requests_allowance: float = 0.0
    tokens_allowance: float = 0.0
    allowance_epoch: list[int] = field(default_factory=lambda: [-1, -1])
    allowance_limit: list[int] = field(default_factory=lambda: [-1, -1])
    # The allowances as last granted or settled: what was spent from them since is in
    # the count (`local`) only once `settle` has moved it there, so the request path
    # spends an allowance without also counting. Everything that reads `local` settles.
    requests_granted: float = 0.0
    tokens_granted: float = 0.0
    # The gateways the last allowance was shared among: allowance × gateways is what the
    # fleet may still admit, as the x-ratelimit-remaining-* headers tell a client.
    gateways: int = 1

    def allowance(self, dim: Dimension) -> float:
        return self.requests_allowance if dim == REQUESTS else self.tokens_allowance

    def settle(self) -> None:
        """Counts what was spent from the allowances since they were granted or last settled."""
        spent = self.requests_granted - self.requests_allowance
        if spent:
            self.local[REQUESTS] += int(spent)
            self.requests_granted = self.requests_allowance
        spent = self.tokens_granted - self.tokens_allowance
        if spent:
            self.local[TOKENS] += int(spent)
            self.tokens_granted = self.tokens_allowance

    def grant(self, dim: Dimension, allowance: float) -> None:
        """A new allowance, worked out from a settled count."""
        if dim == REQUESTS:
            self.requests_allowance = self.requests_granted = allowance
        else:
            self.tokens_allowance = self.tokens_granted = allowance

    def roll(self, start: int, window_s: int) -> None:
        """Moves the counts on to the window beginning at `start` (see `SharedCounters._roll`)."""
        self.settle()
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


def _unlimited() -> _Entry:
    """A counter no rule reads: a `Meter`'s stand-in for a dimension without a limit,
    so spending needs no test for a missing rule. Never settled nor read."""
    return _Entry(0, requests_allowance=math.inf, tokens_allowance=math.inf)


class Meter:
    """One caller's way to its RPM and TPM counters on the request path: the rules, and
    the counters they use as looked up in `epoch` (their allowances valid while the
    counters' epoch is the same). Made once per principal; only `SharedCounters`
    reads or changes what it holds."""

    __slots__ = (
        "_limit_requests",
        "_limit_tokens",
        "_reset_from",
        "_reset_text",
        "_reset_to",
        "epoch",
        "requests",
        "rpm",
        "tokens",
        "tpm",
    )

    def __init__(self, rpm: LimitRule | None, tpm: LimitRule | None) -> None:
        self.rpm = rpm
        self.tpm = tpm
        self.epoch = -1
        # Private stand-ins until the first judgement (and for good, for a missing rule).
        self.requests = self.tokens = _unlimited()
        # The headers' parts that do not change, made once rather than per answer.
        self._limit_requests = ("x-ratelimit-limit-requests", str(rpm.limit)) if rpm else ("", "")
        self._limit_tokens = ("x-ratelimit-limit-tokens", str(tpm.limit)) if tpm else ("", "")
        # The last reset written, and the seconds to reset it stands for: (from, to].
        self._reset_text = ""
        self._reset_from = self._reset_to = 0.0

    def headers(self, now: float) -> list[tuple[str, str]]:
        """OpenAI's x-ratelimit-* headers for an answer this meter's caller was admitted
        to, from its own limits (the most specific ones that apply): the limit, what
        may still be admitted as the allowances say (exact alone; with G gateways, this
        one's share times G), and when the window is empty again. Asked once per
        answered request: what admission left behind, read, never judged again."""
        out: list[tuple[str, str]] = []
        self.add_headers(out, now)
        return out

    def add_headers(self, out: list[tuple[str, str]], now: float) -> None:
        """`headers`, appended to an answer's own (it runs on every answer: the limits'
        headers are made once per meter, the reset's once a second)."""
        rpm, tpm = self.rpm, self.tpm
        if rpm is not None:
            entry = self.requests
            left = entry.requests_allowance * entry.gateways
            out.append(self._limit_requests)
            out.append(
                (
                    "x-ratelimit-remaining-requests",
                    self._limit_requests[1] if left >= rpm.limit else str(int(left)) if left >= 1 else "0",
                )
            )
            out.append(("x-ratelimit-reset-requests", self._reset(entry.window, now)))
        if tpm is not None:
            entry = self.tokens
            left = entry.tokens_allowance * entry.gateways
            out.append(self._limit_tokens)
            out.append(
                (
                    "x-ratelimit-remaining-tokens",
                    self._limit_tokens[1] if left >= tpm.limit else str(int(left)) if left >= 1 else "0",
                )
            )
            out.append(("x-ratelimit-reset-tokens", self._reset(entry.window, now)))

    def _reset(self, window: int, now: float) -> str:
        """When a window that admitted something is empty again (two windows after its
        start), written as OpenAI does; the text changes once a second, so the last one
        is kept with the span of seconds it stands for."""
        reset = window + 2 * windows.WINDOW_S - now
        if self._reset_from < reset <= self._reset_to:
            return self._reset_text
        text = self._reset_text = windows.format_reset(reset if reset > 0 else 0.0)
        whole = math.ceil(reset) if reset > 1 else 0
        # Whole seconds from 2 up read ceil(reset): the same text over (whole - 1, whole].
        # Below that the text is in milliseconds, and not kept.
        self._reset_from, self._reset_to = (whole - 1.0, float(whole)) if whole > 1 else (0.0, 0.0)
        return text


class SharedCounters:
    """This gateway's counts, the others' last known sums, and the judgement."""

    def __init__(self, window_s: int = windows.WINDOW_S) -> None:
        self.window_s = window_s
        self.gateways = 1
        """Live gateways sharing the store, this one included, as last heard."""
        self._entries: dict[str, _Entry] = {}
        self.epoch = 0
        """Bumped whenever allowances may no longer hold (see the module's docstring)."""
        self._epoch_from = 0.0
        self._epoch_to = 0.0
        """The window the epoch began in: a time outside it begins another."""

    def _new_epoch(self) -> None:
        self.epoch += 1

    def _entry(self, scope: str, now: float) -> _Entry:
        return self._entry_at(scope, windows.window_start(now, self.window_s))

    def _entry_at(self, scope: str, start: int) -> _Entry:
        entry = self._entries.get(scope)
        if entry is None:
            entry = self._entries[scope] = _Entry(start)
        else:
            self._roll(entry, start)
        return entry

    def _roll(self, entry: _Entry, start: int) -> None:
        """Moves an entry on to the window beginning at `start`; its allowances, worked out
        for another window, lapse with the epoch."""
        if entry.window != start:
            entry.roll(start, self.window_s)
            self._new_epoch()

    def _parts(self, entry: _Entry, dim: Dimension) -> tuple[float, float, float]:
        """The previous window's total and the current one's, each with the bet on what
        others did unseen, and this gateway's count since its last exchange."""
        entry.settle()
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

    def take(self, meter: Meter, tokens: int, now: float) -> bool:
        """Admission in one pass: judges one request against the meter's RPM rule
        (cost 1) and `tokens` against its TPM rule, as `judge` does, and when both fit
        counts them (as `add` does): True. False when either is refused, with nothing
        counted: `judge` then says why.

        It exists because admission runs on every request: mostly no judgement at all,
        only the allowances the meter's counters hold in this epoch spent (see the
        module's docstring), written out here rather than in helpers."""
        # Only the epoch's end is looked at: a clock gone back to an earlier window counts
        # into the later one, more strictly than needed, until the next epoch begins.
        if meter.epoch == self.epoch and now < self._epoch_to:
            requests, counted = meter.requests, meter.tokens
            if requests.requests_allowance >= 1 and counted.tokens_allowance >= tokens:
                requests.requests_allowance -= 1
                counted.tokens_allowance -= tokens
                return True
        return self._take_judged(meter, tokens, now)

    def _take_judged(self, meter: Meter, tokens: int, now: float) -> bool:
        """`take` when the meter's allowances do not pay: in a new epoch, or run out."""
        start = windows.window_start(now, self.window_s)
        if not self._epoch_from <= now < self._epoch_to:
            self._new_epoch()
            self._epoch_from, self._epoch_to = float(start), float(start + self.window_s)
        rpm, tpm = meter.rpm, meter.tpm
        requests = meter.requests if rpm is None else self._entry_at(rpm.scope, start)
        if tpm is None:
            counted = meter.tokens  # its private stand-in: never given a shared counter
        elif rpm is not None and rpm.scope == tpm.scope:
            counted = requests
        else:
            counted = self._entry_at(tpm.scope, start)
        # Judged both before either is counted, so a refusal by one leaves the other as it was.
        requests_estimate = tokens_estimate = None
        if rpm is not None and not self._pays(requests, REQUESTS, rpm.limit, 1):
            requests_estimate = self._fit(requests, REQUESTS, rpm.limit, 1, now)
            if requests_estimate is None:
                return False
        if tpm is not None and not self._pays(counted, TOKENS, tpm.limit, tokens):
            tokens_estimate = self._fit(counted, TOKENS, tpm.limit, tokens, now)
            if tokens_estimate is None:
                return False
        if rpm is not None:
            if requests_estimate is None:
                requests.requests_allowance -= 1
                requests.dirty = True
            else:
                self._count(requests, REQUESTS, rpm.limit, 1, requests_estimate)
        if tpm is not None:
            if tokens_estimate is None:
                counted.tokens_allowance -= tokens
                counted.dirty = True
            else:
                self._count(counted, TOKENS, tpm.limit, tokens, tokens_estimate)
        meter.requests, meter.tokens = requests, counted
        meter.epoch = self.epoch
        return True

    def _pays(self, entry: _Entry, dim: Dimension, limit: int, cost: int) -> bool:
        """Whether the entry's allowance, worked out in this epoch for this limit, covers `cost`."""
        return (
            entry.allowance_epoch[dim] == self.epoch
            and entry.allowance_limit[dim] == limit
            and entry.allowance(dim) >= cost
        )

    def _count(self, entry: _Entry, dim: Dimension, limit: int, cost: int, estimate: float) -> None:
        """Counts `cost` let through at `estimate`, and leaves the allowance that is left:
        (limit − estimate) / G, less the cost. One last worked out for another limit on the
        same counter (another principal's rule, across a change of tenancy) begins a new
        epoch, so no meter goes on spending it for a limit it was not made for."""
        entry.local[dim] += cost  # settled: `_fit` worked out the estimate
        entry.dirty = True
        if entry.allowance_limit[dim] not in (limit, -1):
            self._new_epoch()
        entry.grant(dim, (limit - estimate) / self.gateways - cost)
        entry.gateways = self.gateways
        entry.allowance_epoch[dim] = self.epoch
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
        entry.settle()
        entry.local[REQUESTS] += requests
        entry.local[TOKENS] += tokens
        entry.dirty = True
        self._new_epoch()

    def to_push(self, now: float) -> list[tuple[str, int, int, int]]:
        """This gateway's counts that changed since the last exchange: (scope, window,
        requests, tokens), absolute, so pushing them twice is harmless."""
        rows: list[tuple[str, int, int, int]] = []
        for scope, entry in self._entries.items():
            self._roll(entry, windows.window_start(now, self.window_s))
            entry.settle()
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
            self._roll(known, start)
            earlier[scope] = (list(known.synced), list(known.synced_prev))
        for scope, window, requests, tokens in pushed:
            entry = self._entries.get(scope)
            if entry is None:
                continue
            if window == entry.window:
                entry.synced = [requests, tokens]
            elif window == entry.window - self.window_s:
                entry.synced_prev = [requests, tokens]
            entry.settle()
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
        self._new_epoch()  # the others' counts and the number of gateways may have changed
        for scope, entry in self._entries.items():
            self._roll(entry, start)
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
        if stale:
            self._new_epoch()  # a meter may hold a counter forgotten here

    def counted(self, scope: str, now: float) -> tuple[int, int]:
        """This gateway's own (requests, tokens) in the current window."""
        entry = self._entry(scope, now)
        entry.settle()
        return entry.local[REQUESTS], entry.local[TOKENS]
