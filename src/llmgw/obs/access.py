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
    """The line's named values, in the order a reader scans them, leaving out what it
    does not know; times in milliseconds, rounded to the microsecond."""
    fields: dict[str, object] = {"method": line.method, "route": line.route}
    # One test per value rather than a filter over a dict of them all: this runs for
    # every request.
    if line.model:
        fields["model"] = line.model
    fields["status"] = line.status
    if line.reason is not None:
        fields["reason"] = line.reason
    if line.band:
        fields["band"] = line.band
    if line.replica:
        fields["replica"] = line.replica
    if line.stream is not None:
        fields["stream"] = line.stream
    if line.prompt_tokens is not None:
        fields["prompt_tokens"] = line.prompt_tokens
    if line.completion_tokens is not None:
        fields["completion_tokens"] = line.completion_tokens
    if line.ttft_s is not None:
        fields["ttft_ms"] = round(line.ttft_s * 1000, 3)
    if line.total_s is not None:
        fields["total_ms"] = round(line.total_s * 1000, 3)
    if line.key_id:
        fields["key_id"] = line.key_id
    return fields


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
    return Line(
        line.time_s,
        f"{line.method} {line.route} {line.status}",
        access_fields(line),
        line.request_id,
        line.trace_id,
    )
