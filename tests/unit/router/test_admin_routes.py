"""The router's replica view on the admin API: breaker state and last error per endpoint."""

from __future__ import annotations

import asyncio

import pytest

from llmgw.errors import MethodNotAllowed, NotFound
from llmgw.router.admin_routes import RouterRoutes
from llmgw.router.endpoints import EndpointRegistry, EndpointSpec
from llmgw.upstream import UpstreamClient


def registry() -> EndpointRegistry:
    endpoints = EndpointRegistry(UpstreamClient(), failure_threshold=3, cooldown=30.0)
    endpoints.publish(
        [
            EndpointSpec(id="a", url="http://127.0.0.1:1", models=("m",), api_key="secret-key"),
            EndpointSpec(id="b", url="http://127.0.0.1:2", models=("m",)),
        ]
    )
    return endpoints


def test_replicas_show_breaker_and_last_error_without_the_key() -> None:
    endpoints = registry()
    a = endpoints.get("a")
    assert a is not None
    a.breaker.trip(100.0)
    a.last_error = (100.0, "the replica answered 401")
    routes = RouterRoutes(endpoints, clock=lambda: 105.0, wall_clock=lambda: 1_000_005.0)
    status, payload = asyncio.run(routes.handle("GET", ["replicas"], {}, b""))
    assert status == 200
    rows = {row["id"]: row for row in payload["data"]}
    assert rows["a"]["breaker"] == "open"
    assert rows["a"]["last_error"] == "the replica answered 401"
    assert rows["a"]["last_error_at"] == 1_000_000.0
    assert rows["b"] == {
        "id": "b",
        "models": ["m"],
        "engine": "",
        "breaker": "closed",
        "consecutive_failures": 0,
        "inflight": 0,
        "last_error": None,
        "last_error_at": None,
    }
    assert "secret-key" not in repr(payload)


def test_a_republished_endpoint_keeps_its_last_error() -> None:
    endpoints = registry()
    a = endpoints.get("a")
    assert a is not None
    a.last_error = (1.0, "the replica answered 401")
    endpoints.publish([EndpointSpec(id="a", url="http://127.0.0.1:1", models=("m", "n"))])
    again = endpoints.get("a")
    assert again is not None
    assert again is not a
    assert again.last_error == (1.0, "the replica answered 401")


def test_other_routes_and_methods_are_refused() -> None:
    routes = RouterRoutes(registry())
    with pytest.raises(NotFound):
        asyncio.run(routes.handle("GET", ["nope"], {}, b""))
    with pytest.raises(MethodNotAllowed) as caught:
        asyncio.run(routes.handle("POST", ["replicas"], {}, b""))
    assert caught.value.allow == "GET"
