"""How llmgw's log lines look: plain text for a person at a terminal, or one JSON object
a line for a log pipeline (`--log-format`), each carrying the request it was written
for.

Python's own logging does the work; what is added here are two formatters and the
place they are installed. A line written while a request is served carries that
request's id (a context variable, llmgw.core.request_context) and, when a span is
current, its OpenTelemetry trace id, so a line, an access line and a trace join up. A
record may also carry named values (`extra={"fields": {...}}`): merged into the JSON
object, or appended as `key=value` to the text line.

A record may instead carry a batch of lines with the same keys (`extra={"lines":
Batch(keys, rows)}`), each row its own time, message and values (its ids among them),
written as that many lines. The access log (llmgw.obs.access) writes its lines so: a
record costs more to make and pass through logging's machinery (finding the caller,
the handler's lock) than a line to format (bench/results/obs-access-log-2026-12-03.md),
and a row, a tuple, is turned into its JSON object by
`dict(zip(keys, values))` and orjson, calls into C rather than a step of Python per
field. A batch keeps its None values: JSON writes them as null (every line of a kind
has the same keys, which a log pipeline's schema likes); text leaves them out.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Mapping
from typing import Any, NamedTuple, TextIO

import orjson

from llmgw.config.observability import check_log_format
from llmgw.core.request_context import REQUEST_ID

FIELDS = "fields"
"""The record attribute (`extra={"fields": {...}}`) holding a line's named values."""
LINES = "lines"
"""The record attribute (`extra={"lines": Batch(...)}`) holding a batch of lines."""
_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


Row = tuple[float, str, tuple[object, ...]]
"""One line of a batch: its UNIX time, message, and values in the order of the batch's
keys. A plain tuple: one is made per request."""


class Batch(NamedTuple):
    """Lines with the same keys, written with their record's level and logger name."""

    keys: tuple[str, ...]
    rows: list[Row]


def current_trace_id() -> str:
    """The trace id of the span current in this context, as 32 hex digits; empty when
    there is none. OpenTelemetry is asked only once something has imported it (tracing
    is on): until then no span can be current, and this costs a dictionary lookup."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return ""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else ""


def _context_ids() -> tuple[str, str]:
    """The request and trace id of the context a line is written in."""
    return REQUEST_ID.get(), current_trace_id()


def _text_value(value: object) -> str:
    if type(value) is int:
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"  # as JSON writes them
    text = str(value)
    # Quoted only when it would not read back as one token.
    if not text or " " in text or '"' in text or "=" in text or "\n" in text:
        return orjson.dumps(text).decode()
    return text


def key_values(fields: Mapping[str, object]) -> str:
    """`key=value` pairs, space-separated, leaving out what is None."""
    return " ".join(f"{k}={_text_value(v)}" for k, v in fields.items() if v is not None)


def _with_ids(fields: Mapping[str, object] | None, request_id: str, trace_id: str) -> dict[str, object]:
    extra: dict[str, object] = dict(fields) if fields else {}
    if request_id:
        extra["request_id"] = request_id
    if trace_id:
        extra["trace_id"] = trace_id
    return extra


_INSTALLED = "_llmgw_installed"


class _Stamps:
    """A time's text, its whole seconds made once per second: lines of one batch mostly
    share their second, and formatting a date is most of a short line's cost."""

    def __init__(self, seconds_format: str, utc: bool, fraction: str) -> None:
        self._format = seconds_format
        self._utc = utc
        self._fraction = fraction
        self._second = -1
        self._text = ""

    def __call__(self, when: float) -> str:
        second = int(when)
        if second != self._second:
            moment = time.gmtime(second) if self._utc else time.localtime(second)
            self._second, self._text = second, time.strftime(self._format, moment)
        return self._fraction % (self._text, int((when - second) * 1000))


class TextFormatter(logging.Formatter):
    """`time level logger: message`, then the line's fields and its ids as key=value."""

    def __init__(self) -> None:
        super().__init__(_TEXT_FORMAT)
        self._stamp = _Stamps("%Y-%m-%d %H:%M:%S", False, "%s,%03d")

    def format(self, record: logging.LogRecord) -> str:
        batch = getattr(record, LINES, None)
        if batch is not None:
            return self._batch(batch, f" {record.levelname} {record.name}: ")
        text = super().format(record)
        fields = getattr(record, FIELDS, None)
        extra = _with_ids(fields if isinstance(fields, Mapping) else None, *_context_ids())
        if not extra:
            return text
        # The suffix belongs to the first line; a traceback follows it.
        first, newline, rest = text.partition("\n")
        return f"{first} {key_values(extra)}{newline}{rest}"

    def _batch(self, batch: Batch, head: str) -> str:
        stamp, value = self._stamp, _text_value
        names = [f"{key}=" for key in batch.keys]
        return "\n".join(
            [
                f"{stamp(when)}{head}{message} "
                + " ".join([name + value(v) for name, v in zip(names, values, strict=True) if v is not None])
                for when, message, values in batch.rows
            ]
        )


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (RFC 3339, UTC, milliseconds), level, logger,
    message, the exception's text when there is one, the line's fields and its ids."""

    def __init__(self) -> None:
        super().__init__()
        self._stamp = _Stamps("%Y-%m-%dT%H:%M:%S", True, "%s.%03dZ")

    def format(self, record: logging.LogRecord) -> str:
        level, name = record.levelname.lower(), record.name
        batch = getattr(record, LINES, None)
        if batch is not None:
            return self._batch(batch, level, name)
        line: dict[str, Any] = {
            "time": self._stamp(record.created),
            "level": level,
            "logger": name,
            "message": record.getMessage(),
        }
        fields = getattr(record, FIELDS, None)
        if isinstance(fields, Mapping):
            for key, value in fields.items():
                if value is not None:
                    line.setdefault(key, value)
        request_id, trace_id = _context_ids()
        if request_id:
            line["request_id"] = request_id
        if trace_id:
            line["trace_id"] = trace_id
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(line, default=str).decode()

    def _batch(self, batch: Batch, level: str, name: str) -> str:
        stamp, dumps = self._stamp, orjson.dumps
        keys = ("time", "level", "logger", "message", *batch.keys)
        return b"\n".join(
            [
                dumps(dict(zip(keys, (stamp(when), level, name, message, *values), strict=True)))
                for when, message, values in batch.rows
            ]
        ).decode()


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is when a line is written, as logging's own last
    resort does, so a command run in-process (tests) never keeps a closed stream."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self) -> TextIO:
        return sys.stderr


def install(level: int, log_format: str, stream: TextIO | None = None) -> logging.Handler:
    """Sends every logger's lines at `level` and above to `stream` (stderr) in
    `log_format`; returns the handler. Installing again replaces the handler installed
    before, and leaves handlers llmgw did not install (a test's, say) in place."""
    handler: logging.Handler = logging.StreamHandler(stream) if stream is not None else _StderrHandler()
    handler.setFormatter(JsonFormatter() if check_log_format(log_format) == "json" else TextFormatter())
    setattr(handler, _INSTALLED, True)
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, _INSTALLED, False):
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return handler
