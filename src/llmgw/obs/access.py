"""The access log: one line per request on the logger `llmgw.access`, for every answer,
the gateway's own refusals included.

A line says what was asked and how it went (method, route, model, status, the band it
was admitted in, the replica that answered, token counts, time to first token, total
time, the key's id and, for a refusal, why) and never what a request said or the key
itself: a log is read by more people than may see prompts or hold keys. The line's
values are a record's named fields (llmgw.obs.logs), so `--log-format json` writes
them as JSON members and text as `key=value`.

Lines are made off the request path, from the batches the gateway already hands to
its accountants (llmgw.router.access_log), and a batch is one log record of many lines
(llmgw.obs.logs.LINES): logging's cost per record is ten times a line's.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from llmgw.obs.logs import LINES, Line

ACCESS_LOGGER = "llmgw.access"


class AccessLine(NamedTuple):
    """What one access line says. Times in seconds; None is left out of the line."""

    time_s: float
    """When it was answered, UNIX time."""
    request_id: str
    trace_id: str
    method: str
    route: str
    model: str
    status: int
    band: str | None = None
    replica: str | None = None
    stream: bool | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    ttft_s: float | None = None
    total_s: float | None = None
    key_id: str | None = None
    reason: str | None = None
    """Why the gateway refused it (a label of llmgw.http.responses.REASONS)."""


def access_fields(line: AccessLine) -> dict[str, object]:
    """The line's named values, in the order a reader scans them, the same keys on every
    line (None for what it does not know); times in milliseconds, to the microsecond."""
    ttft_s, total_s = line.ttft_s, line.total_s
    return {
        "method": line.method,
        "route": line.route,
        "model": line.model or None,
        "status": line.status,
        "reason": line.reason,
        "band": line.band or None,
        "replica": line.replica or None,
        "stream": line.stream,
        "prompt_tokens": line.prompt_tokens,
        "completion_tokens": line.completion_tokens,
        "ttft_ms": None if ttft_s is None else round(ttft_s * 1000, 3),
        "total_ms": None if total_s is None else round(total_s * 1000, 3),
        "key_id": line.key_id or None,
        "request_id": line.request_id,
        "trace_id": line.trace_id or None,
    }


class AccessLog:
    """Writes access lines on `llmgw.access` (or `logger`), a batch as one record."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._log = logger if logger is not None else logging.getLogger(ACCESS_LOGGER)

    @property
    def enabled(self) -> bool:
        """Whether a line would be written (the logger takes info), so that lines are
        not made for nothing."""
        return self._log.isEnabledFor(logging.INFO)

    def write(self, lines: list[AccessLine]) -> None:
        if lines and self.enabled:
            self.write_lines([as_line(line) for line in lines])

    def write_lines(self, batch: list[Line]) -> None:
        """Writes lines made already (by `as_line`, or by a caller that knows a quicker
        way to the same fields)."""
        if batch:
            # The message is what a formatter other than llmgw's shows of the batch.
            self._log.info("%d access lines", len(batch), extra={LINES: batch})


def as_line(line: AccessLine) -> Line:
    """The log line an access line is written as."""
    return (line.time_s, f"{line.method} {line.route} {line.status}", access_fields(line))
