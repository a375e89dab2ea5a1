"""The forms' checks: the signup form's fields, the CSRF token, and `return_to`, which
must stay on this site."""

from __future__ import annotations

import pytest

from llmgw.errors import BadRequest, Forbidden
from llmgw.identity.app import check_csrf, local_path
from llmgw.identity.signup import MAX_REASON, read_form


def test_a_signup_form_is_read_trimmed_and_lowercased() -> None:
    form = read_form({"name": " Ada ", "email": "Ada@Example.COM ", "reason": " models "})
    assert (form.name, form.email, form.reason) == ("Ada", "ada@example.com", "models")


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"email": "ada@example.com"}, "name"),
        ({"name": "Ada", "email": "ada"}, "email"),
        ({"name": "Ada", "email": "ada@localhost"}, "email"),
        ({"name": "Ada", "email": "ada@example.com", "reason": "x" * (MAX_REASON + 1)}, "reason"),
    ],
)
def test_a_bad_signup_field_is_named(fields: dict[str, str], param: str) -> None:
    with pytest.raises(BadRequest) as refused:
        read_form(fields)
    assert refused.value.param == param
    assert refused.value.message.startswith(param + ": ")


def test_the_csrf_token_must_be_this_sessions() -> None:
    check_csrf("abc", "abc")
    for sent, expected in (("", "abc"), ("abd", "abc"), ("abc", None), ("abc", "")):
        with pytest.raises(Forbidden, match="csrf_token"):
            check_csrf(sent, expected)


@pytest.mark.parametrize(
    ("asked", "kept"),
    [
        ("/chat?x=1", "/chat?x=1"),
        ("", "/auth"),
        ("https://evil.example.com/", "/auth"),
        ("//evil.example.com/", "/auth"),
        ("/\\evil.example.com", "/auth"),
        ("/ok\r\nset-cookie: x=1", "/auth"),
    ],
)
def test_return_to_stays_on_this_site(asked: str, kept: str) -> None:
    assert local_path(asked) == kept
