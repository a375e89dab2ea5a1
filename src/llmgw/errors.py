"""The one exception hierarchy of llmgw.

Every error llmgw raises on purpose derives from `LlmgwError`. Foreign exceptions (YAML
parser, HTTP client, database driver, subprocess) are converted where they enter, with
`raise ... from exc`, so the layers above deal in these types only:

    LlmgwError
      ConfigError          a configuration or catalog that cannot be used; carries every
                           problem found, one sentence each, naming the field and the fix
        CatalogError       the catalog part of it: a model definition that is refused
      UpstreamError        talking to an engine replica failed (retryable on another one
                           while nothing has been written to the client)
        DialError          could not connect
        UpstreamClosed     the replica closed the connection early
        UpstreamProtocol   the replica answered something that is not HTTP
          NotAStream       a streaming request answered 200 with a body that is not an
                           event stream (JSON, plain text)
        UpstreamStatus     the replica answered a status worth retrying (5xx, 429)
        PhaseTimeout       one phase of the exchange ran past its bound; one subclass
                           per phase (dial, response header, generation, first token,
                           idle between chunks, total), each named in its message
      StoreError           the store of keys, tenancy and usage (SQLite or PostgreSQL) failed
        StoreUnavailable   it could not be reached, or did not answer in time
        StoreConflict      a row with that identity exists already, or still has dependents
        StoreMissing       no row with that identity
        StoreStale         the row changed since the caller read it (a SCIM If-Match)
      ApiError             a refusal sent to an API client; its class carries the HTTP
                           status and OpenAI's error type, so the status is chosen by
                           type in one place (http/responses.py), never by reading text
        LimitRefusal       a 429 that carries response headers (`headers`) besides
                           Retry-After; a RateLimited
          RateLimitExceeded  an RPM or TPM limit is reached; x-ratelimit-* headers
          InsufficientQuota  a budget is spent (OpenAI's insufficient_quota)
        Conflict           409: the admin API cannot create or delete that as asked
        SignInRefused      403: a sign-in that is not let through (a token that does not
                           check out, a replayed state, a domain not allowed, a person
                           disabled); its `code` says which, its message how to go on
        AuthUnavailable    503: a key that is not cached cannot be checked because the
                           store cannot be reached
        UpstreamUnavailable 503: every replica that could serve the request failed
                           (errors, open breakers); NoCapacity is for replicas that are full
      BackupError          a backup could not be written or copied, or an archive cannot
                           be restored (wrong key, damaged, a server still running); its
                           message is one sentence naming what and the fix
      AgentError           a node agent could not do what it was asked
        AgentProtocolError a message that is not one of the agent protocol's, or a peer
                           speaking a version this side does not
        ReplicaError       an engine replica could not be started or supervised
          NoFreePort       every port of control.port_range is taken on this node
        WeightsError       weights could not be resolved or fetched
          ChecksumMismatch fetched weights differ from the catalog's Origin checksum

A message never carries a stack trace, an internal address or a credential.
"""

from __future__ import annotations

from collections.abc import Iterable


class LlmgwError(Exception):
    """Base of every error llmgw raises deliberately."""


class ConfigError(LlmgwError):
    """A configuration that cannot be loaded, with every problem found in it."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems) or ("the configuration is invalid",)
        super().__init__("\n".join(self.problems))


class CatalogError(ConfigError):
    """A model definition the catalog refuses."""


# --- talking to replicas -------------------------------------------------------------


class UpstreamError(LlmgwError):
    """A replica could not be used for this request; another one may be tried."""


class DialError(UpstreamError):
    """No connection could be made to the replica."""


class UpstreamClosed(UpstreamError):
    """The replica closed the connection before the answer was complete."""


class UpstreamProtocol(UpstreamError):
    """The replica's answer could not be read as HTTP."""


class NotAStream(UpstreamProtocol):
    """A streaming request was answered 200 with a body that is not an event stream."""


