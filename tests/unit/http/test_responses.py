"""Errors as API clients receive them: the status chosen by the error's class, OpenAI's
envelope, Retry-After in whole seconds rounded up; what a client is told when every try
failed before an answer began; and the event that ends a stream cut off midway."""

from __future__ import annotations

import orjson
import pytest

from llmgw.errors import (
    ApiError,
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
    MethodNotAllowed,
    NoCapacity,
    NotAStream,
    NotFound,
    PayloadTooLarge,
    PhaseTimeout,
    RateLimited,
    RateLimitExceeded,
    TotalTimeout,
    Unauthorized,
    UpstreamClosed,
    UpstreamError,
    UpstreamProtocol,
    UpstreamStatus,
    UpstreamUnavailable,
)
from llmgw.http.responses import (
    JSON,
    REASONS,
    api_error_response,
    as_api_error,
    error_body,
    refusal_reason,
    stream_error_event,
)
from llmgw.router.sse import SseRelay

STATUS_CASES = [
    pytest.param(BadRequest, 400, "invalid_request_error", id="bad-request"),
    pytest.param(Unauthorized, 401, "authentication_error", id="unauthorized"),
    pytest.param(Forbidden, 403, "permission_error", id="forbidden"),
    pytest.param(NotFound, 404, "not_found_error", id="not-found"),
    pytest.param(MethodNotAllowed, 405, "invalid_request_error", id="method-not-allowed"),
    pytest.param(PayloadTooLarge, 413, "invalid_request_error", id="payload-too-large"),
    pytest.param(RateLimited, 429, "rate_limit_error", id="rate-limited"),
    pytest.param(ApiError, 500, "server_error", id="base-is-a-server-error"),
    pytest.param(BadGateway, 502, "upstream_error", id="bad-gateway"),
    pytest.param(NoCapacity, 503, "service_unavailable", id="no-capacity"),
    pytest.param(UpstreamUnavailable, 503, "service_unavailable", id="upstream-unavailable"),
    pytest.param(GatewayTimeout, 504, "timeout_error", id="gateway-timeout"),
]


@pytest.mark.parametrize(("cls", "status", "error_type"), STATUS_CASES)
def test_the_status_and_type_come_from_the_class(cls: type[ApiError], status: int, error_type: str) -> None:
    got_status, headers, body = api_error_response(cls("something is wrong", param="model", code="some_code"))
    assert got_status == status
    assert headers == [("content-type", JSON)]
    assert orjson.loads(body) == {
        "error": {"message": "something is wrong", "type": error_type, "param": "model", "code": "some_code"}
    }


