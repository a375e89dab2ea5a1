"""Errors as API clients receive them: OpenAI's envelope, the status chosen by the
exception's type, here and nowhere else.

A replica's own refusal (its 400 for a prompt it will not take) is passed through as
the replica wrote it; what is built here is the gateway's own.
"""

from __future__ import annotations

import math

import orjson

from llmgw.errors import (
    ApiError,
    DialError,
    GatewayTimeout,
    LimitRefusal,
    NoCapacity,
    PhaseTimeout,
    UpstreamClosed,
    UpstreamError,
    UpstreamProtocol,
    UpstreamStatus,
    UpstreamUnavailable,
)

JSON = "application/json"


def error_body(message: str, error_type: str, *, param: str | None = None, code: str | None = None) -> bytes:
    """OpenAI's error envelope."""
    return orjson.dumps({"error": {"message": message, "type": error_type, "param": param, "code": code}})


def api_error_response(error: ApiError) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers and body for a refusal."""
    headers = [("content-type", JSON)]
    if error.retry_after is not None:
        headers.append(("retry-after", str(max(1, math.ceil(error.retry_after)))))
    if isinstance(error, LimitRefusal):
        headers.extend(error.headers)
    return (
        error.status,
        headers,
        error_body(error.message, error.error_type, param=error.param, code=error.code),
    )


def _public_reason(error: UpstreamError) -> str:
    """What a client may be told of a failure: its kind, never its details, which can
    name a replica's internal address."""
    if isinstance(error, PhaseTimeout):
        return str(error)
    if isinstance(error, UpstreamStatus):
        return f"the replica answered {error.status}"
    if isinstance(error, DialError):
        return "no replica accepted a connection"
    if isinstance(error, UpstreamClosed):
        return "the replica closed the connection early"
    if isinstance(error, UpstreamProtocol):
        return "the replica's answer was not valid HTTP"
    return "the replica failed"


# Replica statuses that mean full (overloaded, or not ready to take more), as opposed to
# failed: only these make the refusal `no_capacity`.
_FULL_STATUSES = frozenset((429, 503))


def as_api_error(error: UpstreamError, model: str, retry_after: float) -> ApiError:
    """What a client is told when every try for its request failed before an answer began:
    a timeout names the bound that fired (504), full replicas are `no_capacity`, failed
    ones `upstream_unavailable` (both 503 with Retry-After)."""
    reason = _public_reason(error)
    if isinstance(error, PhaseTimeout):
        return GatewayTimeout(
            f"model {model!r}: the replica did not answer in time: {reason}", code="upstream_timeout"
        )
    if isinstance(error, UpstreamStatus) and error.status in _FULL_STATUSES:
        return NoCapacity(
            f"model {model!r}: every replica tried is full ({reason}); try again shortly",
            code="no_capacity",
            retry_after=retry_after,
        )
    return UpstreamUnavailable(
        f"model {model!r}: every replica tried failed ({reason}); try again shortly",
        code="upstream_unavailable",
        retry_after=retry_after,
    )


def stream_error_event(why: str, *, timed_out: bool) -> bytes:
    """The last event of a stream that broke after it began: an error in OpenAI's shape,
    so the client knows the answer is incomplete rather than taking it for a whole one."""
    kind = "timeout_error" if timed_out else "upstream_error"
    body = error_body(f"the answer was cut off: {why}", kind, code="stream_interrupted")
    return b"data: " + body + b"\n\n"
