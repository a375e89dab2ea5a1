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
(llmgw.obs.logs.LINES): logging's cost per record is more than a line's. What a line
still costs is in bench/results/obs-access-log-2026-12-03.md.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from llmgw.obs.logs import LINES, Batch, Row

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


ACCESS_KEYS: tuple[str, ...] = (
    "method",
    "route",
    "model",
    "status",
    "reason",
    "band",
    "replica",
    "stream",
    "prompt_tokens",
    "completion_tokens",
    "ttft_ms",
    "total_ms",
    "key_id",
    "request_id",
    "trace_id",
)
"""An access line's fields, in the order a reader scans them; every line has them all."""


def access_row(line: AccessLine) -> Row:
    """The row an access line is written as: its values in ACCESS_KEYS' order, None for
    what it does not know; times in milliseconds, to the microsecond."""
    ttft_s, total_s = line.ttft_s, line.total_s
    return (
        line.time_s,
        f"{line.method} {line.route} {line.status}",
        (
            line.method,
            line.route,
            line.model or None,
            line.status,
            line.reason,
            line.band or None,
            line.replica or None,
            line.stream,
            line.prompt_tokens,
            line.completion_tokens,
            None if ttft_s is None else round(ttft_s * 1000, 3),
            None if total_s is None else round(total_s * 1000, 3),
            line.key_id or None,
            line.request_id,
            line.trace_id or None,
        ),
    )


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
            self.write_rows([access_row(line) for line in lines])

    def write_rows(self, rows: list[Row]) -> None:
        """Writes rows made already (by `access_row`, or by a caller that knows a quicker
        way to the same values)."""
        if rows:
            # The message is what a formatter other than llmgw's shows of the batch.
            self._log.info("%d access lines", len(rows), extra={LINES: Batch(ACCESS_KEYS, rows)})