class UpstreamStatus(UpstreamError):
    """The replica answered with a status that another replica may not: 5xx or 429."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body
        super().__init__(f"the replica answered {status}")


class PhaseTimeout(UpstreamError):
    """One phase of an exchange with a replica ran past its bound."""

    phase = "request"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        super().__init__(f"the replica's {self.phase} took longer than {seconds:g}s")


class DialTimeout(PhaseTimeout):
    phase = "connection (router.timeouts.dial)"


class HeaderTimeout(PhaseTimeout):
    phase = "response headers (router.timeouts.response_header)"


class GenerationTimeout(PhaseTimeout):
    phase = "answer (router.timeouts.generation)"


class FirstTokenTimeout(PhaseTimeout):
    phase = "first token (router.timeouts.first_token)"


class IdleTimeout(PhaseTimeout):
    phase = "pause between tokens (router.timeouts.idle)"


class TotalTimeout(PhaseTimeout):
    phase = "whole answer (router.timeouts.total)"


# --- refusals sent to API clients ----------------------------------------------------


class ApiError(LlmgwError):
    """A refusal in OpenAI's error shape. Subclasses fix the status and the type."""

    status = 500
    error_type = "server_error"

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.message = message
        self.param = param
        self.code = code
        self.retry_after = retry_after
        super().__init__(message)


class BadRequest(ApiError):
    status = 400
    error_type = "invalid_request_error"


class Unauthorized(ApiError):
    status = 401
    error_type = "authentication_error"


class Forbidden(ApiError):
    status = 403
    error_type = "permission_error"


class SignInRefused(Forbidden):
    """A sign-in refused: the identity provider's answer did not check out, or the person
    may not come in. The code names the check (`bad_signature`, `wrong_audience`...)."""


class NotFound(ApiError):
    status = 404
    error_type = "not_found_error"


class MethodNotAllowed(ApiError):
    """405; `allow` is the route's methods, sent as the Allow header HTTP requires."""

    status = 405
    error_type = "invalid_request_error"

    def __init__(
        self, message: str, *, allow: str = "", param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message, param=param, code=code)
        self.allow = allow


class PayloadTooLarge(ApiError):
    status = 413
    error_type = "invalid_request_error"


class RateLimited(ApiError):
    status = 429
    error_type = "rate_limit_error"


class NoCapacity(ApiError):
    status = 503
    error_type = "service_unavailable"


class BadGateway(ApiError):
    status = 502
    error_type = "upstream_error"


class GatewayTimeout(ApiError):
    status = 504
    error_type = "timeout_error"


# --- the store and the limits on the client port ---------------------------------------


class StoreError(LlmgwError):
    """The store of keys, tenancy and usage failed."""


class StoreUnavailable(StoreError):
    """The store could not be reached, or did not answer in time."""


class StoreConflict(StoreError):
    """A row with that identity exists already, or other rows still refer to it."""


class StoreMissing(StoreError):
    """No row with that identity."""


class StoreStale(StoreError):
    """The row changed since the caller read it (its version is not the one expected)."""


class LimitRefusal(RateLimited):
    """A 429 with headers to send besides Retry-After, as (name, value) pairs."""

    def __init__(
        self,
        message: str,
        *,
        headers: Iterable[tuple[str, str]] = (),
        param: str | None = None,
        code: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, param=param, code=code, retry_after=retry_after)
        self.headers: list[tuple[str, str]] = list(headers)


class RateLimitExceeded(LimitRefusal):
    """A requests-a-minute or tokens-a-minute limit is reached; the headers are OpenAI's
    x-ratelimit-* set."""


class InsufficientQuota(LimitRefusal):
    """A budget is spent for its period."""

    error_type = "insufficient_quota"


class Conflict(ApiError):
    status = 409
    error_type = "invalid_request_error"


class AuthUnavailable(ApiError):
    status = 503
    error_type = "service_unavailable"


class UpstreamUnavailable(ApiError):
    """Every replica that could serve the request failed, rather than being full."""

    status = 503
    error_type = "service_unavailable"


# --- the node agent ------------------------------------------------------------------


class BackupError(LlmgwError):
    """`llmgw server backup` or `restore` could not do its work; nothing half-done stays."""


class AgentError(LlmgwError):
    """A node agent could not do what it was asked."""


class AgentProtocolError(AgentError):
    """A message outside the agent protocol, or from a peer of another version."""


class ReplicaError(AgentError):
    """An engine replica could not be started or supervised."""


class NoFreePort(ReplicaError):
    """Every port of the node's port range is taken."""


class WeightsError(AgentError):
    """Weights could not be resolved or fetched."""


class ChecksumMismatch(WeightsError):
    """A fetched file's SHA-256 differs from the one the catalog's Origin gives."""


class FirewallError(AgentError):
    """nft is missing, or refused llmgw's table."""
