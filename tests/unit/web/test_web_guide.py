"""What the pages say about the gateway, from its settings: the base URL, how to get a
key, the example calls, and the OpenAPI document (valid OpenAPI 3.1)."""

from __future__ import annotations

from typing import Any

from openapi_spec_validator import validate

from llmgw.config import Settings, settings_from_mapping
from llmgw.web import guide
from llmgw.web.openapi import openapi_document


def _settings(document: dict[str, Any]) -> Settings:
    return settings_from_mapping(document, source="test.yaml", environ={})


def test_the_base_url_is_the_host_the_visitor_used() -> None:
    assert guide.base_url("gw.example.com", None, ":8080") == "http://gw.example.com/v1"
    assert guide.base_url("gw.example.com:8443", "https", ":8080") == "https://gw.example.com:8443/v1"
    assert guide.base_url("[::1]:8080", None, ":8080") == "http://[::1]:8080/v1"


def test_a_host_header_that_is_no_host_is_not_repeated() -> None:
    assert guide.base_url('evil"><script>', None, "10.0.0.5:8080") == "http://10.0.0.5:8080/v1"
    assert guide.base_url(None, None, ":8080") == "http://127.0.0.1:8080/v1"
    assert guide.base_url("", None, "0.0.0.0:9000") == "http://127.0.0.1:9000/v1"


def test_a_contact_is_a_link_only_when_it_is_one() -> None:
    assert guide.contact_link("ops@example.com") == "mailto:ops@example.com"
    assert guide.contact_link("https://wiki.example.com/llm") == "https://wiki.example.com/llm"
    assert guide.contact_link("#llm-help on chat") is None
    assert guide.contact_link("javascript:alert(1)") is None


def test_the_way_to_a_key_follows_auth_and_sign_in() -> None:
    open_gateway = guide.key_route(_settings({}), identity=False)
    assert not open_gateway.needs_key
    keyed = _settings(
        {
            "auth": {
                "enabled": True,
                "store": "/tmp/x.db",
                "signup_open": True,
                "oidc": {
                    "issuer": "https://idp.example.com",
                    "client_id": "c",
                    "client_secret_file": "env:S",
                },
            },
            "landing": {"contact": "ops@example.com"},
        }
    )
    route = guide.key_route(keyed, identity=True)
    assert route.needs_key
    assert route.sign_in_url is not None
    assert route.sign_in_url.startswith("/auth/login")
    assert route.signup_url == "/signup"
    assert route.contact_url == "mailto:ops@example.com"
    # Sign-in not served (no identity app): no link to it.
    assert guide.key_route(keyed, identity=False).sign_in_url is None


def test_the_examples_name_a_chat_model_and_an_embedding_model() -> None:
    rows = guide.model_rows(
        [
            {"id": "embed", "capabilities": {"embeddings": True}},
            {"id": "chat", "capabilities": {"tools": True}, "context_length": 4096},
        ]
    )
    assert guide.example_models(rows) == ("chat", "embed")
    assert rows[1].abilities == ("cap_chat", "cap_tools")
    assert guide.example_models([]) == ("MODEL", "MODEL")
    calls = guide.route_examples("http://h/v1", "chat", "embed", needs_key=True)
    assert [c.path for c in calls] == [
        "/chat/completions",
        "/completions",
        "/embeddings",
        "/models",
        "/models/{model}",
    ]
    assert all("Authorization: Bearer $LLMGW_API_KEY" in c.curl for c in calls)
    assert '"model":"embed"' in calls[2].curl


def test_the_openapi_document_is_valid_with_and_without_keys() -> None:
    for needs_key in (True, False):
        document = openapi_document("http://gw.example.com/v1", ["chat", "embed"], needs_key=needs_key)
        validate(document)
        assert document["openapi"] == "3.1.0"
        assert ("security" in document) is needs_key
    assert openapi_document("http://h/v1", [], needs_key=False)["servers"] == [{"url": "http://h/v1"}]
