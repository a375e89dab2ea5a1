"""Errors as API clients receive them: OpenAI's envelope, the status chosen by the
exception's type, here and nowhere else.

A replica's own refusal (its 400 for a prompt it will not take) is passed through as
the replica wrote it; what is built here is the gateway's own. A replica's 401 or 403
is not its refusal of the client but of the gateway's engine key: that is the gateway's
fault, answered 502 without the replica's body.

Each refusal also gets a `reason` from a fixed set, by type, for the
`llmgw_requests_total` label: never a class name, which would change with the code.
"""

from __future__ import annotations

import math

import orjson

from llmgw.errors import (
    ApiError,
    AuthUnavailable,
    BadGateway,
    BadRequest,
    DialError,
    DialTimeout,
    FirstTokenTimeout,
    Forbidden,
    GatewayTimeout,
    GenerationTimeout,
    HeaderTimeout,
    IdleTimeout,
    InsufficientQuota,
    LimitRefusal,
    MethodNotAllowed,
    NoCapacity,
    NotAStream,
    NotFound,
    PayloadTooLarge,
    PhaseTimeout,
    RateLimited,
    TotalTimeout,
    Unauthorized,
    UpstreamClosed,
    UpstreamError,
    UpstreamProtocol,
    UpstreamStatus,
    UpstreamUnavailable,
)

JSON = "application/json"

# Most specific first: InsufficientQuota is a RateLimited, UpstreamUnavailable before NoCapacity.
_REASONS: tuple[tuple[type[ApiError], str], ...] = (
    (BadRequest, "bad_request"),
    (Unauthorized, "unauthorized"),
    (Forbidden, "forbidden"),
    (NotFound, "not_found"),
    (MethodNotAllowed, "method_not_allowed"),
    (PayloadTooLarge, "body_too_large"),
    (InsufficientQuota, "quota"),
    (RateLimited, "rate_limited"),
    (UpstreamUnavailable, "upstream_error"),
    (NoCapacity, "no_capacity"),
    (AuthUnavailable, "auth_unavailable"),
    (BadGateway, "upstream_error"),
    (GatewayTimeout, "timeout"),
)
CONNECTION_REASONS: dict[int, str] = {
    400: "bad_http",
    408: "body_timeout",
    414: "bad_http",
    431: "bad_http",
    500: "internal",
    503: "body_memory_full",
}
"""The reason of each status the HTTP server answers in the application's stead (a
request that is not valid HTTP, a body late or over the memory budget, an application
that failed), by status: each status there has one cause."""

REASONS: frozenset[str] = frozenset(
    {reason for _, reason in _REASONS} | {"internal"} | set(CONNECTION_REASONS.values())
)
"""Every value the `reason` label of a gateway-made answer may take."""

ENGINE_AUTH_STATUSES = (401, 403)
"""A replica's refusal of the gateway's own credentials (its engine key)."""


def refusal_reason(error: ApiError) -> str:
    """The metric label for a refusal the gateway made, chosen by its type."""
    for kind, reason in _REASONS:
        if isinstance(error, kind):
            return reason
    return "internal"


# Most specific first, as for _REASONS: each timeout is a PhaseTimeout, NotAStream an
# UpstreamProtocol.
_UPSTREAM_REASONS: tuple[tuple[type[UpstreamError], str], ...] = (
    (DialTimeout, "dial_timeout"),
    (HeaderTimeout, "header_timeout"),
    (FirstTokenTimeout, "first_token_timeout"),
    (GenerationTimeout, "generation_timeout"),
    (IdleTimeout, "idle_timeout"),
    (TotalTimeout, "total_timeout"),
    (PhaseTimeout, "timeout"),
    (DialError, "dial"),
    (UpstreamStatus, "status"),
    (UpstreamClosed, "closed"),
    (NotAStream, "not_a_stream"),
    (UpstreamProtocol, "protocol"),
)
UPSTREAM_FAILURE_REASONS: frozenset[str] = frozenset({r for _, r in _UPSTREAM_REASONS} | {"other"})
"""Every value the `reason` label of `llmgw_upstream_failures_total` may take."""


def upstream_failure_reason(error: UpstreamError) -> str:
    """The metric label for a failed try on a replica, chosen by its type."""
    for kind, reason in _UPSTREAM_REASONS:
        if isinstance(error, kind):
            return reason
    return "other"


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
    elif isinstance(error, MethodNotAllowed) and error.allow:
        headers.append(("allow", error.allow))
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
    if isinstance(error, NotAStream):
        return "the replica did not answer with an event stream"
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
    if isinstance(error, UpstreamStatus) and error.status in ENGINE_AUTH_STATUSES:
        # The client's request was fine: the replica refused the gateway's own key.
        return BadGateway(
            f"model {model!r}: the replica refused the gateway's credentials ({reason}); "
            "the gateway's operator has to fix its engine key",
            code="upstream_auth",
        )
    if isinstance(error, NotAStream):
        # A replica that answers, only not with a stream, is not busy: waiting will not help.
        return BadGateway(f"model {model!r}: {reason}", code="upstream_not_a_stream")
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