def test_the_envelope_carries_nulls_for_what_is_not_known() -> None:
    _, _, body = api_error_response(BadRequest("the request body is not valid JSON"))
    assert orjson.loads(body) == {
        "error": {
            "message": "the request body is not valid JSON",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }


def test_the_status_is_never_read_from_the_message() -> None:
    status, _, _ = api_error_response(BadRequest("503 service unavailable: timed out, not found"))
    assert status == 400


RETRY_AFTER_CASES = [
    pytest.param(0.0, "1", id="zero-is-one"),
    pytest.param(0.2, "1", id="fraction-rounds-up-to-one"),
    pytest.param(1.0, "1", id="whole-second"),
    pytest.param(1.01, "2", id="just-over-rounds-up"),
    pytest.param(2.5, "3", id="half-rounds-up"),
    pytest.param(30.0, "30", id="thirty"),
    pytest.param(-5.0, "1", id="negative-is-one"),
]


@pytest.mark.parametrize(("seconds", "header"), RETRY_AFTER_CASES)
def test_retry_after_is_whole_seconds_rounded_up(seconds: float, header: str) -> None:
    _, headers, _ = api_error_response(NoCapacity("busy", retry_after=seconds))
    assert headers == [("content-type", JSON), ("retry-after", header)]


def test_no_retry_after_header_without_a_delay() -> None:
    _, headers, _ = api_error_response(RateLimited("slow down"))
    assert [name for name, _ in headers] == ["content-type"]


def test_error_body_is_compact_json() -> None:
    body = error_body("m", "t", param="p", code="c")
    assert body == b'{"error":{"message":"m","type":"t","param":"p","code":"c"}}'


# --- every try failed before an answer began -------------------------------------------------------

TIMEOUTS = [
    DialTimeout,
    HeaderTimeout,
    GenerationTimeout,
    FirstTokenTimeout,
    IdleTimeout,
    TotalTimeout,
    PhaseTimeout,
]


@pytest.mark.parametrize("cls", TIMEOUTS, ids=lambda c: c.__name__)
def test_a_timeout_is_a_gateway_timeout(cls: type[PhaseTimeout]) -> None:
    error = as_api_error(cls(2.5), "chat", retry_after=3.0)
    assert isinstance(error, GatewayTimeout)
    assert error.status == 504
    assert error.code == "upstream_timeout"
    assert error.retry_after is None
    assert "'chat'" in error.message
    assert "2.5s" in error.message
    assert cls.phase in error.message


FULL = [
    pytest.param(UpstreamStatus(503, b'{"error":"overloaded"}'), id="status-503"),
    pytest.param(UpstreamStatus(429, b""), id="status-429"),
]


@pytest.mark.parametrize("failure", FULL)
def test_full_replicas_are_no_capacity_with_retry_after(failure: UpstreamError) -> None:
    error = as_api_error(failure, "chat", retry_after=2.5)
    assert isinstance(error, NoCapacity)
    assert error.status == 503
    assert error.code == "no_capacity"
    assert error.retry_after == 2.5
    assert "'chat'" in error.message
    assert "full" in error.message
    _, headers, _ = api_error_response(error)
    assert ("retry-after", "3") in headers


FAILURES = [
    pytest.param(DialError("could not connect to the replica: Connection refused"), id="dial"),
    pytest.param(UpstreamClosed("the replica closed the connection early"), id="closed"),
    pytest.param(UpstreamProtocol("the replica's answer is not valid HTTP"), id="protocol"),
    pytest.param(UpstreamStatus(500, b""), id="status-500"),
    pytest.param(UpstreamStatus(502, b""), id="status-502"),
    pytest.param(UpstreamError("some other failure"), id="base"),
]


@pytest.mark.parametrize("failure", FAILURES)
def test_failed_replicas_are_upstream_unavailable_not_no_capacity(failure: UpstreamError) -> None:
    error = as_api_error(failure, "chat", retry_after=2.5)
    assert isinstance(error, UpstreamUnavailable)
    assert error.status == 503
    assert error.code == "upstream_unavailable"
    assert error.retry_after == 2.5
    assert "'chat'" in error.message
    assert "failed" in error.message
    _, headers, _ = api_error_response(error)
    assert ("retry-after", "3") in headers


def test_a_replica_that_answers_a_stream_with_another_body_is_a_bad_gateway() -> None:
    # Not busy, so no Retry-After; the content type it sent is kept from the client.
    error = as_api_error(
        NotAStream("the replica answered a streaming request with 'text/plain'"), "chat", 2.5
    )
    assert isinstance(error, BadGateway)
    status, headers, body = api_error_response(error)
    assert status == 502
    assert headers == [("content-type", JSON)]
    assert orjson.loads(body) == {
        "error": {
            "message": "model 'chat': the replica did not answer with an event stream",
            "type": "upstream_error",
            "param": None,
            "code": "upstream_not_a_stream",
        }
    }


def test_the_replicas_own_body_is_not_sent_to_the_client() -> None:
    error = as_api_error(UpstreamStatus(500, b"Traceback (most recent call last): secret"), "chat", 1.0)
    status, _, body = api_error_response(error)
    assert status == 503
    assert b"Traceback" not in body
    assert b"secret" not in body


# --- a stream cut off after it began --------------------------------------------------------------

STREAM_CASES = [
    pytest.param(True, "timeout_error", id="timed-out"),
    pytest.param(False, "upstream_error", id="replica-failed"),
]


@pytest.mark.parametrize(("timed_out", "error_type"), STREAM_CASES)
def test_the_last_event_of_a_broken_stream(timed_out: bool, error_type: str) -> None:
    event = stream_error_event("the replica stopped answering", timed_out=timed_out)
    assert event.startswith(b"data: ")
    assert event.endswith(b"\n\n")
    assert orjson.loads(event[len(b"data: ") : -2]) == {
        "error": {
            "message": "the answer was cut off: the replica stopped answering",
            "type": error_type,
            "param": None,
            "code": "stream_interrupted",
        }
    }


def test_the_error_event_is_one_whole_event_whatever_the_reason_says() -> None:
    why = 'idle for 30s\n\ndata: [DONE]\n\n"choices":[]'
    event = stream_error_event(why, timed_out=False)
    assert event.count(b"\n\n") == 1
    assert event.count(b"\n") == 2
    relay = SseRelay(strip_usage=True)
    assert relay.feed(event) == event  # one whole event, nothing taken out of it
    assert relay.usage_event is None
    assert orjson.loads(event[len(b"data: ") : -2])["error"]["message"].endswith(why)


def test_a_dial_failure_does_not_tell_the_client_the_replicas_address() -> None:
    # The message OriginPool.dial builds when a replica at 10.0.0.5:8000 refuses the connection.
    failure = DialError("could not connect to the replica: Connect call failed ('10.0.0.5', 8000)")
    _, _, body = api_error_response(as_api_error(failure, "chat", retry_after=1.0))
    assert b"'chat'" in body
    assert b"10.0.0.5" not in body
    assert b"8000" not in body


@pytest.mark.parametrize("status", [401, 403])
def test_a_replica_refusing_the_gateways_key_is_a_bad_gateway(status: int) -> None:
    engine_body = b'{"error": {"message": "Unauthorized: a valid API key is required"}}'
    error = as_api_error(UpstreamStatus(status, engine_body), "chat", retry_after=2.5)
    assert isinstance(error, BadGateway)
    assert error.code == "upstream_auth"
    got_status, _, body = api_error_response(error)
    assert got_status == 502
    assert orjson.loads(body)["error"]["type"] == "upstream_error"
    assert b"valid API key" not in body
    assert refusal_reason(error) == "upstream_error"


REASON_CASES = [
    pytest.param(BadRequest("x"), "bad_request", id="400"),
    pytest.param(Unauthorized("x"), "unauthorized", id="401"),
    pytest.param(NotFound("x"), "not_found", id="404"),
    pytest.param(MethodNotAllowed("x", allow="POST"), "method_not_allowed", id="405"),
    pytest.param(PayloadTooLarge("x"), "body_too_large", id="413"),
    pytest.param(RateLimitExceeded("x"), "rate_limited", id="429-limit"),
    pytest.param(InsufficientQuota("x"), "quota", id="429-quota"),
    pytest.param(NoCapacity("x"), "no_capacity", id="503"),
    pytest.param(as_api_error(UpstreamStatus(500, b""), "m", 1.0), "upstream_error", id="503-tried"),
    pytest.param(GatewayTimeout("x"), "timeout", id="504"),
    pytest.param(ApiError("x"), "internal", id="500"),
]


@pytest.mark.parametrize(("error", "reason"), REASON_CASES)
def test_each_refusal_has_a_reason_from_the_fixed_set(error: ApiError, reason: str) -> None:
    assert refusal_reason(error) == reason
    assert reason in REASONS


def test_method_not_allowed_says_which_methods_are() -> None:
    _, headers, _ = api_error_response(MethodNotAllowed("/v1/models takes GET", allow="GET"))
    assert ("allow", "GET") in headers
