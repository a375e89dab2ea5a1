"""Telling a replica that is slow to answer from one that will never answer.

A non-streamed answer comes, headers and all, only when it is finished, so with
`router.timeouts.generation` at 0 (the default: a slow model's long answer must not be
cut) the wait for it was bounded by `total` alone, and a replica that accepted the
connection and then said nothing held the request for half an hour. Here that wait is
checked every `response_header` seconds: while the replica keeps answering its metrics
(read by the scraper within `router.stale_after`), it is generating and the wait goes
on, up to `total`; once it has not, the try fails with the response_header timeout and
the request is retried on another replica. A provider's endpoint publishes no metrics:
its wait goes on to `total`, as before.
"""

from __future__ import annotations

from collections.abc import Callable

from llmgw.errors import TotalTimeout
from llmgw.router.endpoints import Endpoint
from llmgw.upstream.watchdog import Watch


def replica_alive(scraped_at: float | None, now: float, fresh_s: float) -> bool:
    """Whether a replica's metrics were read within `fresh_s` of `now` (its clock)."""
    return scraped_at is not None and now - scraped_at <= fresh_s


class Liveness:
    """The `renew` check of non-streamed tries' watches (see the module's docstring),
    one per gateway: a watch carries its endpoint (`subject`) and the loop-clock
    deadline of what is left of total (`until`)."""

    __slots__ = ("_clock", "_every_s", "_fresh_s", "_total_s")

    def __init__(self, every_s: float, fresh_s: float, total_s: float, clock: Callable[[], float]) -> None:
        self._every_s = every_s
        self._fresh_s = fresh_s
        self._total_s = total_s
        self._clock = clock

    def __call__(self, watch: Watch, now: float) -> bool:
        endpoint = watch.subject
        assert isinstance(endpoint, Endpoint)
        if not endpoint.spec.external and not replica_alive(
            endpoint.scraped_at, self._clock(), self._fresh_s
        ):
            return False
        final = watch.until
        if now >= final:
            return False
        following = now + self._every_s
        if following < final:
            watch.deadline = following
        else:
            watch.move(final, TotalTimeout, self._total_s)
        return True
