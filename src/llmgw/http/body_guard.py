"""Bounds on receiving request bodies: how long one may take, and how much memory all
of them together may hold.

A client that sends its head and then its body slowly (or never) would otherwise hold
its connection, and whatever it sent, for as long as it likes: a few such clients take
every slot under `max_connections`, or pin the process's memory with large bodies half
sent. So a body has `timeout_s` to arrive, extended by one second for every
`min_rate` bytes received (a client sending at least that fast is never cut off, and a
large body gets proportionally longer); and the bodies being received count against
one budget shared by every connection of a listener, reserved up front for a declared
`content-length`, as they arrive for a chunked one. Over the budget, a request is
refused at once with 503 rather than the process growing; but a small body (up to
SMALL_BODY_BYTES, what one read from a socket brings) is always taken, counted but
never refused, so that the usual request still goes through while the budget is full
of large ones: memory held in small bodies is bounded by the connection count, as
the sockets' own buffers are.

Deadlines are checked by one sweep per listener (`SWEEP_S`), not a timer per request:
arming and disarming a timer costs microseconds on every request, the sweep a compare
per open connection each second.
"""

from __future__ import annotations

from dataclasses import dataclass

SWEEP_S = 1.0
"""How often a listener checks its connections' bodies against their deadline."""

SMALL_BODY_BYTES = 64 * 1024
"""A body up to this size is taken even when the budget is full."""

DEFAULT_BODY_TIMEOUT_S = 30.0
DEFAULT_BODY_MIN_RATE = 16 * 1024
DEFAULT_BODY_MEMORY_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class BodyRules:
    """How long a body may take to arrive, and the memory all bodies may hold."""

    timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    """Seconds a body has from the end of its head (0: no bound)."""
    min_rate: float = DEFAULT_BODY_MIN_RATE
    """Bytes a second that each extend `timeout_s` by one second (0: no extension)."""
    memory_bytes: int = DEFAULT_BODY_MEMORY_BYTES
    """Body bytes the listener's connections may hold together before the gateway has
    taken them (0: no budget)."""
    max_body_bytes: int = 32 * 1024 * 1024
    """The largest body the application takes: a bigger declared body is refused by it
    unread, so no more than this is reserved for one."""


def body_overdue(rules: BodyRules, since: float, received: int, now: float) -> bool:
    """Whether a body whose clock started at `since` (seconds) and of which `received`
    bytes have come is past its deadline at `now`."""
    if rules.timeout_s <= 0:
        return False
    allowed = rules.timeout_s + (received / rules.min_rate if rules.min_rate > 0 else 0.0)
    return now - since > allowed


class BodyBudget:
    """The body bytes a listener's connections hold, against `limit_bytes` (0: none)."""

    __slots__ = ("limit_bytes", "used_bytes")

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.used_bytes = 0

    def reserve(self, size: int, held: int = 0) -> bool:
        """Counts `size` more bytes of a body that holds `held` already, or returns False
        (counting nothing) when that would pass the limit, unless the body is small."""
        used = self.used_bytes + size
        if self.limit_bytes and used > self.limit_bytes and held + size > SMALL_BODY_BYTES:
            return False
        self.used_bytes = used
        return True

    def release(self, size: int) -> None:
        self.used_bytes -= size
