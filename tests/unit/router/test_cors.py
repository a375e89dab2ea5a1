"""Which origins get CORS headers, and what a preflight is answered."""

from __future__ import annotations

from llmgw.router.cors import EXPOSED, CorsPolicy

SITE = "https://chat.example.com"


def test_a_listed_origin_gets_its_headers_and_others_none() -> None:
    policy = CorsPolicy([SITE], [], 600)
    assert dict(policy.response_headers(SITE)) == {
        "access-control-allow-origin": SITE,
        "vary": "Origin",
        "access-control-expose-headers": EXPOSED,
    }
    assert policy.response_headers("https://other.example.com") == ()
    assert policy.response_headers(None) == ()
    assert not policy.allows("https://other.example.com")


def test_any_origin_is_echoed_but_not_null() -> None:
    policy = CorsPolicy(["*"], [], 600)
    assert dict(policy.response_headers("http://localhost:3000"))["access-control-allow-origin"] == (
        "http://localhost:3000"
    )
    assert policy.response_headers("null") == ()


def test_preflight_allows_the_headers_asked_for_unless_a_list_is_set() -> None:
    asked = "authorization, content-type, x-stainless-os"
    open_headers = dict(CorsPolicy([SITE], [], 90).preflight_headers(SITE, "POST", asked))
    assert open_headers["access-control-allow-headers"] == asked
    assert open_headers["access-control-allow-methods"] == "POST"
    assert open_headers["access-control-max-age"] == "90"
    listed = dict(CorsPolicy([SITE], ["authorization"], 90).preflight_headers(SITE, "POST", asked))
    assert listed["access-control-allow-headers"] == "authorization"


def test_preflight_does_not_echo_a_header_list_that_is_not_one() -> None:
    headers = dict(CorsPolicy([SITE], [], 90).preflight_headers(SITE, "GET", "a\tb;c"))
    assert "access-control-allow-headers" not in headers
