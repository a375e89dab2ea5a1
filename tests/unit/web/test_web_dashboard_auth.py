"""The dashboard's session cookie and CSRF token: made with the admin token, refused
when forged, expired, or made with another token."""

from __future__ import annotations

from llmgw.web import dashboard_auth as auth

TOKEN = "the-admin-token"


def test_a_session_holds_until_it_expires_and_never_holds_the_token() -> None:
    value = auth.new_session(TOKEN, 1000.0, nonce="abc")
    assert TOKEN not in value
    assert auth.session_valid(TOKEN, value, 1000.0)
    assert auth.session_valid(TOKEN, value, 1000.0 + auth.SESSION_TTL_S - 1)
    assert not auth.session_valid(TOKEN, value, 1000.0 + auth.SESSION_TTL_S)


def test_a_forged_or_foreign_session_is_refused() -> None:
    value = auth.new_session(TOKEN, 1000.0, nonce="abc")
    expiry, nonce, signature = value.split(".")
    assert not auth.session_valid("another-token", value, 1000.0)
    assert not auth.session_valid(TOKEN, f"{int(expiry) + 3600}.{nonce}.{signature}", 1000.0)
    for junk in (None, "", "1.2", "a.b.c.d"):
        assert not auth.session_valid(TOKEN, junk, 1000.0)


def test_the_csrf_token_is_bound_to_its_credential() -> None:
    one = auth.new_session(TOKEN, 0.0, nonce="one")
    two = auth.new_session(TOKEN, 0.0, nonce="two")
    assert auth.csrf_valid(TOKEN, one, auth.csrf_token(TOKEN, one))
    assert not auth.csrf_valid(TOKEN, two, auth.csrf_token(TOKEN, one))
    assert not auth.csrf_valid(TOKEN, None, auth.csrf_token(TOKEN, one))
    assert auth.csrf_valid(TOKEN, None, auth.csrf_token(TOKEN, None))
    assert not auth.csrf_valid(TOKEN, None, "")


def test_the_bearer_header_must_name_the_token() -> None:
    assert auth.bearer_matches(TOKEN, f"Bearer {TOKEN}")
    assert auth.bearer_matches(TOKEN, f"bearer {TOKEN} ")
    for header in (None, "", TOKEN, f"Basic {TOKEN}", "Bearer other"):
        assert not auth.bearer_matches(TOKEN, header)
