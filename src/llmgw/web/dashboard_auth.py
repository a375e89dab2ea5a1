"""Who may read the operator dashboard, and the CSRF token its forms carry: pure
functions of the admin token and the clock.

The admin token opens it, sent as `Authorization: Bearer <token>` (scripts, curl) or
typed once into the sign-in form, which sets a session cookie. The cookie holds no
token: it is an expiry and a random nonce signed with the token (HMAC-SHA256), so it
is checked without server state, works on every server sharing the token, and every
session ends when the token is replaced.

A form that changes something carries a CSRF token bound to the credential it came
with (the session's nonce, or the bearer header): a page on another site cannot read
it, so a POST it forges is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

SESSION_COOKIE = "llmgw_dashboard"
SESSION_TTL_S = 12 * 3600
"""A working day: a session outlives a shift, not a week."""
_BEARER = "bearer"


def _sign(token: str, message: str) -> str:
    digest = hmac.new(token.encode(), message.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def token_matches(token: str, given: str) -> bool:
    """Whether `given` is the admin token, compared in constant time."""
    return hmac.compare_digest(given.strip().encode(), token.encode())


def bearer_matches(token: str, authorization: str | None) -> bool:
    """Whether an Authorization header is `Bearer <admin token>`."""
    if not authorization:
        return False
    scheme, _, given = authorization.strip().partition(" ")
    return scheme.lower() == "bearer" and token_matches(token, given)


def new_session(token: str, now: float, nonce: str | None = None) -> str:
    """A session cookie's value: expiry, nonce, and their signature."""
    body = f"{int(now) + SESSION_TTL_S}.{nonce or secrets.token_urlsafe(16)}"
    return f"{body}.{_sign(token, 'session:' + body)}"


def session_valid(token: str, value: str | None, now: float) -> bool:
    """Whether a session cookie's value was made with this token and has not expired."""
    if not value or value.count(".") != 2:
        return False
    body, _, signature = value.rpartition(".")
    expiry = body.partition(".")[0]
    if not hmac.compare_digest(signature.encode(), _sign(token, "session:" + body).encode()):
        return False
    return expiry.isdigit() and int(expiry) > now


def csrf_token(token: str, session: str | None) -> str:
    """The CSRF token of the forms shown to this credential (a session, or None for the
    bearer header)."""
    return _sign(token, "csrf:" + (session or _BEARER))


def csrf_valid(token: str, session: str | None, sent: str) -> bool:
    return bool(sent) and hmac.compare_digest(sent.encode(), csrf_token(token, session).encode())
