"""The log formatters (llmgw.obs.logs): a JSON object per line with the RFC 3339 time,
the exception's text and the request's ids; text with the ids and fields as key=value;
the trace id of a span the OpenTelemetry SDK made current; and the access lines
(llmgw.obs.access, llmgw.router.access_log) as a logger writes them."""

from __future__ import annotations

import contextvars
import io
import logging
import re
import sys
from collections.abc import Iterator

import orjson
import pytest
from opentelemetry.sdk.trace import TracerProvider

from llmgw.core.request_context import REQUEST_ID
from llmgw.obs.access import ACCESS_KEYS, AccessLine, AccessLog, access_row
from llmgw.obs.logs import FIELDS, JsonFormatter, TextFormatter, current_trace_id, key_values
from llmgw.router.access_log import AccessRecorder, answered_row
from llmgw.router.usage import Tokens, UsageRecord

Captured = tuple[logging.Logger, io.StringIO, "logging.StreamHandler[io.StringIO]"]
_RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture
def captured() -> Iterator[Captured]:
    """A logger of its own, writing to a string through a handler whose formatter a test sets."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    logger = logging.getLogger("llmgw.test.obs")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    yield logger, out, handler
    logger.removeHandler(handler)


def _lines(out: io.StringIO) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in out.getvalue().splitlines()]


def test_a_json_line_has_time_level_logger_message_and_the_exception(captured: Captured) -> None:
    logger, out, handler = captured
    handler.setFormatter(JsonFormatter())
    try:
        raise ValueError("boom")
    except ValueError:
        logger.exception("it failed for %s", "a reason")
    (line,) = _lines(out)
    assert _RFC3339_UTC.match(str(line["time"]))
    assert (line["level"], line["logger"], line["message"]) == (
        "error",
        "llmgw.test.obs",
        "it failed for a reason",
    )
    assert "Traceback" in str(line["exception"])
    assert "ValueError: boom" in str(line["exception"])
    assert "request_id" not in line  # written outside a request
    assert "trace_id" not in line


def test_a_line_written_in_a_requests_context_carries_its_id(captured: Captured) -> None:
    logger, out, handler = captured
    handler.setFormatter(JsonFormatter())

    def serve() -> None:
        REQUEST_ID.set("req-42")
        logger.warning("inside")

    contextvars.copy_context().run(serve)
    logger.warning("outside")
    inside, outside = _lines(out)
    assert inside["request_id"] == "req-42"
    assert "request_id" not in outside


def test_the_trace_id_is_the_current_spans(captured: Captured) -> None:
    logger, out, handler = captured
    handler.setFormatter(JsonFormatter())
    tracer = TracerProvider().get_tracer("llmgw.test")
    assert "opentelemetry.trace" in sys.modules
    with tracer.start_as_current_span("request") as span:
        logger.info("traced")
        inside = current_trace_id()
    logger.info("not traced")
    traced, untraced = _lines(out)
    assert inside == format(span.get_span_context().trace_id, "032x")
    assert traced["trace_id"] == inside
    assert "trace_id" not in untraced
    assert current_trace_id() == ""


def test_a_text_line_ends_with_its_fields_and_ids_before_any_traceback(captured: Captured) -> None:
    logger, out, handler = captured
    handler.setFormatter(TextFormatter())

    def serve() -> None:
        REQUEST_ID.set("req-7")
        try:
            raise KeyError("k")
        except KeyError:
            logger.exception("failed", extra={FIELDS: {"model": "chat a", "tokens": 3, "stream": True}})

    contextvars.copy_context().run(serve)
    first, *rest = out.getvalue().splitlines()
    assert first.endswith(
        ' ERROR llmgw.test.obs: failed model="chat a" tokens=3 stream=true request_id=req-7'
    )
    assert rest[0].startswith("Traceback")


def test_key_values_leave_out_none_and_quote_what_would_split() -> None:
    assert key_values({"a": 1, "b": None, "c": "x=y", "d": ""}) == 'a=1 c="x=y" d=""'


def test_an_access_lines_fields_are_in_milliseconds_and_all_there() -> None:
    line = AccessLine(0.0, "r1", "", "POST", "/v1/chat/completions", "m", 200, total_s=0.0123456, ttft_s=None)
    when, message, values = access_row(line)
    fields = dict(zip(ACCESS_KEYS, values, strict=True))
    assert (when, message) == (0.0, "POST /v1/chat/completions 200")
    assert fields["total_ms"] == 12.346
    assert {k for k, v in fields.items() if v is not None} == {
        "method",
        "route",
        "model",
        "status",
        "total_ms",
        "request_id",
    }
    assert len(fields) == 15  # every line has every key, None where it does not know


def test_refusals_queue_and_are_written_with_their_ids(captured: Captured) -> None:
    logger, out, handler = captured
    handler.setFormatter(JsonFormatter())
    recorder = AccessRecorder(AccessLog(logger), capacity=2)
    for n in range(3):
        recorder.refused(
            AccessLine(1_700_000_000.5, f"r{n}", "ab" * 16, "GET", "/nope", "", 404, reason="not_found")
        )
    assert out.getvalue() == ""  # nothing written as it was refused
    assert recorder.flush() == 2
    assert recorder.dropped == 1
    first, second = _lines(out)
    assert (first["request_id"], second["request_id"]) == ("r0", "r1")
    assert (first["message"], first["status"], first["reason"], first["trace_id"]) == (
        "GET /nope 404",
        404,
        "not_found",
        "ab" * 16,
    )
    assert first["model"] is None  # a JSON line has every key, null where it does not know
    assert first["time"] == "2023-11-14T22:13:20.500Z"  # the line's own time, not the batch's
    assert recorder.flush() == 0


def test_a_silenced_access_logger_formats_nothing(captured: Captured) -> None:
    logger, out, handler = captured
    handler.setFormatter(JsonFormatter())
    logger.setLevel(logging.WARNING)
    AccessLog(logger).write([AccessLine(0.0, "r", "", "GET", "/", "", 200)])
    assert out.getvalue() == ""


@pytest.mark.parametrize("stream", [False, True])
def test_an_answered_requests_line_has_the_fields_an_access_line_would(stream: bool) -> None:
    record = UsageRecord(
        "r9",
        "m",
        "gpu-1",
        200,
        stream,
        None,
        10.0,
        10.05 if stream else None,
        10.5,
        None,
        b"/v1/completions",
        "gold",
    )
    row = answered_row((record, Tokens(7, 3)), 1_700_000_000.0)
    same = AccessLine(
        1_700_000_010.5,
        "r9",
        "",
        "POST",
        "/v1/completions",
        "m",
        200,
        band="gold",
        replica="gpu-1",
        stream=stream,
        prompt_tokens=7,
        completion_tokens=3,
        ttft_s=0.05 if stream else None,
        total_s=0.5,
    )
    assert row == access_row(same)
