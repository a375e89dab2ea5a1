"""The canaries on the admin API: listed, one explained in lines, reset by POST, and
refusals that name the route or the models that have one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from llmgw.catalog import Catalog, Model
from llmgw.errors import MethodNotAllowed, NotFound
from llmgw.router.admin_routes import RouterRoutes
from llmgw.router.canary import Canaries
from llmgw.router.endpoints import EndpointRegistry
from llmgw.upstream import UpstreamClient


def _routes() -> tuple[RouterRoutes, Canaries]:
    catalog = Catalog.build(
        [
            Model(name="org/chat", canary={"model": "chat-next", "percent": 50, "min_requests": 4}),
            Model(name="chat-next"),
        ],
        served_statically=("org/chat", "chat-next"),
    )
    canaries = Canaries(catalog, clock=lambda: 10.0)
    endpoints = EndpointRegistry(UpstreamClient(), failure_threshold=3, cooldown=30.0)
    return RouterRoutes(endpoints, clock=lambda: 10.0, canaries=canaries), canaries


def _call(routes: RouterRoutes, method: str, *parts: str) -> tuple[int, Any]:
    return asyncio.run(routes.handle(method, list(parts), {}, b""))


def test_a_rolled_back_canary_is_listed_explained_and_reset() -> None:
    routes, canaries = _routes()
    for _ in range(4):
        canaries.observed("chat-next", error=True)
    status, listed = _call(routes, "GET", "canaries")
    assert status == 200
    [row] = listed["data"]
    assert (row["model"], row["state"], row["percent_in_force"]) == ("org/chat", "rolled_back", 0)
    # A model name with a slash is given as path segments.
    _, one = _call(routes, "GET", "canaries", "org", "chat")
    assert one["rollback"]["reason"] == "error_rate"
    assert one["lines"][0] == "canary: 50% of model org/chat's requests go to chat-next (in force now: 0%)"
    assert "llmgw ctl model canary-reset org/chat" in one["lines"][-1]
    _, reset = _call(routes, "POST", "canaries", "org", "chat", "reset")
    assert (reset["state"], reset["percent_in_force"], reset["rollback"]) == ("running", 50, None)


def test_refusals_name_the_fix() -> None:
    routes, _ = _routes()
    with pytest.raises(NotFound, match=r"models with one: org/chat"):
        _call(routes, "GET", "canaries", "chat-next")
    with pytest.raises(MethodNotAllowed, match="takes POST"):
        _call(routes, "GET", "canaries", "org", "chat", "reset")
    with pytest.raises(MethodNotAllowed, match="takes GET"):
        _call(routes, "DELETE", "canaries", "org", "chat")
    with pytest.raises(MethodNotAllowed):
        _call(routes, "POST", "canaries")
