"""The gateway's access lines (llmgw.obs.access), made off the request path.

Answered requests arrive in the batches the usage sink drains (`finished`), with their
tokens already read. Refusals the gateway makes itself are not usage records, so they
wait in a bounded queue of their own, taken by `run` in batches: a flood of 429s or
503s is exactly when the process has no time to spare for writing a line per request
as it refuses it. A full queue drops the line and counts it.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence

from llmgw.obs.access import AccessLine, AccessLog
from llmgw.obs.logs import Row
from llmgw.router.usage import Finished

_METHOD = "POST"  # every route a usage record is made for takes POST
_ROUTES = {
    path: path.decode("latin-1") for path in (b"/v1/chat/completions", b"/v1/completions", b"/v1/embeddings")
}


def answered_row(finished: Finished, wall_offset: float) -> Row:
    """The row of a request a replica answered: what llmgw.obs.access.access_row makes
    of an AccessLine, made straight from the usage record (this runs once per request;
    a test checks the two agree). `wall_offset` makes the request path's monotonic
    times UNIX time."""
    record, tokens = finished
    route = _ROUTES.get(record.route) or record.route.decode("latin-1")
    status, started, first_byte, account = record.status, record.started, record.first_byte, record.account
    return (
        record.finished + wall_offset,
        f"{_METHOD} {route} {status}",
        (
            _METHOD,
            route,
            record.model,
            status,
            None,
            record.band or None,
            record.endpoint,
            record.stream,
            None if tokens is None else tokens.prompt,
            None if tokens is None else tokens.completion,
            None if first_byte is None else round((first_byte - started) * 1000, 3),
            round((record.finished - started) * 1000, 3),
            None if account is None else account.principal.key_id,
            record.request_id,
            record.trace_id or None,
        ),
    )


class AccessRecorder:
    """Writes the access lines of answered requests (a usage sink consumer) and of
    refusals (queued by `refused`)."""

    def __init__(
        self,
        log: AccessLog,
        capacity: int = 65536,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._log = log
        self._clock = clock
        self._wall_clock = wall_clock
        self._refusals: deque[AccessLine] = deque()
        self._capacity = capacity
        self._wake = asyncio.Event()
        self.dropped = 0
        """Refusals' lines not written because the queue was full."""

    def finished(self, batch: Sequence[Finished]) -> None:
        if not self._log.enabled:
            return
        offset = self._wall_clock() - self._clock()
        self._log.write_rows([answered_row(item, offset) for item in batch])

    def refused(self, line: AccessLine) -> None:
        """Queues a refusal's line; never blocks."""
        if len(self._refusals) >= self._capacity:
            self.dropped += 1
            return
        self._refusals.append(line)
        if not self._wake.is_set():
            self._wake.set()

    def flush(self) -> int:
        """Writes every queued refusal's line; returns how many."""
        lines = list(self._refusals)
        self._refusals.clear()
        self._log.write(lines)
        return len(lines)

    async def run(self, interval: float = 0.05) -> None:
        """Writes the queued lines whenever there are some, at most every `interval`."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            self.flush()
            await asyncio.sleep(interval)
