"""One log line for each failed try of a request on a replica, at most so many a second.

The metrics count upstream failures and retries; an operator chasing one request, or a
replica that fails in a way the counters do not name, needs the line itself: the request
id, the replica, the phase the try failed in (with the setting that bounded it, for a
timeout), the reason, and which attempt it was. A failure the request recovered from by
trying elsewhere is INFO; the one that ended the request (or cut its stream) is WARNING.

When a fleet of replicas fails at once every request fails, so the lines are bounded by
a token bucket (`LINES_PER_S`, bursts of `BURST`); the lines left out are counted and
the next line written says how many.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from llmgw.errors import (
    DialError,
    DialTimeout,
    FirstTokenTimeout,
    GenerationTimeout,
    HeaderTimeout,
    IdleTimeout,
    TotalTimeout,
    UpstreamError,
    UpstreamStatus,
)

log = logging.getLogger(__name__)

LINES_PER_S = 5.0
BURST = 50

# The phase a failure happened in, by its type: the timeouts by the setting that fired.
_PHASES: tuple[tuple[type[UpstreamError], str], ...] = (
    (DialTimeout, "dial (router.timeouts.dial)"),
    (HeaderTimeout, "response headers (router.timeouts.response_header)"),
    (GenerationTimeout, "answer (router.timeouts.generation)"),
    (FirstTokenTimeout, "first token (router.timeouts.first_token)"),
    (IdleTimeout, "stream (router.timeouts.idle)"),
    (TotalTimeout, "request (router.timeouts.total)"),
    (DialError, "dial"),
    (UpstreamStatus, "response status"),
)


def phase_of(error: UpstreamError) -> str:
    """The phase of the exchange `error` ended, for the log."""
    for kind, phase in _PHASES:
        if isinstance(error, kind):
            return phase
    return "response"


def refill(tokens: float, elapsed_s: float, rate_per_s: float, burst: int) -> float:
    """A token bucket's level after `elapsed_s` seconds of refilling."""
    return min(float(burst), tokens + max(0.0, elapsed_s) * rate_per_s)


class FailureLog:
    """Writes the failure lines of one gateway process, within the bucket."""

    def __init__(
        self,
        rate_per_s: float = LINES_PER_S,
        burst: int = BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rate = rate_per_s
        self._burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()
        self.suppressed = 0
        """Lines left out since the last one written."""

    def failed(
        self,
        request_id: str,
        replica: str,
        model: str,
        attempt: int,
        attempts: int,
        error: UpstreamError,
        *,
        final: bool,
        cut: bool = False,
    ) -> bool:
        """Logs one failed try (`attempt` of `attempts`, counting from 1); `final` when
        the request could not recover from it, `cut` when it broke a stream already
        begun. False when the bucket left it out."""
        level = logging.WARNING if final else logging.INFO
        if not log.isEnabledFor(level):
            return False
        now = self._clock()
        self._tokens = refill(self._tokens, now - self._at, self._rate, self._burst)
        self._at = now
        if self._tokens < 1.0:
            self.suppressed += 1
            return False
        self._tokens -= 1.0
        left_out, self.suppressed = self.suppressed, 0
        log.log(
            level,
            "request %s: replica %s of model %r failed in its %s, %s: %s; %s%s",
            request_id,
            replica,
            model,
            phase_of(error),
            "after its stream began" if cut else f"attempt {attempt} of {attempts}",
            error,
            "the stream was cut off" if cut else "the request failed" if final else "trying another replica",
            f" ({left_out} similar lines left out before this one)" if left_out else "",
        )
        return True
