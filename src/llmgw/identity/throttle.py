"""How often one e-mail address or one client address may use the signup form.

The request path's limiter (llmgw.auth.limiter) shares counts across gateways through
the store, for limits that bill money; a signup form needs far less: a fixed window per
key in this process, so a script cannot fill the pending list or probe addresses fast.
Memory is bounded: past `max_keys` the oldest window is forgotten, which at worst lets
a forgotten key start afresh. Pure apart from the dict: the time is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_KEYS = 10_000


@dataclass(frozen=True, slots=True)
class Allowance:
    """At most `count` uses a `window_s` per key."""

    count: int
    window_s: float


class Throttle:
    """Fixed windows per key, in insertion order, at most `max_keys` of them."""

    def __init__(self, allowance: Allowance, max_keys: int = DEFAULT_MAX_KEYS) -> None:
        self._allowance = allowance
        self._max_keys = max_keys
        self._windows: dict[str, tuple[float, int]] = {}

    def __len__(self) -> int:
        return len(self._windows)

    def allow(self, key: str, now: float) -> bool:
        """Counts one use of `key` at `now`; False once its window's uses are spent."""
        windows = self._windows
        start, used = windows.get(key, (now, 0))
        if now - start >= self._allowance.window_s:
            start, used = now, 0
        if used >= self._allowance.count:
            return False
        windows.pop(key, None)
        if len(windows) >= self._max_keys:
            del windows[next(iter(windows))]
        windows[key] = (start, used + 1)
        return True
